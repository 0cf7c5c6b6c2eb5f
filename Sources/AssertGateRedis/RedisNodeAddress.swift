/// A Redis server's `host:port`: a node of a cluster as the cluster
/// announces it, or the server of a URL. IPv6 hosts print bracketed.
public struct RedisNodeAddress: Sendable, Hashable, CustomStringConvertible {
    public var host: String
    public var port: Int

    public init(host: String, port: Int) {
        self.host = host
        self.port = port
    }

    public var description: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }

    /// `host:port` as in MOVED/ASK replies (IPv6 hosts are not bracketed
    /// there: the port is after the last colon). An empty host means "the
    /// node you asked"; `?` (endpoint unknown) is refused.
    public static func parseAnnounced(_ text: Substring, defaultHost: String) -> RedisNodeAddress? {
        guard let colon = text.lastIndex(of: ":"), let port = Int(text[text.index(after: colon)...]),
            (1...65535).contains(port)
        else { return nil }
        var host = String(text[..<colon])
        if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        // "?": the node's endpoint is unknown (not "the node you asked").
        guard host != "?" else { return nil }
        return RedisNodeAddress(host: host.isEmpty ? defaultHost : host, port: port)
    }
}
