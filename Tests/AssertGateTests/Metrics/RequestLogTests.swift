import Foundation
import Logging
import Testing
import Verifier

@testable import AssertGateCore

@Suite struct RequestLogTests {
    private func summary(
        target: String = "/enforce/pay?token=s3cr3t", reason: ReasonToken? = nil, forwarded: ReasonToken? = nil,
        trust: String? = nil, detail: String? = nil
    ) -> RequestSummary {
        RequestSummary(
            requestId: "req-1", method: "POST", target: target, upstream: "legacy", status: reason?.httpStatus ?? 200,
            reason: reason, trust: trust, durationNanoseconds: 1, aborted: false, forwardedReason: forwarded, detail: detail)
    }

    private func logger(_ level: Logger.Level, _ format: LogFormat = .json) -> (Logger, MemoryLogSink) {
        let sink = MemoryLogSink()
        let control = LogControl(level: level, format: format)
        return (Logger(label: "gw") { GatewayLogHandler(label: $0, control: control, sink: sink) }, sink)
    }

    @Test func aRefusedRequestIsLoggedWithItsReasonAndNoQuery() throws {
        let (logger, sink) = logger(.info)
        let log = RequestLog(logger: logger)
        log.requestFinished(summary(reason: .counterReplay))
        log.requestFinished(summary(trust: "verified"))  // forwarded verified: nothing to say
        log.requestFinished(summary(forwarded: .missingAssertion, trust: "missing"))  // debug only
        #expect(sink.lines.count == 1)
        let line = try #require(sink.lines.first)
        let object = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
        #expect(object["msg"] as? String == "request refused")
        #expect(object["reason"] as? String == "counter-replay")
        #expect(object["requestId"] as? String == "req-1")
        #expect(object["status"] as? String == "403")
        #expect(object["path"] as? String == "/enforce/pay")
        #expect(object["route"] as? String == "legacy")
        #expect(!line.contains("s3cr3t"))
        #expect(RequestLog.loggablePath("/api;jsessionid=ABC/pay;v=1?q=2") == "/api/pay")
        #expect(RequestLog.loggablePath("/a#frag") == "/a")
    }

    @Test func unverifiedForwardsAreLoggedAtDebugWithTheAttestDetail() throws {
        let (logger, sink) = logger(.debug)
        let log = RequestLog(logger: logger)
        log.requestFinished(summary(forwarded: .storeUnavailable, trust: "unavailable"))
        log.requestFinished(summary(target: "/ag/attest", reason: .nonceMismatch, detail: "nonce is not SHA-256(authData ‖ clientDataHash)"))
        #expect(sink.lines.count == 2)
        #expect(sink.lines[0].contains(#""msg":"request forwarded unverified""#))
        #expect(sink.lines[0].contains(#""trust":"unavailable""#))
        #expect(sink.lines[1].contains(#""detail":"nonce is not SHA-256"#))
    }

    @Test func hostilePathsCannotForgeTextFieldsOrGrowTheLine() throws {
        let (logger, sink) = logger(.info, .text)
        let log = RequestLog(logger: logger)
        log.requestFinished(summary(target: "/a\u{1B}[31m\r\nfake reason=ok", reason: .noRoute))
        log.requestFinished(summary(target: "/" + String(repeating: "x", count: 5000), reason: .noRoute))
        #expect(sink.lines.count == 2)
        let forged = sink.lines[0]
        #expect(forged.filter { $0 == "\n" || $0 == "\r\n" }.count == 1)
        #expect(!forged.contains("\u{1B}"))
        #expect(forged.contains(#"path="/a\u001b[31m\r\nfake reason=ok""#))
        #expect(forged.contains(" reason=no-route"))
        #expect(sink.lines[1].utf8.count < RequestLog.maxPathLength + 300)
        #expect(sink.lines[1].contains("…"))
    }
}
