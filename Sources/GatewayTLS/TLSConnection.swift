import COpenSSL
#if canImport(Glibc)
import Glibc
#endif
import NIOCore

/// One `SSL` (server or client side) wired to two memory BIOs: ciphertext
/// from the socket goes into `readBIO`, ciphertext for the socket is drained
/// from `writeBIO`. Owns the `SSL` (and through it both BIOs) and frees it in
/// deinit. Holds its context object so the `SSL_CTX` (and the server's ALPN
/// buffer) outlive the `SSL`. Loop-confined: used only by its handler.
final class TLSConnection {
    enum HandshakeStep {
        case completed
        case wantsMoreData
        case failed(reason: String)
    }

    enum ReadStep {
        /// This many plaintext bytes were appended.
        case bytes(Int)
        /// Need more ciphertext; everything decryptable was decrypted.
        case wantsMoreData
        /// The peer sent close_notify.
        case peerClosed
        case failed(reason: String)
    }

    enum WriteStep {
        case written
        case failed(reason: String)
    }

    private let ssl: OpaquePointer
    private let readBIO: OpaquePointer
    private let writeBIO: OpaquePointer
    /// The `TLSServerContext` or `TLSClientContext` whose `SSL_CTX` this `SSL` uses.
    private let context: AnyObject

    /// The largest TLS record payload; one `SSL_read` never yields more.
    static let maximumRecordSize = 16 * 1024

    /// Server side of an accepted connection.
    convenience init?(context: TLSServerContext) {
        guard let (ssl, readBIO, writeBIO) = Self.makeSSL(context.sslContext) else { return nil }
        SSL_set_accept_state(ssl)
        self.init(ssl: ssl, readBIO: readBIO, writeBIO: writeBIO, context: context)
    }

