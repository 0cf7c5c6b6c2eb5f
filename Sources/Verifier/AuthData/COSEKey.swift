/// The credential public key of attestation authenticator data, which must be
/// `{1: 2 (EC2), 3: -7 (ES256), -1: 1 (P-256), -2: x, -3: y}`.
enum COSEKey {
    /// The uncompressed point, or a description of why it is not a P-256 key.
    static func p256Point(_ key: CBORValue) -> Result<[UInt8], COSEKeyError> {
        guard key.mapEntries != nil else { return .failure(COSEKeyError("COSE key is not a map")) }
        guard key[int: 1]?.int64 == 2 else { return .failure(COSEKeyError("COSE kty is not EC2")) }
        guard key[int: 3]?.int64 == -7 else { return .failure(COSEKeyError("COSE alg is not ES256")) }
        guard key[int: -1]?.int64 == 1 else { return .failure(COSEKeyError("COSE crv is not P-256")) }
        guard let x = key[int: -2]?.bytesValue, x.count == 32 else {
            return .failure(COSEKeyError("COSE x is not 32 bytes"))
        }
        guard let y = key[int: -3]?.bytesValue, y.count == 32 else {
            return .failure(COSEKeyError("COSE y is not 32 bytes"))
        }
        return .success([0x04] + x + y)
    }
}

struct COSEKeyError: Error {
    let message: String
    init(_ message: String) { self.message = message }
}
