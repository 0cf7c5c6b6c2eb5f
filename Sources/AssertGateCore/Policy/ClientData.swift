/// The canonical client data of protocol.md §3–§4. The app hashes exactly these
/// bytes; the gateway rebuilds them from what it received, so nothing the app
/// claims about the request is trusted.
public enum ClientData {
    public static let unsignedPayload = "UNSIGNED-PAYLOAD"

    /// `"assertgate-attest-v1" LF challenge LF userId`
    public static func attest(challenge: String, userId: String?) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(64 + challenge.utf8.count + (userId?.utf8.count ?? 0))
        out.append(contentsOf: "assertgate-attest-v1".utf8)
        out.append(0x0A)
        out.append(contentsOf: challenge.utf8)
        out.append(0x0A)
        out.append(contentsOf: (userId ?? "").utf8)
        return out
    }

    /// `"assertgate-assert-v1" LF method LF path LF challenge LF bodyHash`
    /// `path` is the request target exactly as received, query included.
    public static func assert(method: String, path: String, challenge: String?, bodyHash: String) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(
            32 + method.utf8.count + path.utf8.count + (challenge?.utf8.count ?? 0) + bodyHash.utf8.count)
        out.append(contentsOf: "assertgate-assert-v1".utf8)
        out.append(0x0A)
        out.append(contentsOf: method.utf8)
        out.append(0x0A)
        out.append(contentsOf: path.utf8)
        out.append(0x0A)
        out.append(contentsOf: (challenge ?? "").utf8)
        out.append(0x0A)
        out.append(contentsOf: bodyHash.utf8)
        return out
    }
}
