import Logging
import NIOCore
import NIOEmbedded
import Foundation
import NIOHTTP1
import Testing
import Verifier

@testable import AssertGateCore

/// What a front end would have been told by a pipeline.
final class RecordingSink: ResponseSink {
    let allocator = ByteBufferAllocator()
    var status: Int?
    var headers = HTTPHeaders()
    var body = ""
    var ended = false
    var aborted = false
    var consumed = 0
    var finished = 0
    var isCongested = false

    func sendResponseHead(status: Int, headers: HTTPHeaders, endStream: Bool) {
        precondition(self.status == nil, "two heads")
        self.status = status
        self.headers = headers
        if endStream { ended = true }
    }
    func sendUpstreamResponseHead(_ head: UpstreamResponseHead, requestId: String) { status = head.status }
    var interims: [Int] = []
    func sendInterimHead(_ head: UpstreamResponseHead) { interims.append(head.status) }
    func sendResponseBody(_ buffer: ByteBuffer) { body += String(buffer: buffer) }
    var trailers: HTTPHeaders?
    func sendResponseTrailers(_ fields: HTTPHeaders) { trailers = fields }
    func sendResponseEnd() { ended = true }
    func abortResponse(http2ErrorCode: UInt32?) { aborted = true }
    func requestBodyConsumed(_ bytes: Int) { consumed += bytes }
    func pipelineFinished() { finished += 1 }
}

/// A gate whose decision the test gives, now or later.
final class ScriptedGate: RequestGate {
    var policy: GateBodyPolicy = .stream
    var decision: GateDecision?
    var pending: EventLoopPromise<GateDecision>?
    let loop: EventLoop
    init(loop: EventLoop) { self.loop = loop }
    func bodyPolicy(for request: ProxyRequest, route: RouteConfig) -> GateBodyPolicy { policy }
    func evaluate(_ request: ProxyRequest, route: RouteConfig, body: ByteBuffer?) -> GateOutcome {
        if let decision { return .decided(decision) }
        let p = loop.makePromise(of: GateDecision.self)
        pending = p
        return .pending(p.futureResult)
    }
}

/// The pipeline on its own: an embedded loop, a recording sink, a scripted
/// gate, no sockets. Upstream exchanges are covered by the integration suite.
@Suite struct RequestPipelineTests {
    final class Fixture {
        let loop = EmbeddedEventLoop()
        let worker: Worker
        let gate: ScriptedGate
        let observer = RecordingObserver()
        let sink = RecordingSink()

        init(configure: (inout GatewayConfig) -> Void = { _ in }) {
            worker = Worker.forTests(on: loop, mode: .enforce, configure: configure)
            gate = ScriptedGate(loop: loop)
            worker.gate = gate
            worker.observer = observer
        }

        func pipeline(
            _ method: String = "POST", _ target: String = "/api/x", framing: RequestBodyFraming = .none,
            refusal: Rejection? = nil
        ) -> RequestPipeline {
            let request = ProxyRequest(
                method: method, target: target, authority: "gw", scheme: "http", headers: HTTPHeaders(),
                requestId: "req-1", clientAddress: "127.0.0.1", snapshot: worker.snapshot)
            return RequestPipeline(
                request: request, body: RequestBodyInfo(framing: framing), sink: sink, worker: worker, refusal: refusal)
        }

