/// ALPN (RFC 7301) helpers: encoding the server's preference list and the pure
/// selection function the OpenSSL callback runs. Kept free of OpenSSL types so
/// it can be unit tested directly.
public enum ALPN {
    /// HTTP/2 first: it multiplexes, so a client that can do both should.
    public static let defaultProtocols = ["h2", "http/1.1"]

    /// Encodes names as length-prefixed bytes (the wire format OpenSSL wants).
    public static func wireFormat(_ protocols: [String]) throws(TLSConfigurationError) -> [UInt8] {
        guard !protocols.isEmpty else { throw .invalidALPN(protocols: protocols) }
        var wire: [UInt8] = []
        for name in protocols {
            let bytes = Array(name.utf8)
            guard (1...255).contains(bytes.count) else { throw .invalidALPN(protocols: protocols) }
            wire.append(UInt8(bytes.count))
            wire.append(contentsOf: bytes)
        }
        return wire
    }

    /// Picks the first protocol of `serverPreference` (wire format, trusted)
    /// that also appears in `clientOffer` (wire format, attacker-controlled).
    /// Returns the range of the chosen name's bytes inside `clientOffer`, or
    /// nil when nothing overlaps or the offer is malformed (a zero-length name
    /// or a length running past the end).
    public static func select(
        serverPreference: UnsafeRawBufferPointer,
        clientOffer: UnsafeRawBufferPointer
    ) -> Range<Int>? {
        guard let offered = self.names(in: clientOffer) else { return nil }
        guard let preferred = self.names(in: serverPreference) else { return nil }
        for server in preferred {
            let serverName = UnsafeRawBufferPointer(rebasing: serverPreference[server])
            for client in offered where client.count == server.count {
                let clientName = UnsafeRawBufferPointer(rebasing: clientOffer[client])
                if serverName.elementsEqual(clientName) {
                    return client
                }
            }
        }
        return nil
    }

    /// Convenience for callers holding Swift values (tests, diagnostics).
    public static func select(serverPreference: [String], clientOffer: [UInt8]) -> String? {
        guard let server = try? self.wireFormat(serverPreference) else { return nil }
        return server.withUnsafeBytes { serverBytes in
            clientOffer.withUnsafeBytes { clientBytes -> String? in
                guard let range = self.select(serverPreference: serverBytes, clientOffer: clientBytes) else {
                    return nil
                }
                return String(decoding: clientBytes[range], as: UTF8.self)
            }
        }
    }

    /// Splits a wire-format list into the byte ranges of its names; nil if
    /// malformed. The caller's buffer is at most 64 KiB (TLS extension
    /// limit), so the loop is bounded by its length.
    private static func names(in wire: UnsafeRawBufferPointer) -> [Range<Int>]? {
        var ranges: [Range<Int>] = []
        var index = 0
        while index < wire.count {
            let length = Int(wire[index])
            let start = index + 1
            guard length > 0, start + length <= wire.count else { return nil }
            ranges.append(start..<(start + length))
            index = start + length
        }
        return ranges
    }
}
