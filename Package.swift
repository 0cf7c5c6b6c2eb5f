// swift-tools-version:6.1
import PackageDescription

let strict: [SwiftSetting] = [.swiftLanguageMode(.v6)]

let package = Package(
    name: "AssertGate",
    platforms: [.macOS(.v14)],
    products: [
        .executable(name: "assertgate", targets: ["AssertGate"]),
        .executable(name: "assertgate-device", targets: ["assertgate-device"]),
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
            name: "CHiredis", path: "Sources/CHiredis", pkgConfig: "hiredis",
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
        .target(name: "DeviceSim", dependencies: ["COpenSSL"], swiftSettings: strict),
        .target(
            name: "AssertGateCore",
            dependencies: [
                "Verifier", "CNGHTTP2", "CHiredis", "COpenSSL",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Yams", package: "Yams"),
            ],
            swiftSettings: strict),
        .executableTarget(
            name: "AssertGate",
            dependencies: [
                "AssertGateCore", "Verifier",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
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
        .executableTarget(
            name: "assertgate-device",
            dependencies: [
                "DeviceSim", "DeviceClient",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ],
            swiftSettings: strict),
        .testTarget(
            name: "DeviceClientTests",
            dependencies: ["DeviceClient", .product(name: "NIOPosix", package: "swift-nio")],
            exclude: ["Support/h2_test_server.py", "Support/h1_test_server.py"],
            swiftSettings: strict),
        .testTarget(name: "VerifierTests", dependencies: ["Verifier", "DeviceSim"], swiftSettings: strict),
        .testTarget(name: "DeviceSimTests", dependencies: ["DeviceSim"], swiftSettings: strict),
        .testTarget(
            name: "AssertGateTests",
            dependencies: [
                "AssertGateCore",
                .product(name: "NIOEmbedded", package: "swift-nio"),
            ],
            swiftSettings: strict),
    ]
)
