import COpenSSL

/// A verify-initialised `EVP_PKEY_CTX` for one key, reused across calls.
/// `P256PublicKey.verify` creates and initialises a context per call, which
/// OpenSSL 3 turns into provider/algorithm fetches (≈ 2 µs, a few % of an
/// asserted request); a worker that verifies the same key repeatedly keeps
/// one of these per cached key instead.
///
/// NOT thread-safe (an `EVP_PKEY_CTX` is mutable state): confine each
/// instance to one thread or event loop. `P256PublicKey` stays shareable.
public final class P256Verifier {
    public let publicKey: P256PublicKey
    private var ctx: OpaquePointer?

    public init(publicKey: P256PublicKey) {
        self.publicKey = publicKey
        self.ctx = Self.makeContext(publicKey.pointer)
    }

    deinit { if let ctx { EVP_PKEY_CTX_free(ctx) } }

    /// Same contract as `P256PublicKey.verify(signature:digest:)`.
    public func verify(signature: [UInt8], digest: [UInt8]) -> Bool {
        guard digest.count == 32, !signature.isEmpty else { return false }
        guard let ctx else {
            // Context creation failed at init: the per-call path still works.
            return publicKey.verify(signature: signature, digest: digest)
        }
        let result = signature.withUnsafeBufferPointer { sig in
            digest.withUnsafeBufferPointer { dgst in
                EVP_PKEY_verify(ctx, sig.baseAddress, sig.count, dgst.baseAddress, dgst.count)
            }
        }
        if result != 1 {
            OpenSSLErrors.clear()
            // A failed verify leaves nothing behind in OpenSSL's ECDSA context,
            // but starting the next call from a fresh state costs little on the
            // (rare) failure path and removes any doubt.
            EVP_PKEY_CTX_free(ctx)
            self.ctx = Self.makeContext(publicKey.pointer)
        }
        return result == 1
    }

    private static func makeContext(_ key: OpaquePointer) -> OpaquePointer? {
        guard let ctx = EVP_PKEY_CTX_new(key, nil) else {
            OpenSSLErrors.clear()
            return nil
        }
        guard EVP_PKEY_verify_init(ctx) == 1 else {
            EVP_PKEY_CTX_free(ctx)
            OpenSSLErrors.clear()
            return nil
        }
        return ctx
    }
}
