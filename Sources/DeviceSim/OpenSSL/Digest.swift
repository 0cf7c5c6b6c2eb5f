import COpenSSL

/// SHA-256 through OpenSSL's one-shot API (the hot path of `assert`).
enum Digest {
    static func sha256(_ data: [UInt8]) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: 32)
        data.withUnsafeBufferPointer { input in
            out.withUnsafeMutableBufferPointer { output in
                _ = SHA256(input.baseAddress, input.count, output.baseAddress)
            }
        }
        return out
    }

    static func sha256(_ a: [UInt8], _ b: [UInt8]) -> [UInt8] {
        var joined = [UInt8]()
        joined.reserveCapacity(a.count + b.count)
        joined.append(contentsOf: a)
        joined.append(contentsOf: b)
        return sha256(joined)
    }

    static func randomBytes(_ count: Int) throws -> [UInt8] {
        var out = [UInt8](repeating: 0, count: count)
        let ok = out.withUnsafeMutableBufferPointer { RAND_bytes($0.baseAddress, Int32(count)) }
        guard ok == 1 else { throw DeviceSimError.openSSL("RAND_bytes") }
        return out
    }
}
