/// The two halves of one exchange as the client sees them, in the manner of
/// swift-nio's `HTTPServerPipelineHandler`: what has arrived of the request,
/// what has gone out of the response. Transitions are the only way to change
/// them; a move that cannot happen (a second response head, the end of a
/// response that never started) traps, since it would mean a broken pipeline
/// rather than a misbehaving peer.
struct ExchangeState: Equatable {
    enum Request: Equatable {
        /// Body bytes may still arrive.
        case receiving
        /// The client sent its last byte (or the request had no body).
        case complete
    }

    enum Response: Equatable {
        /// Nothing sent to the client yet.
        case pending
        /// The upstream's head went out; its body flows, unless held back
        /// (`paused`) because the client reads slower than the upstream sends.
        case streaming(status: Int, paused: Bool)
        /// The whole answer is with the front end.
        case sent(status: Int)
        /// Ended before it was whole: the client went away (`clientLeft`), or
        /// the gateway reset the stream / closed the connection.
        case cut(status: Int, clientLeft: Bool)
    }

    private(set) var request: Request
    private(set) var response: Response = .pending

    init(requestComplete: Bool) {
        request = requestComplete ? .complete : .receiving
    }

    // MARK: request half

    /// False when the request was already complete.
    mutating func completeRequest() -> Bool {
        guard request == .receiving else { return false }
        request = .complete
        return true
    }

    var requestIsComplete: Bool { request == .complete }

    // MARK: response half

    /// The upstream's response head goes to the client.
    mutating func startResponse(status: Int) {
        guard case .pending = response else { preconditionFailure("a second response head: \(response)") }
        response = .streaming(status: status, paused: false)
    }

    /// The gateway answers itself, head and body at once.
    mutating func answerWhole(status: Int) {
        guard case .pending = response else { preconditionFailure("an answer after the response started: \(response)") }
        response = .sent(status: status)
    }

    mutating func endResponse() {
        guard case .streaming(let status, _) = response else { preconditionFailure("response end without a head: \(response)") }
        response = .sent(status: status)
    }

    /// True when the response was flowing and is now held back.
    mutating func pause() -> Bool {
        guard case .streaming(let status, false) = response else { return false }
        response = .streaming(status: status, paused: true)
        return true
    }

    /// True when the response was held back and flows again.
    mutating func resume() -> Bool {
        guard case .streaming(let status, true) = response else { return false }
        response = .streaming(status: status, paused: false)
        return true
    }

    /// The client went away. False when its answer was already whole or cut.
    mutating func clientLeft() -> Bool { cutShort(clientLeft: true) }

    /// The gateway gives up on the response. True when the client is still
    /// there to be told (the front end resets the stream or closes).
    mutating func cut() -> Bool { cutShort(clientLeft: false) }

    private mutating func cutShort(clientLeft: Bool) -> Bool {
        switch response {
        case .pending: response = .cut(status: 0, clientLeft: clientLeft)
        case .streaming(let status, _): response = .cut(status: status, clientLeft: clientLeft)
        case .sent, .cut: return false
        }
        return true
    }

    var responseStarted: Bool { response != .pending }
    var clientIsGone: Bool {
        if case .cut(_, true) = response { return true }
        return false
    }
    var isPaused: Bool {
        if case .streaming(_, true) = response { return true }
        return false
    }

    /// For the report: the status the client got (0 when it got none, or
    /// left before the end) and whether the response was cut short.
    var outcome: (status: Int, aborted: Bool) {
        switch response {
        case .pending: return (0, false)
        case .streaming(let status, _): return (status, true)
        case .sent(let status): return (status, false)
        case .cut(let status, let clientLeft): return (clientLeft ? 0 : status, true)
        }
    }
}
