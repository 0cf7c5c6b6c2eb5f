/// What the mock does with one request.
enum AppleMockResponse: Sendable, Equatable {
    case answer(status: Int, body: [UInt8], contentType: String)
    case stall
    case close

    static func text(_ status: Int, _ text: String) -> AppleMockResponse {
        .answer(status: status, body: Array(text.utf8), contentType: "text/plain; charset=utf-8")
    }

    static func json(_ text: String) -> AppleMockResponse {
        .answer(status: 200, body: Array(text.utf8), contentType: "application/json")
    }

    var status: Int? {
        if case .answer(let status, _, _) = self { return status }
        return nil
    }
}
