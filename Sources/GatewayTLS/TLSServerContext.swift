import COpenSSL

/// Server-side TLS configuration: one `SSL_CTX` shared by every connection on
/// every event loop.
///
/// - TLS 1.2 minimum; on TLS 1.2 ECDHE with AES-GCM or ChaCha20 only (RFC
///   9113 §9.2.2), OpenSSL's default TLS 1.3 suites and groups,
///   server cipher preference, no compression, no renegotiation.
/// - Session resumption is OFF (no tickets, no session cache). Tickets would
///   need a ticket key shared and rotated across gateway instances, and a
///   process-lifetime key weakens forward secrecy; clients of a proxy keep
///   long-lived HTTP/2 connections, so a full handshake per connection is cheap.
/// - ALPN: the first protocol of `alpn` that the client also offers is chosen;
///   no overlap means no ALPN (the handshake proceeds and the protocol
///   detector sniffs the preface) rather than a fatal alert.
///
/// Sendable because it is immutable after `init`: the `SSL_CTX` is only read
/// (`SSL_new`, whose refcounting is atomic) and the ALPN buffer never changes.
public final class TLSServerContext: @unchecked Sendable {
    /// `SSL_CTX *`; owned, freed in deinit.
    let sslContext: OpaquePointer
    /// The ALPN callback's `arg`: a C struct and the wire bytes it points to.
    /// Manually allocated so OpenSSL holds a stable pointer; freed in deinit,
    /// after the `SSL_CTX` (connections keep this object alive, so no `SSL`
    /// can outlive it).
    private let alpnList: UnsafeMutablePointer<CAssertGate_ALPNList>
    private let alpnBytes: UnsafeMutableBufferPointer<UInt8>

    public let certificatePath: String
    public let privateKeyPath: String
    public let alpnProtocols: [String]

    public init(
        certificatePath: String,
        privateKeyPath: String,
        alpn: [String] = ALPN.defaultProtocols
    ) throws(TLSConfigurationError) {
        let wire = try ALPN.wireFormat(alpn)
        let context = try Self.makeContext(certificatePath: certificatePath, privateKeyPath: privateKeyPath)

        let bytes = UnsafeMutableBufferPointer<UInt8>.allocate(capacity: wire.count)
        _ = bytes.initialize(from: wire)
        let list = UnsafeMutablePointer<CAssertGate_ALPNList>.allocate(capacity: 1)
        list.initialize(to: CAssertGate_ALPNList(protocols: UnsafePointer(bytes.baseAddress), length: UInt32(wire.count)))
        SSL_CTX_set_alpn_select_cb(context, { _, out, outLength, offer, offerLength, arg in
            OpenSSLALPNCallback.select(out: out, outLength: outLength, offer: offer, offerLength: offerLength, arg: arg)
        }, UnsafeMutableRawPointer(list))

        self.sslContext = context
        self.alpnList = list
        self.alpnBytes = bytes
        self.certificatePath = certificatePath
        self.privateKeyPath = privateKeyPath
        self.alpnProtocols = alpn
    }

    deinit {
        SSL_CTX_free(self.sslContext)
        self.alpnList.deinitialize(count: 1)
        self.alpnList.deallocate()
        self.alpnBytes.deallocate()
    }

    /// Builds and loads the context; frees it on every error path.
    private static func makeContext(
        certificatePath: String,
        privateKeyPath: String
    ) throws(TLSConfigurationError) -> OpaquePointer {
        let context = try newContext(TLS_server_method())
        var success = false
        defer { if !success { SSL_CTX_free(context) } }
        SSL_CTX_set_options(
            context,
            CAssertGate_SSL_OP_NO_TICKET() | CAssertGate_SSL_OP_NO_COMPRESSION()
                | CAssertGate_SSL_OP_NO_RENEGOTIATION() | CAssertGate_SSL_OP_CIPHER_SERVER_PREFERENCE())
        _ = SSL_CTX_set_num_tickets(context, 0)
        // TLS 1.2: ephemeral key exchange and AEAD only. RFC 9113 §9.2.2 (and
        // its Appendix A) forbids every other suite under HTTP/2, which ALPN
        // would otherwise have picked over static RSA or CBC; static RSA also
        // has no forward secrecy. TLS 1.3's suites are all of this kind.
        guard SSL_CTX_set_cipher_list(context, Self.tls12Ciphers) == 1 else {
            throw .setting(name: "TLS 1.2 cipher list", reason: OpenSSLErrorQueue.drain())
        }
        _ = CAssertGate_SSL_CTX_set_session_cache_mode(context, CAssertGate_SSL_SESS_CACHE_OFF())
        // Idle connections give their 16 KiB record buffers back.
        _ = CAssertGate_SSL_CTX_set_mode(context, CAssertGate_SSL_MODE_RELEASE_BUFFERS())

        guard SSL_CTX_use_certificate_chain_file(context, certificatePath) == 1 else {
            throw .certificate(path: certificatePath, reason: OpenSSLErrorQueue.drain())
        }
        // Parse the key separately so "unreadable key" and "key of another
        // certificate" are different errors.
        try Self.withPrivateKey(path: privateKeyPath) { key throws(TLSConfigurationError) in
            guard SSL_CTX_use_PrivateKey(context, key) == 1, SSL_CTX_check_private_key(context) == 1 else {
                throw .keyMismatch(
                    certificatePath: certificatePath, privateKeyPath: privateKeyPath,
                    reason: OpenSSLErrorQueue.drain())
            }
        }
        success = true
        return context
    }

