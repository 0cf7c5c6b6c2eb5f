import DeviceClient
import Foundation
import NIOCore
import NIOPosix
import Testing

private struct Stats: Decodable {
    let attested: Int
    let asserted: Int
    let unasserted: Int
    let maxInFlightPerKey: Int
    let connections: Int
    let deviceTokens: Int
    let distinctDeviceTokens: Int
}

@Suite("gateway API and load generator against the fake gateway", .serialized)
struct LoadGeneratorTests {
    let group = MultiThreadedEventLoopGroup.singleton

    private func stats(port: Int) async throws -> Stats {
        let client = HTTP2Client(target: GatewayURL(host: "127.0.0.1", port: port), eventLoop: group.next())
        defer { _ = client.shutdown() }
        let response = try await client.execute(
            HTTPClientRequest(method: "GET", path: "/stats", authority: "127.0.0.1:\(port)"))
        return try JSONDecoder().decode(Stats.self, from: Data(response.body))
    }

    @Test func attestThenSignedRequestsAndReplay() async throws {
        let server = try TestH2Server()
        defer { server.stop() }
        let url = GatewayURL(host: "127.0.0.1", port: server.port)
        let client = HTTP2Client(target: url, eventLoop: group.next())
        defer { _ = client.shutdown() }
        let api = GatewayAPI(requester: client, authority: url.authority)
        let device = FakeDevice()

        let attested = try await api.attest(device: device, userId: "alice")
        #expect(attested.status == 201)

        let body = Array(#"{"amount":5}"#.utf8)
        var request = HTTPClientRequest(method: "POST", path: "/api/pay?x=1", authority: url.authority, body: body)
        request.headers = try AssertionSigner().headers(
            device: device, counter: 1, method: "POST", path: "/api/pay?x=1", challenge: nil, bodyHash: .body(body))
        #expect(try await client.execute(request).status == 200)
        // The same assertion again: the counter did not increase.
        let replayed = try await client.execute(request)
        #expect(replayed.status == 403)
        #expect(replayed.bodyText.contains("counter-replay"))

        // With an assert challenge.
        let challenge = try await api.challenge(keyId: device.keyId, purpose: .assert)
        #expect(challenge.count == 43)
        var withChallenge = HTTPClientRequest(method: "GET", path: "/api/x", authority: url.authority)
        withChallenge.headers = try AssertionSigner().headers(
            device: device, counter: 2, method: "GET", path: "/api/x", challenge: challenge, bodyHash: .body([]))
        #expect(try await client.execute(withChallenge).status == 200)

        // A body that is not the signed one fails the (fake) signature check.
        var tampered = request
        tampered.body = Array(#"{"amount":500}"#.utf8)
        tampered.headers = try AssertionSigner().headers(
            device: device, counter: 3, method: "POST", path: "/api/pay?x=1", challenge: nil, bodyHash: .body(body))
        #expect(try await client.execute(tampered).status == 403)
    }

    @Test func loadWithOneKeyPerStreamSlotNeverReplays() async throws {
        let server = try TestH2Server()
        defer { server.stop() }
        var options = LoadOptions(target: GatewayURL(host: "127.0.0.1", port: server.port))
        options.method = "POST"
        options.path = "/api/load?delay=2"
        options.body = Array("payload".utf8)
        options.connections = 2
        options.streams = 4
        options.requests = 400
        let report = try await LoadGenerator(options: options, group: group, deviceFactory: FakeDeviceFactory()).run()
        #expect(report.keys == 8)
        #expect(report.requests == 400)
        #expect(report.successes == 400)
        #expect(report.failures.isEmpty)
        #expect(report.requestsPerSecond > 0)
        #expect(report.latencyMs.p50 >= 2)  // the server holds each request 2 ms
        #expect(report.latencyMs.p50 <= report.latencyMs.p99)
        #expect(report.latencyMs.p99 <= report.latencyMs.max)
        let s = try await stats(port: server.port)
        #expect(s.attested == 8)
        #expect(s.asserted == 400)
        #expect(s.maxInFlightPerKey == 1)
    }

    @Test func deviceTokensAreFreshOnEveryRequestWarmupIncluded() async throws {
        let server = try TestH2Server()
        defer { server.stop() }
        var options = LoadOptions(target: GatewayURL(host: "127.0.0.1", port: server.port))
        options.path = "/api/dc"
        options.connections = 2
        options.streams = 3
        options.requests = 120
        let made = Calls()
        options.deviceTokens = LoadDeviceTokens { slot, n in
            made.add(slot, n)
            return "token-\(slot.connection)-\(slot.stream)-\(n)"
        }
        let report = try await LoadGenerator(options: options, group: group, deviceFactory: FakeDeviceFactory()).run()
        #expect(report.successes == 120)
        let s = try await stats(port: server.port)
        // One token per request, never the same twice, with the assertion beside it.
        #expect(s.asserted == 120)
        #expect(s.deviceTokens == 120)
        #expect(s.distinctDeviceTokens == 120)
        let calls = made.value
        #expect(Set(calls.keys) == Set((0..<2).flatMap { c in (0..<3).map { LoadSlot(connection: c, stream: $0) } }))
        // Each slot counts its own requests from 1.
        #expect(calls.values.allSatisfy { $0 == Array(1...$0.count) })
        #expect(calls.values.reduce(0) { $0 + $1.count } == 120)

        // Passthrough (no assertion headers, as on a `fallback: device` route), with a warm-up.
        let before = s.deviceTokens
        options.deviceTokens = LoadDeviceTokens(header: "X-Other-Token") { _, _ in "x" }
        options.passthrough = true
        options.requests = 10
        let other = try await LoadGenerator(options: options, group: group, deviceFactory: nil).run()
        #expect(other.successes == 10)
        #expect(try await stats(port: server.port).deviceTokens == before)  // another header name
    }

    @Test func passthroughSendsNoAssertionsAndWarmupIsNotCounted() async throws {
        let server = try TestH2Server()
        defer { server.stop() }
        var options = LoadOptions(target: GatewayURL(host: "127.0.0.1", port: server.port))
        options.path = "/open"
        options.connections = 1
        options.streams = 3
        options.duration = 0.3
        options.warmup = 0.2
        options.passthrough = true
        let report = try await LoadGenerator(options: options, group: group, deviceFactory: nil).run()
        #expect(report.keys == 0)
        #expect(report.requests > 0)
        #expect(report.successes == report.requests)
        #expect(report.elapsedSeconds >= 0.3)
        let s = try await stats(port: server.port)
        #expect(s.asserted == 0)
        #expect(s.attested == 0)
        // Warm-up requests reached the server but are not in the report.
        #expect(s.unasserted > report.requests)
    }

    @Test func rateIsAnUpperBoundOnRequestsPerSecond() async throws {
        let server = try TestH2Server()
        defer { server.stop() }
        var options = LoadOptions(target: GatewayURL(host: "127.0.0.1", port: server.port))
        options.path = "/open"
        options.connections = 2
        options.streams = 2
        options.requests = 60
        options.rate = 100
        options.passthrough = true
        let report = try await LoadGenerator(options: options, group: group, deviceFactory: nil).run()
        #expect(report.successes == 60)
        // Paced at 100/s over 4 slots: 60 requests cannot finish in less than
        // (60 - 4) / 100 s, however fast the server is.
        #expect(report.elapsedSeconds >= 0.56)
    }

    @Test func pacedLatencyCountsFromWhenTheRequestWasDue() async throws {
        let server = try TestH2Server()
        defer { server.stop() }
        var options = LoadOptions(target: GatewayURL(host: "127.0.0.1", port: server.port))
        options.path = "/open?delay=40"
        options.connections = 1
        options.streams = 1
        options.requests = 6
        options.rate = 100
        options.passthrough = true
        options.recordSamples = true
        let report = try await LoadGenerator(options: options, group: group, deviceFactory: nil).run()
        #expect(report.successes == 6)
        // One slot due every 10 ms, each answer taking 40 ms: request k is
        // due at 10k ms but can only leave at 40k ms, so its latency counts
        // the 30k ms it waited for its slot. Measured from the send alone,
        // every request would show ~40 ms.
        let latencies = report.samples.sorted { $0.sentMicros < $1.sentMicros }.map(\.latencyMicros)
        #expect(latencies.count == 6)
        #expect(latencies.allSatisfy { $0 >= 40_000 }, "\(latencies)")
        #expect(latencies.last.map { $0 >= 40_000 + 5 * 30_000 } == true, "\(latencies)")
        // Due times keep the schedule: 10 ms apart, not re-phased after each late answer.
        let due = report.samples.map(\.sentMicros).sorted()
        #expect(zip(due.dropFirst(), due).allSatisfy { abs($0 - $1 - 10_000) < 1_000 }, "\(due)")
    }

    @Test func presignedAssertionsAreAcceptedAndPacingSpreadsConnections() async throws {
        let server = try TestH2Server()
        defer { server.stop() }
        var options = LoadOptions(target: GatewayURL(host: "127.0.0.1", port: server.port))
        options.method = "POST"
        options.path = "/api/presigned"
        options.body = Array("payload".utf8)
        options.connections = 2
        options.streams = 2
        options.requests = 40
        options.warmup = 0.05
        options.rate = 200
        options.presign = true
        options.recordSamples = true
        let report = try await LoadGenerator(options: options, group: group, deviceFactory: FakeDeviceFactory()).run()
        // Signed before the run, each with the counter it is sent with: the
        // fake gateway checks signature, body hash and counter order.
        #expect(report.successes == 40)
        #expect(report.failures.isEmpty)
        #expect(report.samples.count == 40)
        let s = try await stats(port: server.port)
        #expect(s.maxInFlightPerKey == 1)
        // Four slots at 200/s: one request every 5 ms overall, so no two
        // sends (of any connection) fall within 2 ms of each other once the
        // first interval has passed (the same phase on both connections would
        // send pairs together).
        let sent = report.samples.map(\.sentMicros).sorted()
        let gaps = zip(sent.dropFirst(), sent).map { $0 - $1 }
        #expect(gaps.filter { $0 < 2_000 }.count <= 4, "gaps: \(gaps)")
    }

    @Test func cpuOfATargetProcessIsReportedForTheMeasuredWindow() async throws {
        let server = try TestH2Server()
        defer { server.stop() }
        var options = LoadOptions(target: GatewayURL(host: "127.0.0.1", port: server.port))
        options.path = "/open"
        options.requests = 50
        options.passthrough = true
        options.cpuPid = getpid()
        let report = try await LoadGenerator(options: options, group: group, deviceFactory: nil).run()
        let cpu = try #require(report.targetCPUSeconds)
        #expect(cpu >= 0)
        #expect(ProcessCPU.seconds(pid: getpid()) != nil)
        #expect(ProcessCPU.seconds(pid: -1) == nil)
    }

    @Test func failuresAreCountedByStatusAndReason() async throws {
        let server = try TestH2Server()
        defer { server.stop() }
        var options = LoadOptions(target: GatewayURL(host: "127.0.0.1", port: server.port))
        options.path = "/x?status=503"
        options.requests = 10
        options.passthrough = true
        let report = try await LoadGenerator(options: options, group: group, deviceFactory: nil).run()
        #expect(report.successes == 0)
        #expect(report.failures == ["503": 10])
    }

    @Test func loadWithoutDeviceFactoryFailsClearly() async throws {
        let server = try TestH2Server()
        defer { server.stop() }
        var options = LoadOptions(target: GatewayURL(host: "127.0.0.1", port: server.port))
        options.requests = 1
        await #expect(throws: LoadGenerator.SetupError.self) {
            _ = try await LoadGenerator(options: options, group: group, deviceFactory: nil).run()
        }
    }
}

/// What a `LoadDeviceTokens.make` was called with, from any loop.
private final class Calls: @unchecked Sendable {
    private let lock = NSLock()
    private var calls: [LoadSlot: [Int]] = [:]
    func add(_ slot: LoadSlot, _ n: Int) { lock.withLock { calls[slot, default: []].append(n) } }
    var value: [LoadSlot: [Int]] { lock.withLock { calls } }
}
