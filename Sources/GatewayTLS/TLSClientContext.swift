import COpenSSL

/// Client-side TLS configuration for the gateway's own outbound connections
/// (Redis over `rediss://`): one `SSL_CTX` shared by every connection of
/// every worker.
///
/// - TLS 1.2 minimum, OpenSSL default ciphers and groups, no compression, no
///   renegotiation.
/// - The server's certificate is always verified: against `caFile` when given,
///   else the system trust store (`/etc/ssl/certs`), and its name is checked
///   per connection (`TLSConnection(client:serverName:)`). There is no
///   "skip verification" switch: a Redis that holds every device's counter is
///   not a place for one.
/// - A client certificate is presented when configured (Redis' default
///   `tls-auth-clients yes` asks for one).
///
/// Sendable because it is immutable after `init`: the `SSL_CTX` is only read
/// (`SSL_new`, whose refcounting is atomic).
public final class TLSClientContext: @unchecked Sendable {
    /// `SSL_CTX *`; owned, freed in deinit.
    let sslContext: OpaquePointer

    public let caFile: String?
    public let certificatePath: String?
    public let privateKeyPath: String?

    /// `alpn`: protocols offered in the ClientHello (an `h2://` upstream
    /// offers `h2` alone, so a server that cannot speak it says so at once).
    public init(
        caFile: String?, certificatePath: String?, privateKeyPath: String?, alpn: [String] = []
    ) throws(TLSConfigurationError) {
        self.sslContext = try Self.makeContext(
            caFile: caFile, certificatePath: certificatePath, privateKeyPath: privateKeyPath, alpn: alpn)
        self.caFile = caFile
        self.certificatePath = certificatePath
        self.privateKeyPath = privateKeyPath
    }

    deinit {
        SSL_CTX_free(self.sslContext)
    }

    private static func makeContext(
        caFile: String?, certificatePath: String?, privateKeyPath: String?, alpn: [String]
    ) throws(TLSConfigurationError) -> OpaquePointer {
        let context = try TLSServerContext.newContext(TLS_client_method())
        var success = false
        defer { if !success { SSL_CTX_free(context) } }
        SSL_CTX_set_options(context, CAssertGate_SSL_OP_NO_COMPRESSION() | CAssertGate_SSL_OP_NO_RENEGOTIATION())
        _ = CAssertGate_SSL_CTX_set_mode(context, CAssertGate_SSL_MODE_RELEASE_BUFFERS())
        SSL_CTX_set_verify(context, SSL_VERIFY_PEER, nil)

        if let caFile {
            guard SSL_CTX_load_verify_locations(context, caFile, nil) == 1 else {
                throw .caFile(path: caFile, reason: OpenSSLErrorQueue.drain())
            }
        } else {
            guard SSL_CTX_set_default_verify_paths(context) == 1 else {
                throw .setting(name: "the system trust store", reason: OpenSSLErrorQueue.drain())
            }
        }

        switch (certificatePath, privateKeyPath) {
        case (nil, nil):
            break
        case (let certificate?, let keyPath?):
            guard SSL_CTX_use_certificate_chain_file(context, certificate) == 1 else {
                throw .certificate(path: certificate, reason: OpenSSLErrorQueue.drain())
            }
            try TLSServerContext.withPrivateKey(path: keyPath) { key throws(TLSConfigurationError) in
                guard SSL_CTX_use_PrivateKey(context, key) == 1, SSL_CTX_check_private_key(context) == 1 else {
                    throw .keyMismatch(certificatePath: certificate, privateKeyPath: keyPath, reason: OpenSSLErrorQueue.drain())
                }
            }
        case (let certificate?, nil):
            throw .setting(name: "client certificate '\(certificate)'", reason: "needs its privateKey")
        case (nil, let keyPath?):
            throw .setting(name: "client private key '\(keyPath)'", reason: "needs its certificate")
        }
        if !alpn.isEmpty {
            let wire = try ALPN.wireFormat(alpn)
            // SSL_CTX_set_alpn_protos returns 0 on success (unlike most of OpenSSL).
            guard wire.withUnsafeBufferPointer({ SSL_CTX_set_alpn_protos(context, $0.baseAddress, UInt32($0.count)) }) == 0
            else { throw .setting(name: "ALPN \(alpn)", reason: OpenSSLErrorQueue.drain()) }
        }
        success = true
        return context
    }
}
