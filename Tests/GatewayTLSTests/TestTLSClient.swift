import GatewayTLS
import COpenSSL
import NIOCore

/// An in-process TLS client on memory BIOs, so `EmbeddedChannel` tests can
/// drive the server handler byte by byte without sockets. It trusts any
/// certificate: it exists to exercise the server, not to verify it.
final class TestTLSClient {
    struct Failure: Error, CustomStringConvertible {
        let description: String
    }

    private let context: OpaquePointer
    private let ssl: OpaquePointer
    private let readBIO: OpaquePointer
    private let writeBIO: OpaquePointer
    private(set) var peerClosed = false

    init(alpn: [String]) throws {
        guard let context = SSL_CTX_new(TLS_client_method()) else { throw Failure(description: "SSL_CTX_new") }
        SSL_CTX_set_verify(context, SSL_VERIFY_NONE, nil)
        guard let ssl = SSL_new(context) else {
            SSL_CTX_free(context)
            throw Failure(description: "SSL_new")
        }
        guard let readBIO = BIO_new(BIO_s_mem()), let writeBIO = BIO_new(BIO_s_mem()) else {
            SSL_free(ssl)
            SSL_CTX_free(context)
            throw Failure(description: "BIO_new")
        }
        SSL_set_bio(ssl, readBIO, writeBIO)
        SSL_set_connect_state(ssl)
        let wire = try ALPN.wireFormat(alpn)
        let status = wire.withUnsafeBufferPointer { SSL_set_alpn_protos(ssl, $0.baseAddress, UInt32($0.count)) }
        self.context = context
        self.ssl = ssl
        self.readBIO = readBIO
        self.writeBIO = writeBIO
        // SSL_set_alpn_protos returns 0 on success.
        guard status == 0 else { throw Failure(description: "SSL_set_alpn_protos") }
    }

    deinit {
        SSL_free(self.ssl)
        SSL_CTX_free(self.context)
    }

    /// Advances the handshake; true once complete.
    @discardableResult
    func handshake() throws -> Bool {
        ERR_clear_error()
        let result = SSL_do_handshake(self.ssl)
        if result == 1 { return true }
        let code = SSL_get_error(self.ssl, result)
        guard code == SSL_ERROR_WANT_READ || code == SSL_ERROR_WANT_WRITE else {
            throw Failure(description: "client handshake failed: \(code)")
        }
        return false
    }

    func receive(_ buffer: ByteBuffer) {
        buffer.withUnsafeReadableBytes { bytes in
            if let base = bytes.baseAddress, bytes.count > 0 {
                _ = BIO_write(self.readBIO, base, Int32(bytes.count))
            }
        }
    }

    /// Ciphertext the client wants to send.
    func takeOutput() -> ByteBuffer {
        var buffer = ByteBuffer()
        var chunk = [UInt8](repeating: 0, count: 16 * 1024)
        while true {
            let read = chunk.withUnsafeMutableBytes { BIO_read(self.writeBIO, $0.baseAddress, Int32($0.count)) }
            if read <= 0 { break }
            buffer.writeBytes(chunk[0..<Int(read)])
        }
        return buffer
    }

    func send(_ plaintext: [UInt8]) throws -> ByteBuffer {
        let written = plaintext.withUnsafeBytes { SSL_write(self.ssl, $0.baseAddress, Int32($0.count)) }
        guard written == Int32(plaintext.count) else { throw Failure(description: "SSL_write") }
        return self.takeOutput()
    }

    /// Decrypts everything received so far; notes a close_notify.
    func readPlaintext() throws -> [UInt8] {
        var output: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 16 * 1024)
        while true {
            ERR_clear_error()
            let read = chunk.withUnsafeMutableBytes { SSL_read(self.ssl, $0.baseAddress, Int32($0.count)) }
            if read > 0 {
                output.append(contentsOf: chunk[0..<Int(read)])
                continue
            }
            let code = SSL_get_error(self.ssl, read)
            if code == SSL_ERROR_ZERO_RETURN {
                self.peerClosed = true
                return output
            }
            guard code == SSL_ERROR_WANT_READ else { throw Failure(description: "client SSL_read failed: \(code)") }
            return output
        }
    }

    /// A TLS 1.3 KeyUpdate asking for one back (`update_requested`).
    func keyUpdate() throws -> ByteBuffer {
        guard SSL_key_update(self.ssl, SSL_KEY_UPDATE_REQUESTED) == 1 else {
            throw Failure(description: "SSL_key_update failed")
        }
        _ = SSL_do_handshake(self.ssl)
        return self.takeOutput()
    }

    func closeNotify() -> ByteBuffer {
        _ = SSL_shutdown(self.ssl)
        return self.takeOutput()
    }

    var negotiatedALPN: String? {
        var data: UnsafePointer<UInt8>?
        var length: UInt32 = 0
        SSL_get0_alpn_selected(self.ssl, &data, &length)
        guard let data, length > 0 else { return nil }
        return String(decoding: UnsafeBufferPointer(start: data, count: Int(length)), as: UTF8.self)
    }
}
