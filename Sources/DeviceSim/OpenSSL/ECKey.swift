import COpenSSL

/// An EC key pair owned by Swift (EVP_PKEY freed in deinit). Immutable after
/// init; OpenSSL 3 allows concurrent signing with one EVP_PKEY, hence Sendable.
public final class ECKey: @unchecked Sendable {
    public enum Curve: String, Sendable {
        case p256 = "P-256"
        case p384 = "P-384"

        var coordinateSize: Int { self == .p256 ? 32 : 48 }
    }

    let pointer: OpaquePointer
    public let curve: Curve
    /// The public key as the uncompressed point 04 ‖ X ‖ Y (fixed-size coordinates).
    public let uncompressedPoint: [UInt8]
    private let maxSignatureSize: Int
    /// Initialised for ECDSA-SHA256 with this key; only ever read (copied).
    private let signingTemplate: SigningContext

    /// Generates a fresh key on `curve`.
    public convenience init(generating curve: Curve = .p256) throws {
        guard let key = curve.rawValue.withCString({ CAssertGate_DS_EC_gen($0) }) else {
            throw DeviceSimError.openSSL("EVP_EC_gen")
        }
        try self.init(taking: key)
    }

    /// Loads a private key from PEM (PKCS#8 or SEC1); must be P-256 or P-384.
    public convenience init(privateKeyPEM pem: String) throws {
        let bio = try MemoryBIO(bytes: Array(pem.utf8))
        guard let key = PEM_read_bio_PrivateKey(bio.pointer, nil, nil, nil) else {
            throw DeviceSimError.openSSL("PEM_read_bio_PrivateKey")
        }
        try self.init(taking: key)
    }

    /// Takes ownership of `key`; frees it if the key is unusable.
    private init(taking key: OpaquePointer) throws {
        var nameBuffer = [CChar](repeating: 0, count: 64)
        var nameLength = 0
        guard EVP_PKEY_get_utf8_string_param(key, "group", &nameBuffer, nameBuffer.count, &nameLength) == 1 else {
            EVP_PKEY_free(key)
            throw DeviceSimError.openSSL("EVP_PKEY_get_utf8_string_param(group)")
        }
        let groupName = String(decoding: nameBuffer.prefix(nameLength).map { UInt8(bitPattern: $0) }, as: UTF8.self)
        let curve: Curve
        switch groupName {
        case "prime256v1", "P-256": curve = .p256
        case "secp384r1", "P-384": curve = .p384
        default:
            EVP_PKEY_free(key)
            throw DeviceSimError.invalidInput("unsupported EC group \(groupName)")
        }
        var point = [UInt8](repeating: 0, count: 1 + 2 * curve.coordinateSize)
        var pointLength = 0
        let ok = EVP_PKEY_get_octet_string_param(key, "encoded-pub-key", &point, point.count, &pointLength)
        guard ok == 1, pointLength == point.count, point.first == 0x04 else {
            EVP_PKEY_free(key)
            throw DeviceSimError.openSSL("EVP_PKEY_get_octet_string_param(encoded-pub-key)")
        }
        self.pointer = key
        self.curve = curve
        self.uncompressedPoint = point
        self.maxSignatureSize = Int(EVP_PKEY_get_size(key))
        do {
            self.signingTemplate = try SigningContext(key: key)
        } catch {
            EVP_PKEY_free(key)
            throw error
        }
    }

    deinit { EVP_PKEY_free(pointer) }

    /// X coordinate, fixed size (a leading zero byte is kept).
    public var x: [UInt8] { Array(uncompressedPoint[1...curve.coordinateSize]) }
    /// Y coordinate, fixed size.
    public var y: [UInt8] { Array(uncompressedPoint[(1 + curve.coordinateSize)...]) }

    /// The private key as unencrypted PKCS#8 PEM.
    public func privateKeyPEM() throws -> String {
        let bio = try MemoryBIO()
        guard PEM_write_bio_PrivateKey(bio.pointer, pointer, nil, nil, 0, nil, nil) == 1 else {
            throw DeviceSimError.openSSL("PEM_write_bio_PrivateKey")
        }
        return bio.string()
    }

    /// ECDSA over `message` with SHA-256 (so the signed digest is H(message)),
    /// DER-encoded: one EVP_DigestSign call on a copy of a context initialised
    /// once (EVP_DigestSignInit fetches the digest and builds the key context,
    /// which costs about a third of the signature itself).
    public func sign(_ message: [UInt8]) throws -> [UInt8] {
        guard let ctx = EVP_MD_CTX_new() else { throw DeviceSimError.openSSL("EVP_MD_CTX_new") }
        defer { EVP_MD_CTX_free(ctx) }
        guard EVP_MD_CTX_copy_ex(ctx, signingTemplate.pointer) == 1 else {
            throw DeviceSimError.openSSL("EVP_MD_CTX_copy_ex")
        }
        var signature = [UInt8](repeating: 0, count: maxSignatureSize)
        var length = signature.count
        let ok = message.withUnsafeBufferPointer { input in
            EVP_DigestSign(ctx, &signature, &length, input.baseAddress, input.count)
        }
        guard ok == 1 else { throw DeviceSimError.openSSL("EVP_DigestSign") }
        signature.removeSubrange(length...)
        return signature
    }

    /// Converts a DER ECDSA signature into raw r ‖ s (fixed-size), the form
    /// a verifier must reject as not DER.
    static func rawSignature(fromDER der: [UInt8], coordinateSize: Int) throws -> [UInt8] {
        let parsed: OpaquePointer? = der.withUnsafeBufferPointer { buffer in
            var cursor = buffer.baseAddress
            return d2i_ECDSA_SIG(nil, &cursor, buffer.count)
        }
        guard let sig = parsed else { throw DeviceSimError.openSSL("d2i_ECDSA_SIG") }
        defer { ECDSA_SIG_free(sig) }
        var out = [UInt8](repeating: 0, count: 2 * coordinateSize)
        let size = Int32(coordinateSize)
        let ok = out.withUnsafeMutableBufferPointer { raw -> Bool in
            guard let base = raw.baseAddress else { return false }
            return BN_bn2binpad(ECDSA_SIG_get0_r(sig), base, size) == size
                && BN_bn2binpad(ECDSA_SIG_get0_s(sig), base + coordinateSize, size) == size
        }
        guard ok else { throw DeviceSimError.openSSL("BN_bn2binpad") }
        return out
    }
}

/// An EVP_MD_CTX after EVP_DigestSignInit(SHA-256, key), owned by its ECKey.
final class SigningContext {
    let pointer: OpaquePointer

    init(key: OpaquePointer) throws {
        guard let ctx = EVP_MD_CTX_new() else { throw DeviceSimError.openSSL("EVP_MD_CTX_new") }
        guard EVP_DigestSignInit(ctx, nil, EVP_sha256(), nil, key) == 1 else {
            EVP_MD_CTX_free(ctx)
            throw DeviceSimError.openSSL("EVP_DigestSignInit")
        }
        pointer = ctx
    }

    deinit { EVP_MD_CTX_free(pointer) }
}