        var reason: String? {
            body.flatMap { $0["reason"] }
        }
        private var body: [String: String]? {
            guard let data = sink.body.data(using: .utf8),
                let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any]
            else { return nil }
            return object.compactMapValues { $0 as? String }
        }
    }

    private func isFinished(_ p: RequestPipeline) -> Bool {
        if case .finished = p.stage { return true }
        return false
    }

    @Test func refusedHeadIsAnsweredBeforeAnythingElse() {
        let f = Fixture()
        let p = f.pipeline(refusal: Rejection(.malformedRequest, "a header name spelled with an underscore"))
        p.start()
        #expect(f.sink.status == 400)
        #expect(f.reason == "malformed-request")
        #expect(f.sink.headers.first(name: "x-request-id") == "req-1")
        #expect(f.sink.finished == 1)
        #expect(isFinished(p))
        #expect(f.observer.summaries.first?.reason == .malformedRequest)
        #expect(f.observer.summaries.first?.detail == "a header name spelled with an underscore")
    }

    @Test func noRouteAndAnnouncedBodyTooLarge() {
        let f = Fixture { $0.limits.maxRequestBodyBytes = 10 }
        f.pipeline("GET", "/elsewhere").start()
        #expect(f.sink.status == 404)
        #expect(f.reason == "no-route")
        let g = Fixture { $0.limits.maxRequestBodyBytes = 10 }
        g.pipeline(framing: .contentLength(11)).start()
        #expect(g.sink.status == 413)
        #expect(g.observer.summaries.count == 1)
    }

    @Test func bufferedBodyGoesToTheGateAndARejectionAnswersIt() {
        let f = Fixture()
        f.gate.policy = .buffer(limit: 100)
        f.gate.decision = .reject(Rejection(.badSignature))
        let p = f.pipeline(framing: .contentLength(6))
        p.start()
        if case .buffering = p.stage {} else { Issue.record("expected buffering, got \(p.stage)") }
        p.receiveBody(ByteBuffer(string: "abc"))
        p.receiveBody(ByteBuffer(string: "def"))
        #expect(f.sink.status == nil)
        p.receiveEnd()
        #expect(f.sink.status == 403)
        #expect(f.reason == "bad-signature")
        // Buffered bytes gave the window back as they arrived.
        #expect(f.sink.consumed == 6)
        #expect(f.worker.bufferedBodyBytes == 0)
        #expect(p.exchange.response == .sent(status: 403))
    }

    @Test func bodyOverTheGateLimitIs413AndReleasesTheBudget() {
        let f = Fixture()
        f.gate.policy = .buffer(limit: 4)
        let p = f.pipeline(framing: .chunked)
        p.start()
        p.receiveBody(ByteBuffer(string: "abcde"))
        #expect(f.sink.status == 413)
        #expect(f.worker.bufferedBodyBytes == 0)
        // Bytes after the answer are discarded, and still credited.
        p.receiveBody(ByteBuffer(string: "xy"))
        #expect(f.sink.consumed == 7)
        #expect(f.sink.finished == 1)
    }

    @Test func workerBudgetExhaustedIsGatewayBusyWithRetryAfter() {
        let f = Fixture { $0.limits.maxBufferedBodyBytes = 8 }
        f.gate.policy = .buffer(limit: 100)
        f.pipeline(framing: .contentLength(9)).start()
        #expect(f.sink.status == 503)
        #expect(f.reason == "gateway-busy")
        #expect(f.sink.headers.first(name: "retry-after") == "1")
    }

    @Test func forwardRendersTheOutcomeOnceAndRecordsIt() {
        // The fixture's upstream has no endpoints: the lease fails with 502,
        // after the gate's outcome was recorded for metrics.
        let f = Fixture()
        f.gate.decision = .forward(.invalid(.badSignature))
        f.pipeline("GET").start()
        #expect(f.sink.status == 502)
        #expect(f.reason == "upstream-unavailable")
        let s = f.observer.summaries.first
        #expect(s?.trust == "invalid")
        #expect(s?.forwardedReason == .badSignature)
        #expect(s?.upstream == "u")
    }

    /// 1-byte chunks held while the gate decides are joined: a window's worth
    /// costs about its bytes, not a buffer each (130 times their size).
    @Test func smallChunksHeldForTheGateAreJoined() throws {
        let f = Fixture()
        let p = f.pipeline("POST", framing: .chunked)
        p.start()
        if case .deciding = p.stage {} else { Issue.record("expected deciding, got \(p.stage)") }
        for i in 0..<20_000 {
            p.receiveBody(ByteBuffer(string: String(UnicodeScalar(UInt8(97 + i % 26)))))
        }
        #expect(p.heldBodyBuffers <= 2, "\(p.heldBodyBuffers) buffers")
        // A large chunk is kept as it came.
        p.receiveBody(ByteBuffer(repeating: 0x41, count: 8192))
        #expect(p.heldBodyBuffers <= 3)
        p.downstreamAborted()
        try #require(f.gate.pending).succeed(.forward(.none))
        f.loop.run()
        #expect(f.sink.finished == 1)
    }

    @Test func clientLeavingWhileTheGateWorksEndsWithoutAnAnswer() throws {
        let f = Fixture()
        let p = f.pipeline("GET")
        p.start()
        if case .deciding = p.stage {} else { Issue.record("expected deciding, got \(p.stage)") }
        p.downstreamAborted()
        // The gate's work still counts: the pipeline waits for it.
        #expect(f.sink.finished == 0)
        let pending = try #require(f.gate.pending)
        pending.succeed(.forward(.none))
        f.loop.run()
        #expect(f.sink.status == nil)
        #expect(f.sink.finished == 1)
        #expect(isFinished(p))
        #expect(f.observer.summaries.first?.status == 0)
        #expect(f.observer.summaries.first?.aborted == true)
    }

    @Test func storeFailureInTheGateIsStoreUnavailable() throws {
        let f = Fixture()
        let p = f.pipeline("GET")
        p.start()
        struct Down: Error {}
        try #require(f.gate.pending).fail(Down())
        f.loop.run()
        #expect(f.sink.status == 503)
        #expect(f.reason == "store-unavailable")
    }

    @Test func stalledBodyIsRequestTimeout() {
        let f = Fixture {
            $0.limits.requestBodyTimeout = .seconds(2)
            $0.limits.minRequestBodyRate = 0
        }
        f.gate.policy = .buffer(limit: 100)
        let p = f.pipeline(framing: .contentLength(10))
        p.start()
        p.receiveBody(ByteBuffer(string: "abc"))
        f.loop.advanceTime(by: .milliseconds(1900))
        #expect(f.sink.status == nil)
        f.loop.advanceTime(by: .milliseconds(200))
        #expect(f.sink.status == 408)
        #expect(f.reason == "request-timeout")
        #expect(f.observer.timeouts == [.requestBody])
    }

    @Test func aRoutesOwnBodyTimeoutReplacesTheGlobalOne() {
        let f = Fixture {
            $0.limits.requestBodyTimeout = .seconds(2)
            $0.limits.minRequestBodyRate = 0
            $0.routes[0].limits.requestBodyTimeout = .seconds(30)
        }
        f.gate.policy = .buffer(limit: 100)
        let p = f.pipeline(framing: .contentLength(10))
        p.start()
        p.receiveBody(ByteBuffer(string: "abc"))
        // Past the global 2 s, the route's stream is still waited for.
        f.loop.advanceTime(by: .seconds(29))
        #expect(f.sink.status == nil)
        f.loop.advanceTime(by: .seconds(2))
        #expect(f.sink.status == 408)
        #expect(f.reason == "request-timeout")
    }

    @Test func aRoutesOwnMinimumRateReplacesTheGlobalOne() {
        let f = Fixture {
            $0.limits.requestBodyTimeout = .seconds(2)
            $0.limits.minRequestBodyRate = 1024
            $0.routes[0].limits.minRequestBodyRate = 0
        }
        f.gate.policy = .buffer(limit: 100)
        let p = f.pipeline(framing: .contentLength(50))
        p.start()
        // A byte a second: far under 1 KiB/s, never quiet for 2 s.
        for _ in 0..<10 {
            p.receiveBody(ByteBuffer(string: "a"))
            f.loop.advanceTime(by: .seconds(1))
        }
        #expect(f.sink.status == nil)
        f.loop.advanceTime(by: .seconds(2))
        #expect(f.sink.status == 408)
    }

    @Test func aRoutesOwnBodyLimitHoldsAboveOrBelowTheGlobalOne() {
        // Above: an announced body the global limit would refuse is read.
        let above = Fixture {
            $0.limits.maxRequestBodyBytes = 10
            $0.routes[0].limits.maxRequestBodyBytes = 100
        }
        above.gate.policy = .buffer(limit: 1000)
        let a = above.pipeline(framing: .contentLength(50))
        a.start()
        if case .buffering(_, let limit) = a.stage {
            #expect(limit == 100, "the gate's 1000 capped by the route's limit, got \(limit)")
        } else {
            Issue.record("expected buffering, got \(a.stage)")
        }
        // Below: an announced body over the route's limit is refused before a byte is read,
        let below = Fixture { $0.routes[0].limits.maxRequestBodyBytes = 5 }
        below.pipeline(framing: .contentLength(6)).start()
        #expect(below.sink.status == 413)
        #expect(below.observer.summaries.first?.detail == "content-length over the route's limits.maxRequestBodyBytes")
        // and a streamed one as soon as it goes over.
        let streamed = Fixture { $0.routes[0].limits.maxRequestBodyBytes = 5 }
        let s = streamed.pipeline(framing: .chunked)
        s.start()
        s.receiveBody(ByteBuffer(string: "abc"))
        #expect(streamed.sink.status == nil)
        s.receiveBody(ByteBuffer(string: "def"))
        #expect(streamed.sink.status == 413)
        #expect(streamed.reason == "body-too-large")
    }

    @Test func localHandlerAnswerGetsTheGatewaysRequestIdAndALength() {
        let f = Fixture()
        let local = EchoLengthHandler(eventLoop: f.loop)
        f.worker.localHandlers = [local]
        let p = f.pipeline("POST", "/local/x", framing: .contentLength(4))
        p.start()
        p.receiveBody(ByteBuffer(string: "1234"))
        p.receiveEnd()
        f.loop.run()
        #expect(f.sink.status == 200)
        #expect(f.sink.body == "len=4")
        #expect(f.sink.headers[canonicalForm: "x-request-id"] == ["req-1"])
        #expect(f.sink.headers.first(name: "content-length") == "5")
        #expect(local.calls == 1)
    }

    @Test func grpcRequestsAreRefusedInTrailers() {
        let f = Fixture()
        let request = ProxyRequest(
            method: "POST", target: "/pkg.Service/Method", authority: "gw", scheme: "http",
            headers: HTTPHeaders([("content-type", "application/grpc")]), requestId: "req-g", clientAddress: nil,
            snapshot: f.worker.snapshot)
        let p = RequestPipeline(request: request, body: RequestBodyInfo(framing: .none), sink: f.sink, worker: f.worker)
        p.start()
        #expect(f.sink.status == 200)
        #expect(f.sink.ended)
        #expect(f.sink.body.isEmpty)
        #expect(f.sink.headers.first(name: "grpc-status") == "12")
        #expect(f.sink.headers.first(name: "assertgate-reason") == "no-route")
        #expect(f.observer.summaries.first?.reason == .noRoute)
    }

    @Test func malformedBodyAfterTheHeadIs400() {
        let f = Fixture()
        f.gate.policy = .buffer(limit: 100)
        let p = f.pipeline(framing: .chunked)
        p.start()
        p.receiveMalformedBody()
        #expect(f.sink.status == 400)
        // The request half is complete: a later end changes nothing.
        p.receiveEnd()
        #expect(f.sink.finished == 1)
    }
}

