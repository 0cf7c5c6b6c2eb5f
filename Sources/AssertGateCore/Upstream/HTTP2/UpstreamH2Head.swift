import NIOCore

/// A request head for an HTTP/2 upstream, made from the HTTP/1.1 head
/// `HeaderRewriter` wrote: one rewriter decides what is forwarded whatever
/// the upstream's protocol, and this maps its bytes to an HTTP/2 header
/// list (RFC 9113 §8.2.2, §8.3.1): the request line and `Host` become
/// pseudo-headers, names are lower-cased, connection-specific fields go.
/// The bytes are the gateway's own (already validated), so the walk trusts
/// their shape and only stops early if it finds none.
struct UpstreamH2Head {
    /// Lower-cased names and values, back to back.
    var bytes: [UInt8] = []
    /// (name start, name length, value start, value length) into `bytes`.
    var spans: [(Int, Int, Int, Int)] = []

    /// `scheme`: `http` for h2c, `https` for h2. `trailers`: the client asked
    /// for trailers (`TE: trailers`, which gRPC servers require); the only
    /// `TE` HTTP/2 allows.
    init(_ head: UpstreamRequestHead, scheme: String, trailers: Bool) {
        let raw = head.bytes.readableBytesView
        var lines = raw.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false).makeIterator()
        guard let requestLine = lines.next() else { return }
        let parts = requestLine.split(separator: UInt8(ascii: " "), maxSplits: 2, omittingEmptySubsequences: false)
        guard parts.count == 3 else { return }
        var authority: ArraySlice<UInt8>?
        var regular: [(ArraySlice<UInt8>, ArraySlice<UInt8>)] = []
        while let next = lines.next() {
            var line = ArraySlice(next)
            if line.last == UInt8(ascii: "\r") { line = line.dropLast() }
            if line.isEmpty { break }
            guard let colon = line.firstIndex(of: UInt8(ascii: ":")) else { continue }
            let name = ArraySlice(line[line.startIndex..<colon].map(ASCII.lower))
            var value = line[(colon + 1)...]
            while let f = value.first, f == UInt8(ascii: " ") || f == UInt8(ascii: "\t") { value = value.dropFirst() }
            while let l = value.last, l == UInt8(ascii: " ") || l == UInt8(ascii: "\t") { value = value.dropLast() }
            if name.elementsEqual("host".utf8) {
                if authority == nil { authority = value }
                continue
            }
            if Self.connectionSpecific(name) { continue }
            regular.append((name, value))
        }
        append(Array(":method".utf8)[...], parts[0])
        append(Array(":scheme".utf8)[...], Array(scheme.utf8)[...])
        if let authority { append(Array(":authority".utf8)[...], authority) }
        append(Array(":path".utf8)[...], parts[1])
        for (n, v) in regular { append(n, v) }
        if trailers { append(Array("te".utf8)[...], Array("trailers".utf8)[...]) }
    }

    private mutating func append<N: Collection<UInt8>, V: Collection<UInt8>>(_ name: N, _ value: V) {
        let ns = bytes.count
        bytes.append(contentsOf: name)
        let vs = bytes.count
        bytes.append(contentsOf: value)
        spans.append((ns, vs - ns, vs, bytes.count - vs))
    }

    /// Fields HTTP/2 forbids (RFC 9113 §8.2.2); `TE` is re-added as
    /// `trailers` when the client asked for it.
    private static func connectionSpecific(_ name: ArraySlice<UInt8>) -> Bool {
        for forbidden in forbiddenNames where name.elementsEqual(forbidden) { return true }
        return false
    }
    private static let forbiddenNames: [[UInt8]] = [
        "connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade", "te",
    ].map { Array($0.utf8) }

    /// The header list's (name, value) pairs, for tests and logs.
    var fields: [(String, String)] {
        spans.map { (String(decoding: bytes[$0.0..<$0.0 + $0.1], as: UTF8.self), String(decoding: bytes[$0.2..<$0.2 + $0.3], as: UTF8.self)) }
    }
}
