/// One request as the device sends it. `path` is the request target exactly as
/// it goes on the wire (the assertion signs it byte for byte).
public struct HTTPClientRequest: Sendable {
    public var method: String
    public var path: String
    public var authority: String
    public var scheme: String
    /// Extra headers; names are lower-cased on HTTP/2.
    public var headers: [(name: String, value: String)]
    public var body: [UInt8]

    public init(
        method: String, path: String, authority: String, scheme: String = "http",
        headers: [(name: String, value: String)] = [], body: [UInt8] = []
    ) {
        self.method = method
        self.path = path
        self.authority = authority
        self.scheme = scheme
        self.headers = headers
        self.body = body
    }
}

/// A complete response: status, headers in arrival order, the whole body.
public struct HTTPClientResponse: Sendable {
    public var status: Int
    public var headers: [(name: String, value: String)]
    public var body: [UInt8]

    public init(status: Int, headers: [(name: String, value: String)], body: [UInt8]) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    /// First value of a header, matched without regard to case.
    public func header(_ name: String) -> String? {
        let lower = name.lowercased()
        return headers.first { $0.name.lowercased() == lower }?.value
    }

    public var bodyText: String { String(decoding: body, as: UTF8.self) }
}
