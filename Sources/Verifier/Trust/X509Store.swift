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

    /// Verifies `leaf` up to one of the anchors, using `untrusted` only as
    /// intermediates, at unix time `time`. Returns nil on success or the
    /// OpenSSL verification error text.
    func verify(leaf: X509Certificate, untrusted: [X509Certificate], at time: Int64) -> String? {
        guard let ctx = X509_STORE_CTX_new() else { return "out of memory" }
        defer { X509_STORE_CTX_free(ctx) }
        guard let chain = CAssertGate_sk_X509_new_null() else { return "out of memory" }
        // sk_X509_free: the stack borrows the certificates, the Swift objects own them.
        defer { CAssertGate_sk_X509_free(chain) }
        for cert in untrusted where CAssertGate_sk_X509_push(chain, cert.pointer) <= 0 {
            return "out of memory"
        }
        guard X509_STORE_CTX_init(ctx, pointer, leaf.pointer, chain) == 1 else {
            return OpenSSLErrors.drain()
        }
        if let param = X509_STORE_CTX_get0_param(ctx) {
            X509_VERIFY_PARAM_set_time(param, time_t(time))
        }
        let result = X509_verify_cert(ctx)
        OpenSSLErrors.clear()
        if result == 1 { return nil }
        let code = X509_STORE_CTX_get_error(ctx)
        guard let text = X509_verify_cert_error_string(Int(code)) else { return "verification failed" }
        return String(cString: text)
    }

    /// Verifies at `time`, and failing that at `time - skew` and `time + skew`:
    /// the chain is accepted when it is valid at some instant of the window.
    func verify(leaf: X509Certificate, untrusted: [X509Certificate], at time: Int64, skew: Int64) -> String? {
        guard let error = verify(leaf: leaf, untrusted: untrusted, at: time) else { return nil }
        guard skew > 0 else { return error }
        let (earlier, o1) = time.subtractingReportingOverflow(skew)
        if !o1, verify(leaf: leaf, untrusted: untrusted, at: earlier) == nil { return nil }
        let (later, o2) = time.addingReportingOverflow(skew)
        if !o2, verify(leaf: leaf, untrusted: untrusted, at: later) == nil { return nil }
        return error
    }
}
