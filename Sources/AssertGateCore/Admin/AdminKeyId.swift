/// The `{keyId}` path component of the admin routes: b64url, or standard
/// base64 percent-encoded (`%2B`, `%2F`, `%3D`), decoding to 32 bytes.
enum AdminKeyId {
    static func canonical(pathComponent: Substring) -> String? {
        guard !pathComponent.isEmpty, pathComponent.utf8.count <= 160 else { return nil }
        guard let decoded = RedisURL.percentDecode(pathComponent) else { return nil }
        guard let bytes = base64Decode(decoded), bytes.count == 32 else { return nil }
        return base64URLEncode(bytes)
    }

    /// Either alphabet, padding optional; anything else (mixed junk, bad
    /// length, non-zero trailing bits are tolerated as RFC 4648 allows) is nil.
    static func base64Decode(_ text: String) -> [UInt8]? {
        var chars = Array(text.utf8)
        while chars.last == UInt8(ascii: "=") { chars.removeLast() }
        guard text.utf8.count - chars.count <= 2, chars.count % 4 != 1 else { return nil }
        if text.utf8.count != chars.count && text.utf8.count % 4 != 0 { return nil }
        var out: [UInt8] = []
        out.reserveCapacity(chars.count * 3 / 4)
        var buffer: UInt32 = 0
        var bits = 0
        for c in chars {
            let v: UInt8
            switch c {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"): v = c - 65
            case UInt8(ascii: "a")...UInt8(ascii: "z"): v = c - 71
            case UInt8(ascii: "0")...UInt8(ascii: "9"): v = c + 4
            case UInt8(ascii: "+"), UInt8(ascii: "-"): v = 62
            case UInt8(ascii: "/"), UInt8(ascii: "_"): v = 63
            default: return nil
            }
            buffer = (buffer << 6) | UInt32(v)
            bits += 6
            if bits >= 8 {
                bits -= 8
                out.append(UInt8(truncatingIfNeeded: buffer >> UInt32(bits)))
            }
        }
        return out
    }

    static func base64URLEncode(_ bytes: [UInt8]) -> String {
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)
        var out: [UInt8] = []
        var i = 0
        while i + 2 < bytes.count {
            let n = UInt32(bytes[i]) << 16 | UInt32(bytes[i + 1]) << 8 | UInt32(bytes[i + 2])
            for shift in [18, 12, 6, 0] { out.append(alphabet[Int((n >> UInt32(shift)) & 63)]) }
            i += 3
        }
        let rest = bytes.count - i
        if rest == 1 {
            let n = UInt32(bytes[i]) << 16
            out.append(alphabet[Int((n >> 18) & 63)])
            out.append(alphabet[Int((n >> 12) & 63)])
        } else if rest == 2 {
            let n = UInt32(bytes[i]) << 16 | UInt32(bytes[i + 1]) << 8
            out.append(alphabet[Int((n >> 18) & 63)])
            out.append(alphabet[Int((n >> 12) & 63)])
            out.append(alphabet[Int((n >> 6) & 63)])
        }
        return String(decoding: out, as: UTF8.self)
    }
}
