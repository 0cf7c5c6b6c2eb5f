import COpenSSL

/// Owns an `X509_STORE` holding only trust anchors. It is filled once in init
/// and never changed, so concurrent verifications may share it.
final class X509Store: @unchecked Sendable {
    let pointer: OpaquePointer
    /// Keeps the anchors alive for as long as the store (the store also holds
    /// its own references; this is for introspection).
    let anchors: [X509Certificate]

    init?(anchors: [X509Certificate]) {
        guard let store = X509_STORE_new() else { return nil }
        for anchor in anchors where X509_STORE_add_cert(store, anchor.pointer) != 1 {
            X509_STORE_free(store)
            OpenSSLErrors.clear()
            return nil
        }
        self.pointer = store
        self.anchors = anchors
    }

    deinit { X509_STORE_free(pointer) }

    /// Why a chain was refused: OpenSSL's error code and its text.
    struct Failure {
        let code: Int32
        let text: String
        /// The chain is sound but not valid at that instant: another instant may do.
        var isTimeBound: Bool {
            code == X509_V_ERR_CERT_HAS_EXPIRED || code == X509_V_ERR_CERT_NOT_YET_VALID
        }
    }

    /// Verifies `leaf` up to one of the anchors, using `untrusted` only as
    /// intermediates, at unix time `time`. Returns nil on success.
    private func verifyOnce(leaf: X509Certificate, untrusted: [X509Certificate], at time: Int64) -> Failure? {
        guard let ctx = X509_STORE_CTX_new() else { return Failure(code: -1, text: "out of memory") }
        defer { X509_STORE_CTX_free(ctx) }
        guard let chain = CAssertGate_sk_X509_new_null() else { return Failure(code: -1, text: "out of memory") }
        // sk_X509_free: the stack borrows the certificates, the Swift objects own them.
        defer { CAssertGate_sk_X509_free(chain) }
        for cert in untrusted where CAssertGate_sk_X509_push(chain, cert.pointer) <= 0 {
            return Failure(code: -1, text: "out of memory")
        }
        guard X509_STORE_CTX_init(ctx, pointer, leaf.pointer, chain) == 1 else {
            return Failure(code: -1, text: OpenSSLErrors.drain())
        }
        if let param = X509_STORE_CTX_get0_param(ctx) {
            X509_VERIFY_PARAM_set_time(param, time_t(time))
        }
        let result = X509_verify_cert(ctx)
        OpenSSLErrors.clear()
        if result == 1 { return nil }
        let code = X509_STORE_CTX_get_error(ctx)
        guard let text = X509_verify_cert_error_string(Int(code)) else { return Failure(code: code, text: "verification failed") }
        return Failure(code: code, text: String(cString: text))
    }

    /// Verifies at `time`, and when a certificate was expired (not yet valid)
    /// then, at `time - skew` (`time + skew`): the chain is accepted when it is
    /// valid at some instant of the window. Any other failure is final, so a
    /// chain that cannot be built costs one attempt, not three.
    func verify(leaf: X509Certificate, untrusted: [X509Certificate], at time: Int64, skew: Int64) -> String? {
        guard let failure = verifyOnce(leaf: leaf, untrusted: untrusted, at: time) else { return nil }
        guard skew > 0, failure.isTimeBound else { return failure.text }
        let (other, overflow) =
            failure.code == X509_V_ERR_CERT_HAS_EXPIRED
            ? time.subtractingReportingOverflow(skew) : time.addingReportingOverflow(skew)
        if !overflow, verifyOnce(leaf: leaf, untrusted: untrusted, at: other) == nil { return nil }
        return failure.text
    }
}
