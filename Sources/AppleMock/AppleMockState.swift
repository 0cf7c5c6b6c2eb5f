import NIOCore

/// Everything the mock remembers and is told, behind the server's lock.
struct AppleMockState: Sendable {
    /// A demo left running under load keeps the newest requests only.
    static let maxRecorded = 10_000

    var scripts: [AppleMockEndpoint: [AppleMockAnswer]] = [:]
    var standing: [AppleMockEndpoint: AppleMockAnswer] = [:]
    var latency: [AppleMockEndpoint: TimeAmount] = [:]
    var bits: [String: MockDeviceBits] = [:]
    var requests: [AppleMockRequest] = []
    var connections = 0

    mutating func record(_ request: AppleMockRequest) {
        if requests.count >= Self.maxRecorded { requests.removeFirst(requests.count - Self.maxRecorded + 1) }
        requests.append(request)
    }

    /// The answer for the next request of `endpoint` (a scripted one is used up).
    mutating func nextAnswer(_ endpoint: AppleMockEndpoint) -> AppleMockAnswer {
        if var script = scripts[endpoint], !script.isEmpty {
            let next = script.removeFirst()
            scripts[endpoint] = script
            return next
        }
        return standing[endpoint] ?? .normal
    }
}
