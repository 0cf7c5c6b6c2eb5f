import AppleMock
import AssertGateTestSupport
import Foundation
import NIOCore
import Testing

@testable import AssertGateCore

/// DeviceCheckClient against the Apple mock over real TLS on 127.0.0.1:
/// every kind of answer, kept connections, timeouts, and the host chosen per
/// call.
@Suite struct DeviceCheckClientTests {
    @Test func validateQueryUpdateQueryOnOneKeptConnection() async throws {
        let f = try await AppleMockFixture.start()
        let c = f.client
        func token() throws -> String { try MockDeviceToken.make(device: "alice") }
        #expect(try await c.validate(deviceToken: try token(), environment: .production, on: f.loop).get() == .valid)
        // Never set: the mock answers 200 "Failed to find bit state", as Apple does.
        #expect(try await c.query(deviceToken: try token(), environment: .production, on: f.loop).get() == .unset)
        #expect(
            try await c.update(deviceToken: try token(), bit0: true, bit1: nil, environment: .production, on: f.loop).get()
                == .updated)
        let month = String(RFC3339.format(unixNanoseconds: Int64(Date().timeIntervalSince1970) * 1_000_000_000).prefix(7))
        // Another token of the same device sees the bits; another device does not.
        #expect(
            try await c.query(deviceToken: try token(), environment: .production, on: f.loop).get()
                == .bits(DeviceCheckBits(bit0: true, bit1: false, lastUpdate: month)))
        #expect(
            try await c.query(deviceToken: try MockDeviceToken.make(device: "bob"), environment: .production, on: f.loop)
                .get() == .unset)
        // One TLS connection for all five calls, on either side.
        #expect(c.production.connectionsOpened == 1)
        #expect(f.production.connections == 1)
        let requests = f.production.requests
        #expect(requests.map(\.endpoint) == [.validate, .query, .update, .query, .query])
        #expect(Set(requests.compactMap(\.transactionId)).count == 5, "transaction ids are unique")
        let now = Int64(Date().timeIntervalSince1970 * 1000)
        #expect(requests.allSatisfy { ($0.timestampMillis ?? 0) > now - 60_000 && ($0.timestampMillis ?? 0) <= now })
        #expect(requests[2].bit0 == true && requests[2].bit1 == nil)
        #expect(f.development.requests.isEmpty)
        try await f.stop()
    }

    @Test func theDevelopmentHostIsChosenPerCall() async throws {
        let f = try await AppleMockFixture.start()
        let t = try MockDeviceToken.make(device: "dev")
        #expect(try await f.client.validate(deviceToken: t, environment: .development, on: f.loop).get() == .valid)
        #expect(
            try await f.client.update(deviceToken: t, bit0: nil, bit1: true, environment: .development, on: f.loop).get()
                == .updated)
        #expect(f.development.requests.map(\.endpoint) == [.validate, .update])
        #expect(f.production.requests.isEmpty)
        #expect(f.development.bits(device: "dev")?.bit1 == true)
        #expect(f.production.bits(device: "dev") == nil)
        try await f.stop()
    }

    @Test func forgedAndMalformedTokensAreInvalid() async throws {
        let f = try await AppleMockFixture.start()
        let other = try MockDeviceToken.make(device: "alice", secret: Array("another secret".utf8))
        guard case .invalidToken = try await f.client.query(deviceToken: other, environment: .production, on: f.loop).get()
        else { Issue.record("a token of another secret was accepted"); return }
        // Not base64 at all: refused without asking Apple.
        let sent = f.production.requests.count
        guard case .invalidToken = try await f.client.validate(deviceToken: "not\"base64", environment: .production, on: f.loop).get()
        else { Issue.record("a non-base64 token was sent"); return }
        #expect(f.production.requests.count == sent)
        try await f.stop()
    }

    @Test func aKeyAppleDoesNotKnowIsUnauthorized() async throws {
        let f = try await AppleMockFixture.start()
        let pki = try await TestPKI.shared.value
        let (otherKey, _) = try await AppleMockFixture.keyPair()
        let wrong = try AppleMockFixture.makeClient(
            privateKeyPEM: otherKey, production: f.production, development: f.development, caFile: pki.caCertificate,
            timeout: .seconds(5))
        let result = try await wrong.validate(
            deviceToken: try MockDeviceToken.make(device: "alice"), environment: .production, on: f.loop
        ).get()
        #expect(result == .unauthorized(status: 401, reason: "Unable to verify authorization token"))
        wrong.closeIdle()
        try await f.stop()
    }

    @Test func everyScriptedAnswerHasItsResult() async throws {
        let f = try await AppleMockFixture.start()
        let m = f.production
        m.script(
            [
                .status(429, "Too many requests"), .status(500, "Internal Server Error"), .status(503, ""),
                .bitStateNotFound, .failedToFindBitState, .neverSet("something else entirely"),
                .status(400, "Missing or badly formatted authorization token"), .status(403, "Forbidden"),
                .status(400, "Bad Bits"),
            ], for: .query)
        let expected: [DeviceCheckResult] = [
            .throttled, .failed("Apple answered 500: Internal Server Error"), .failed("Apple answered 503"), .unset,
            .unset, .unset, .unauthorized(status: 400, reason: "Missing or badly formatted authorization token"),
            .unauthorized(status: 403, reason: "Forbidden"), .badRequest("Bad Bits"),
        ]
        for want in expected {
            let got = try await f.client.query(
                deviceToken: try MockDeviceToken.make(device: "carol"), environment: .production, on: f.loop
            ).get()
            #expect(got == want)
        }
        // Error answers keep the connection too.
        #expect(f.client.production.connectionsOpened == 1)
        try await f.stop()
    }

    @Test func anAnswerLargerThanTheLimitIsAFailure() async throws {
        let f = try await AppleMockFixture.start()
        f.production.script([.status(200, String(repeating: "x", count: DeviceCheckClient.maxAnswerBytes + 1))], for: .validate)
        let result = try await f.client.validate(
            deviceToken: try MockDeviceToken.make(device: "gus"), environment: .production, on: f.loop
        ).get()
        #expect(result == .failed("127.0.0.1: answer larger than \(DeviceCheckClient.maxAnswerBytes) bytes"))
        try await f.stop()
    }

    @Test func aStalledAppleTimesOutWithinTheCallsTimeoutAndTheNextCallWorks() async throws {
        let f = try await AppleMockFixture.start(timeout: .seconds(10))
        f.production.script([.stall], for: .validate)
        let start = ContinuousClock.now
        let result = try await f.client.validate(
            deviceToken: try MockDeviceToken.make(device: "dave"), environment: .production, timeout: .milliseconds(300),
            on: f.loop
        ).get()
        let elapsed = ContinuousClock.now - start
        guard case .failed(let why) = result else {
            Issue.record("expected failed, got \(result)")
            return
        }
        #expect(why.contains("no complete answer in time"), "\(why)")
        #expect(elapsed >= .milliseconds(300) && elapsed < .seconds(5), "\(elapsed)")
        // The stalled connection is dropped; the next call opens another.
        #expect(
            try await f.client.validate(
                deviceToken: try MockDeviceToken.make(device: "dave"), environment: .production, on: f.loop
            ).get() == .valid)
        #expect(f.client.production.connectionsOpened == 2)
        try await f.stop()
    }

    @Test func latencyPastTheTimeoutFailsAndWithinItSucceeds() async throws {
        let f = try await AppleMockFixture.start()
        f.production.setLatency(.milliseconds(400), for: .query)
        let t = { try MockDeviceToken.make(device: "erin") }
        guard case .failed = try await f.client.query(
            deviceToken: try t(), environment: .production, timeout: .milliseconds(100), on: f.loop
        ).get() else {
            Issue.record("a slow answer did not time out")
            return
        }
        #expect(
            try await f.client.query(deviceToken: try t(), environment: .production, timeout: .seconds(5), on: f.loop).get()
                == .unset)
        try await f.stop()
    }

    @Test func appleClosingWithoutAnAnswerOrBeingDownIsFailed() async throws {
        let f = try await AppleMockFixture.start()
        f.production.script([.close, .close], for: .validate)
        guard case .failed = try await f.client.validate(
            deviceToken: try MockDeviceToken.make(device: "fay"), environment: .production, on: f.loop
        ).get() else {
            Issue.record("a closed connection was not a failure")
            return
        }
        let development = f.development.baseURL
        try await f.development.stop()
        guard case .failed(let why) = try await f.client.validate(
            deviceToken: try MockDeviceToken.make(device: "fay"), environment: .development, on: f.loop
        ).get() else {
            Issue.record("a stopped host was not a failure")
            return
        }
        #expect(why.contains("127.0.0.1"), "\(why) (\(development))")
        f.client.closeIdle()
        try await f.production.stop()
    }
}
