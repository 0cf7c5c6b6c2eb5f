// swift-tools-version:6.1
import PackageDescription

let strict: [SwiftSetting] = [.swiftLanguageMode(.v6)]

let package = Package(
    name: "AssertGate",
    platforms: [.macOS(.v14)],
    products: [
        .executable(name: "assertgate", targets: ["AssertGate"]),
        .executable(name: "assertgate-device", targets: ["assertgate-device"]),
        .executable(name: "verifier-bench", targets: ["verifier-bench"]),
        .library(name: "Verifier", targets: ["Verifier"]),
        .library(name: "DeviceSim", targets: ["DeviceSim"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/apple/swift-asn1.git", from: "1.7.4"),
        .package(url: "https://github.com/jpsim/Yams.git", from: "6.2.2"),
        .package(url: "https://github.com/HdrHistogram/hdrhistogram-swift.git", from: "0.2.0"),
    ],
    targets: [
        .systemLibrary(
            name: "CNGHTTP2", path: "Sources/CNGHTTP2", pkgConfig: "libnghttp2",
            providers: [.apt(["libnghttp2-dev"])]),
        .systemLibrary(
            // No pkgConfig: hiredis.pc adds -D_FILE_OFFSET_BITS=64, a flag
            // SwiftPM refuses with a warning; the headers are in /usr/include.
            name: "CHiredis", path: "Sources/CHiredis",
            providers: [.apt(["libhiredis-dev"])]),
        .systemLibrary(
            name: "COpenSSL", path: "Sources/COpenSSL", pkgConfig: "openssl",
            providers: [.apt(["libssl-dev"])]),
        .target(
            name: "Verifier",
            dependencies: [
                "COpenSSL",
                .product(name: "SwiftASN1", package: "swift-asn1"),
            ],
            swiftSettings: strict),
        .executableTarget(name: "verifier-bench", dependencies: ["Verifier"], swiftSettings: strict),
        .target(name: "DeviceSim", dependencies: ["COpenSSL"], swiftSettings: strict),
        // TLS over OpenSSL memory BIOs: contexts, the channel handler, ALPN.
        .target(
            name: "GatewayTLS",
            dependencies: [
                "COpenSSL",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strict),
        // The Redis client: RESP over hiredis' parser, pipelined connections,
        // Redis Cluster routing; TLS (rediss://) from GatewayTLS.
        .target(
            name: "AssertGateRedis",
            dependencies: [
                "GatewayTLS", "CHiredis", "COpenSSL",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
            ],
            swiftSettings: strict),
        .target(
            name: "AssertGateCore",
            dependencies: [
                "Verifier", "GatewayTLS", "AssertGateRedis", "CNGHTTP2", "COpenSSL",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Yams", package: "Yams"),
            ],
            swiftSettings: strict),
        .target(
            name: "CLISupport",
            dependencies: [.product(name: "ArgumentParser", package: "swift-argument-parser")],
            swiftSettings: strict),
        .executableTarget(
            name: "AssertGate",
            dependencies: [
                "AssertGateCore", "Verifier", "CLISupport",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
            ],
            swiftSettings: strict),
        .target(
            name: "DeviceClient",
            dependencies: [
                "CNGHTTP2", "COpenSSL",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "Histogram", package: "hdrhistogram-swift"),
            ],
            swiftSettings: strict),
        // A stand-in for Apple's DeviceCheck and App Attest data servers, for
        // tests and demos (`assertgate-device apple-mock`).
        .target(
            name: "AppleMock",
            dependencies: [
                "AssertGateCore", "GatewayTLS", "DeviceSim", "Verifier", "COpenSSL",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
            ],
            swiftSettings: strict),
        .executableTarget(
            name: "assertgate-device",
            dependencies: [
                "DeviceSim", "DeviceClient", "CLISupport", "AppleMock", "Verifier",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            swiftSettings: strict),
        .executableTarget(name: "rules-bench", dependencies: ["AssertGateCore", "Verifier"], swiftSettings: strict),
        .executableTarget(
            name: "store-bench",
            dependencies: [
                "AssertGateCore", "AssertGateRedis", "GatewayTLS",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ],
            swiftSettings: strict),
        .testTarget(
            name: "VerifierTests",
            dependencies: ["Verifier", "DeviceSim", "COpenSSL", .product(name: "Yams", package: "Yams")],
            swiftSettings: strict),
        .testTarget(
            name: "DeviceClientTests",
            dependencies: ["DeviceClient", "AssertGateTestSupport", .product(name: "NIOPosix", package: "swift-nio")],
            exclude: ["Support/h2_test_server.py", "Support/h1_test_server.py"],
            swiftSettings: strict),
        .testTarget(name: "DeviceSimTests", dependencies: ["DeviceSim"], swiftSettings: strict),
        .testTarget(
            name: "GatewayTLSTests",
            dependencies: [
                "GatewayTLS", "AssertGateTestSupport", "COpenSSL",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
            ],
            swiftSettings: strict),
        // Fixtures shared by the test targets (a private redis-server per test).
        .target(
            name: "AssertGateTestSupport",
            dependencies: ["AssertGateRedis"],
            path: "Tests/TestSupport",
            swiftSettings: strict),
        .testTarget(
            name: "AssertGateRedisTests",
            dependencies: [
                "AssertGateRedis", "AssertGateTestSupport",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
            ],
            swiftSettings: strict),
        .testTarget(
            name: "AssertGateTests",
            dependencies: [
                "AssertGateCore", "AssertGateRedis", "GatewayTLS", "AssertGateTestSupport", "COpenSSL", "CNGHTTP2",
                "DeviceSim", "Verifier",
                .product(name: "Yams", package: "Yams"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
            ],
            swiftSettings: strict),
        .testTarget(
            name: "IntegrationTests",
            dependencies: [
                "AssertGateCore", "AssertGateRedis", "GatewayTLS", "AssertGateTestSupport", "DeviceSim", "Verifier",
                "AppleMock",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ],
            exclude: [
                "Adversarial", "Support/https_upstream.py", "H2Upstream/h2_scripted_upstream.py",
                "H2Upstream/h2_trailer_client.py",
            ],
            swiftSettings: strict),
    ]
)