@Suite struct ExchangeStateTests {
    @Test func requestHalfCompletesOnce() {
        var s = ExchangeState(requestComplete: false)
        let first = s.completeRequest()
        let second = s.completeRequest()
        #expect(first && !second)
        #expect(ExchangeState(requestComplete: true).requestIsComplete)
    }

    @Test func responseStreamsPausesAndEnds() {
        var s = ExchangeState(requestComplete: true)
        let pausedBeforeHead = s.pause()
        s.startResponse(status: 200)
        let paused = s.pause()
        let pausedTwice = s.pause()
        #expect(!pausedBeforeHead && paused && !pausedTwice)
        #expect(s.isPaused)
        let resumed = s.resume()
        let resumedTwice = s.resume()
        #expect(resumed && !resumedTwice)
        s.endResponse()
        #expect(s.outcome == (200, false))
        let left = s.clientLeft()
        let cut = s.cut()
        #expect(!left && !cut)
    }

    @Test func clientLeavingOrGatewayCuttingIsReportedDifferently() {
        var left = ExchangeState(requestComplete: true)
        left.startResponse(status: 200)
        let leaving = left.clientLeft()
        #expect(leaving && left.clientIsGone)
        #expect(left.outcome == (0, true))
        // Nobody to tell any more.
        let cutAfterLeaving = left.cut()
        #expect(!cutAfterLeaving)

        var cut = ExchangeState(requestComplete: true)
        cut.startResponse(status: 201)
        let cutting = cut.cut()
        #expect(cutting && !cut.clientIsGone)
        #expect(cut.outcome == (201, true))
        let leftAfterCut = cut.clientLeft()
        #expect(!leftAfterCut)
    }

    @Test func anAnswerIsWholeAtOnce() {
        var s = ExchangeState(requestComplete: false)
        s.answerWhole(status: 404)
        #expect(s.response == .sent(status: 404))
        #expect(s.outcome == (404, false))
    }

    @Test func illegalMovesTrap() async {
        await #expect(processExitsWith: .failure) {
            var s = ExchangeState(requestComplete: true)
            s.startResponse(status: 200)
            s.startResponse(status: 200)
        }
        await #expect(processExitsWith: .failure) {
            var s = ExchangeState(requestComplete: true)
            s.endResponse()
        }
        await #expect(processExitsWith: .failure) {
            var s = ExchangeState(requestComplete: true)
            s.startResponse(status: 200)
            s.answerWhole(status: 500)
        }
    }
}