    /// The TLS 1.2 suites a client may get (OpenSSL's cipher-list syntax).
    static let tls12Ciphers = "ECDHE+AESGCM:ECDHE+CHACHA20"

    /// A new `SSL_CTX` for `method` with the project's floor, TLS 1.2 (both
    /// sides); freed here if that cannot be set, else owned by the caller.
    static func newContext(_ method: OpaquePointer?) throws(TLSConfigurationError) -> OpaquePointer {
        OpenSSLErrorQueue.clear()
        guard let context = SSL_CTX_new(method) else {
            throw .contextCreation(reason: OpenSSLErrorQueue.drain())
        }
        guard CAssertGate_SSL_CTX_set_min_proto_version(context, TLS1_2_VERSION) == 1 else {
            SSL_CTX_free(context)
            throw .setting(name: "minimum protocol version TLS 1.2", reason: OpenSSLErrorQueue.drain())
        }
        return context
    }

    /// Reads a PEM private key (any type OpenSSL supports: EC P-256, RSA…)
    /// and lends its `EVP_PKEY` to `body`; the key is freed when `body`
    /// returns and must not be kept (`SSL_CTX_use_PrivateKey` takes its own
    /// reference).
    static func withPrivateKey(
        path: String, _ body: (OpaquePointer) throws(TLSConfigurationError) -> Void
    ) throws(TLSConfigurationError) {
        guard let file = BIO_new_file(path, "r") else {
            throw .privateKey(path: path, reason: OpenSSLErrorQueue.drain())
        }
        defer { BIO_free(file) }
        // The password callback refuses: encrypted keys are a config error,
        // never an interactive prompt.
        guard let key = PEM_read_bio_PrivateKey(file, nil, { _, _, _, _ in 0 }, nil) else {
            throw .privateKey(path: path, reason: OpenSSLErrorQueue.drain())
        }
        defer { EVP_PKEY_free(key) }
        try body(key)
    }
}

/// The C-compatible ALPN select callback. It captures nothing: the server's
/// list arrives through `arg` (a `CAssertGate_ALPNList` owned by
/// `TLSServerContext`) and `out` points into the client's offer, which
/// OpenSSL keeps alive for the duration of the handshake.
enum OpenSSLALPNCallback {
    static func select(
        out: UnsafeMutablePointer<UnsafePointer<UInt8>?>?,
        outLength: UnsafeMutablePointer<UInt8>?,
        offer: UnsafePointer<UInt8>?,
        offerLength: UInt32,
        arg: UnsafeMutableRawPointer?
    ) -> Int32 {
        guard let out, let outLength, let offer, let arg else { return SSL_TLSEXT_ERR_NOACK }
        let list = arg.assumingMemoryBound(to: CAssertGate_ALPNList.self).pointee
        guard let protocols = list.protocols else { return SSL_TLSEXT_ERR_NOACK }
        let server = UnsafeRawBufferPointer(start: protocols, count: Int(list.length))
        let client = UnsafeRawBufferPointer(start: offer, count: Int(offerLength))
        guard let range = ALPN.select(serverPreference: server, clientOffer: client),
            let length = UInt8(exactly: range.count)
        else {
            return SSL_TLSEXT_ERR_NOACK
        }
        out.pointee = offer + range.lowerBound
        outLength.pointee = length
        return SSL_TLSEXT_ERR_OK
    }
}
