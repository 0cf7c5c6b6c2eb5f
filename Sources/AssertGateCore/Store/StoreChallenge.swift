import Verifier

public enum StoreChallenge {
    /// 32 bytes from the system CSPRNG (getrandom), as unpadded b64url: the issued challenge form.
    public static func generate() -> String {
        var rng = SystemRandomNumberGenerator()
        var bytes = [UInt8](repeating: 0, count: 32)
        for i in stride(from: 0, to: 32, by: 8) {
            let v = rng.next()
            for j in 0..<8 { bytes[i + j] = UInt8(truncatingIfNeeded: v >> (8 * UInt64(j))) }
        }
        return Base64.encodeURL(bytes)
    }
}