    /// Client side of an outbound connection to `serverName` (a DNS name or
    /// an IP literal), which the peer's certificate must match; a DNS name is
    /// also sent as SNI. Nil when OpenSSL cannot allocate or takes no name.
    convenience init?(client context: TLSClientContext, serverName: String) {
        guard let (ssl, readBIO, writeBIO) = Self.makeSSL(context.sslContext) else { return nil }
        let named: Bool
        if Self.isIPLiteral(serverName) {
            named = X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), serverName) == 1
        } else {
            named = CAssertGate_SSL_set_tlsext_host_name(ssl, serverName) == 1 && SSL_set1_host(ssl, serverName) == 1
        }
        guard named else {
            SSL_free(ssl)
            OpenSSLErrorQueue.clear()
            return nil
        }
        SSL_set_connect_state(ssl)
        self.init(ssl: ssl, readBIO: readBIO, writeBIO: writeBIO, context: context)
    }

    /// IPv4 dotted quad or IPv6 text (no brackets): checked as an IP SAN.
    static func isIPLiteral(_ name: String) -> Bool {
        var v4 = in_addr()
        var v6 = in6_addr()
        return inet_pton(AF_INET, name, &v4) == 1 || inet_pton(AF_INET6, name, &v6) == 1
    }

    private static func makeSSL(_ sslContext: OpaquePointer) -> (OpaquePointer, OpaquePointer, OpaquePointer)? {
        OpenSSLErrorQueue.clear()
        guard let ssl = SSL_new(sslContext) else {
            OpenSSLErrorQueue.clear()
            return nil
        }
        guard let readBIO = BIO_new(BIO_s_mem()) else {
            SSL_free(ssl)
            OpenSSLErrorQueue.clear()
            return nil
        }
        guard let writeBIO = BIO_new(BIO_s_mem()) else {
            BIO_free(readBIO)
            SSL_free(ssl)
            OpenSSLErrorQueue.clear()
            return nil
        }
        // The SSL takes ownership of both BIOs; SSL_free releases them.
        SSL_set_bio(ssl, readBIO, writeBIO)
        return (ssl, readBIO, writeBIO)
    }

    private init(ssl: OpaquePointer, readBIO: OpaquePointer, writeBIO: OpaquePointer, context: AnyObject) {
        self.ssl = ssl
        self.readBIO = readBIO
        self.writeBIO = writeBIO
        self.context = context
    }

    deinit {
        SSL_free(self.ssl)
    }

    /// Appends ciphertext to the read BIO (the BIO copies it; that copy is
    /// the only one). False only if OpenSSL could not allocate.
    func feedCiphertext(_ buffer: ByteBuffer) -> Bool {
        buffer.withUnsafeReadableBytes { bytes in
            guard let base = bytes.baseAddress else { return true }
            var offset = 0
            while offset < bytes.count {
                let chunk = min(bytes.count - offset, Int(Int32.max))
                let written = BIO_write(self.readBIO, base + offset, Int32(chunk))
                guard written > 0 else { return false }
                offset += Int(written)
            }
            return true
        }
    }

    func doHandshake() -> HandshakeStep {
        OpenSSLErrorQueue.clear()
        let result = SSL_do_handshake(self.ssl)
        if result == 1 { return .completed }
        switch SSL_get_error(self.ssl, result) {
        case SSL_ERROR_WANT_READ, SSL_ERROR_WANT_WRITE:
            // WANT_WRITE cannot persist with an unbounded memory BIO: the
            // caller drains the write BIO after every step anyway.
            return .wantsMoreData
        case let code:
            var reason = "handshake failed (SSL_get_error \(code)): \(OpenSSLErrorQueue.drain())"
            // A refused peer certificate says why (expired, unknown issuer, name mismatch).
            let verify = SSL_get_verify_result(self.ssl)
            if verify != X509_V_OK, let text = X509_verify_cert_error_string(verify) {
                reason += "; certificate verification: \(String(cString: text))"
            }
            return .failed(reason: reason)
        }
    }

    /// Decrypts into the writable space `buffer` already has (at most one
    /// record); the caller supplies a buffer with free capacity, so nothing
    /// is reallocated or copied here.
    func readPlaintext(into buffer: inout ByteBuffer) -> ReadStep {
        OpenSSLErrorQueue.clear()
        var code: Int32 = 0
        let read = buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: 1) { target in
            guard let base = target.baseAddress else { return 0 }
            let result = SSL_read(self.ssl, base, Int32(clamping: target.count))
            if result > 0 { return Int(result) }
            code = SSL_get_error(self.ssl, result)
            return 0
        }
        if read > 0 { return .bytes(read) }
        switch code {
        case SSL_ERROR_WANT_READ, SSL_ERROR_WANT_WRITE:
            return .wantsMoreData
        case SSL_ERROR_ZERO_RETURN:
            return .peerClosed
        default:
            return .failed(reason: "read failed (SSL_get_error \(code)): \(OpenSSLErrorQueue.drain())")
        }
    }

    /// Encrypts all of `bytes` into the write BIO (memory BIOs never apply
    /// back-pressure, so `SSL_write` completes in one call).
    func writePlaintext(_ bytes: UnsafeRawBufferPointer) -> WriteStep {
        guard let base = bytes.baseAddress, bytes.count > 0 else { return .written }
        OpenSSLErrorQueue.clear()
        let result = SSL_write(self.ssl, base, Int32(clamping: bytes.count))
        if result > 0, Int(result) == bytes.count { return .written }
        let code = SSL_get_error(self.ssl, result)
        return .failed(reason: "write failed (SSL_get_error \(code)): \(OpenSSLErrorQueue.drain())")
    }

    /// Queues close_notify. Only valid after a successful handshake with no
    /// fatal error (OpenSSL forbids SSL_shutdown after one).
    func shutdown() {
        OpenSSLErrorQueue.clear()
        _ = SSL_shutdown(self.ssl)
        OpenSSLErrorQueue.clear()
    }

    var pendingCiphertextBytes: Int {
        Int(BIO_ctrl_pending(self.writeBIO))
    }

    /// Moves everything in the write BIO to the end of `buffer`.
    func drainCiphertext(into buffer: inout ByteBuffer) {
        while true {
            let pending = self.pendingCiphertextBytes
            if pending == 0 { return }
            let read = buffer.writeWithUnsafeMutableBytes(minimumWritableBytes: pending) { target in
                guard let base = target.baseAddress else { return 0 }
                let result = BIO_read(self.writeBIO, base, Int32(clamping: min(pending, target.count)))
                return result > 0 ? Int(result) : 0
            }
            if read == 0 { return }
        }
    }

    var negotiatedALPN: String? {
        var data: UnsafePointer<UInt8>?
        var length: UInt32 = 0
        SSL_get0_alpn_selected(self.ssl, &data, &length)
        guard let data, length > 0 else { return nil }
        return String(decoding: UnsafeBufferPointer(start: data, count: Int(length)), as: UTF8.self)
    }
}
