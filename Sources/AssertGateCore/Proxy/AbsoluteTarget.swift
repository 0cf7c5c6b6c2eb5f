/// An absolute-form request target (`http://host:port/path?query`, RFC 9112
/// §3.2.2), which servers must accept: routed by its path, `Host` taken from
/// its authority.
struct AbsoluteTarget {
    var authority: String
    var originForm: String

    init?(_ uri: String) {
        let bytes = uri.utf8
        let schemeLength: Int
        if ASCII.hasPrefixCI(uri, lowerPrefix: Self.http) {
            schemeLength = Self.http.count
        } else if ASCII.hasPrefixCI(uri, lowerPrefix: Self.https) {
            schemeLength = Self.https.count
        } else {
            return nil
        }
        let rest = bytes.dropFirst(schemeLength)
        let end = rest.firstIndex(where: { $0 == UInt8(ascii: "/") || $0 == UInt8(ascii: "?") || $0 == UInt8(ascii: "#") })
            ?? rest.endIndex
        let authority = Substring(uri.utf8[rest.startIndex..<end])
        // userinfo is not allowed in an http(s) target (RFC 9110 §4.2.4).
        guard !authority.isEmpty, !authority.contains("@") else { return nil }
        let tail = Substring(uri.utf8[end...])
        self.authority = String(authority)
        self.originForm = tail.hasPrefix("/") ? String(tail) : "/" + tail
    }

    private static let http: [UInt8] = Array("http://".utf8)
    private static let https: [UInt8] = Array("https://".utf8)
}
