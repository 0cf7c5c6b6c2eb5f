import COpenSSL

/// A parsed P-256 public key, meant to be created once per attested key and
/// cached: building it from the raw point with `EVP_PKEY_fromdata` is cheap,
/// parsing SPKI for every request is not (app-attest.md §3).
///
/// Thread safety: the `EVP_PKEY` is never mutated after init, and every
/// verification creates its own `EVP_PKEY_CTX`; OpenSSL 3 allows concurrent
/// operations on one provider-native key that way, so one instance may be used
/// from many threads at once.
public final class P256PublicKey: @unchecked Sendable {
    let pointer: OpaquePointer
    /// The uncompressed point `04‖X‖Y` (65 bytes).
    public let point: [UInt8]

    public enum ParseError: Error, Sendable, Hashable, CustomStringConvertible {
        case notUncompressedP256Point
        case notOnCurve
        case invalidPEM
        case notP256

        public var description: String {
            switch self {
            case .notUncompressedP256Point: return "public key is not a 65-byte uncompressed P-256 point"
            case .notOnCurve: return "public key point is not on the P-256 curve"
            case .invalidPEM: return "public key is not a PEM or DER SubjectPublicKeyInfo"
            case .notP256: return "public key is not an EC P-256 key"
            }
        }
    }

    /// From the raw uncompressed point `04‖X‖Y`.
    public init(point: [UInt8]) throws(ParseError) {
        guard P256Point.isUncompressedEncoding(point) else { throw .notUncompressedP256Point }
        guard let key = Self.fromData(point) else { throw .notOnCurve }
        self.pointer = key
        self.point = point
    }

    /// From a PEM `PUBLIC KEY` block.
    public convenience init(pem: String) throws(ParseError) {
        let bytes = Array(pem.utf8)
        guard !bytes.isEmpty, bytes.count <= 16 * 1024 else { throw .invalidPEM }
        let parsed: OpaquePointer? = bytes.withUnsafeBytes { raw in
            guard let bio = BIO_new_mem_buf(raw.baseAddress, Int32(raw.count)) else { return nil }
            defer { BIO_free(bio) }
            return PEM_read_bio_PUBKEY(bio, nil, nil, nil)
        }
        OpenSSLErrors.clear()
        guard let parsed else { throw .invalidPEM }
        defer { EVP_PKEY_free(parsed) }
        guard let point = P256Point.uncompressed(of: parsed) else { throw .notP256 }
        try self.init(point: point)
    }

    /// From a DER SubjectPublicKeyInfo.
    public convenience init(spki: [UInt8]) throws(ParseError) {
        guard !spki.isEmpty, spki.count <= 16 * 1024 else { throw .invalidPEM }
        let parsed: OpaquePointer? = spki.withUnsafeBufferPointer { buffer in
            guard let base = buffer.baseAddress else { return nil }
            var cursor: UnsafePointer<UInt8>? = base
            guard let key = d2i_PUBKEY(nil, &cursor, buffer.count) else { return nil }
            guard cursor == base + buffer.count else {
                EVP_PKEY_free(key)
                return nil
            }
            return key
        }
        OpenSSLErrors.clear()
        guard let parsed else { throw .invalidPEM }
        defer { EVP_PKEY_free(parsed) }
        guard let point = P256Point.uncompressed(of: parsed) else { throw .notP256 }
        try self.init(point: point)
    }

    deinit { EVP_PKEY_free(pointer) }

    /// Verifies a DER ECDSA signature over a 32-byte digest (the caller has
    /// already hashed the message). Uses a fresh `EVP_PKEY_CTX`, so it is safe
    /// to call concurrently.
    public func verify(signature: [UInt8], digest: [UInt8]) -> Bool {
        guard digest.count == 32, !signature.isEmpty else { return false }
        guard let ctx = EVP_PKEY_CTX_new(pointer, nil) else {
            OpenSSLErrors.clear()
            return false
        }
        defer { EVP_PKEY_CTX_free(ctx) }
        guard EVP_PKEY_verify_init(ctx) == 1 else {
            OpenSSLErrors.clear()
            return false
        }
        let result = signature.withUnsafeBufferPointer { sig in
            digest.withUnsafeBufferPointer { dgst in
                EVP_PKEY_verify(ctx, sig.baseAddress, sig.count, dgst.baseAddress, dgst.count)
            }
        }
        if result != 1 { OpenSSLErrors.clear() }
        return result == 1
    }

    /// Verifies a DER ECDSA-P256-SHA256 signature over `message`.
    public func verify(signature: [UInt8], message: [UInt8]) -> Bool {
        verify(signature: signature, digest: SHA256.hash(message))
    }

    /// `EVP_PKEY_fromdata` with the group name and the encoded point; OpenSSL
    /// rejects points that are not on the curve.
    private static func fromData(_ point: [UInt8]) -> OpaquePointer? {
        guard let ctx = EVP_PKEY_CTX_new_from_name(nil, "EC", nil) else {
            OpenSSLErrors.clear()
            return nil
        }
        defer { EVP_PKEY_CTX_free(ctx) }
        guard EVP_PKEY_fromdata_init(ctx) == 1 else {
            OpenSSLErrors.clear()
            return nil
        }
        var key: OpaquePointer?
        var group = Array(P256Point.groupName.utf8CString)
        var pointCopy = point
        let ok = group.withUnsafeMutableBufferPointer { groupBuffer in
            pointCopy.withUnsafeMutableBufferPointer { pointBuffer in
                "group".withCString { groupKey in
                    "pub".withCString { pubKey in
                        var params = [
                            OSSL_PARAM_construct_utf8_string(groupKey, groupBuffer.baseAddress, 0),
                            OSSL_PARAM_construct_octet_string(pubKey, pointBuffer.baseAddress, pointBuffer.count),
                            OSSL_PARAM_construct_end(),
                        ]
                        return params.withUnsafeMutableBufferPointer {
                            EVP_PKEY_fromdata(ctx, &key, CAssertGate_EVP_PKEY_PUBLIC_KEY(), $0.baseAddress)
                        }
                    }
                }
            }
        }
        guard ok == 1, let key else {
            OpenSSLErrors.clear()
            return nil
        }
        return key
    }
}
