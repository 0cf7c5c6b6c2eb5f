import COpenSSL

/// An X.509 certificate owned by Swift (X509 freed in deinit). Immutable after
/// init; its DER is encoded once and kept.
public final class Certificate: @unchecked Sendable {
    let pointer: OpaquePointer
    /// The DER encoding, as it goes into x5c or a receipt.
    public let der: [UInt8]

    /// Takes ownership of `x509`.
    init(taking x509: OpaquePointer) throws {
        var out: UnsafeMutablePointer<UInt8>?
        let length = i2d_X509(x509, &out)
        guard length > 0, let out else {
            X509_free(x509)
            throw DeviceSimError.openSSL("i2d_X509")
        }
        defer { CAssertGate_OPENSSL_free(out) }
        self.der = Array(UnsafeBufferPointer(start: out, count: Int(length)))
        self.pointer = x509
    }

    public convenience init(der: [UInt8]) throws {
        let parsed: OpaquePointer? = der.withUnsafeBufferPointer { buffer in
            var cursor = buffer.baseAddress
            return d2i_X509(nil, &cursor, buffer.count)
        }
        guard let x509 = parsed else { throw DeviceSimError.openSSL("d2i_X509") }
        try self.init(taking: x509)
    }

    public convenience init(pem: String) throws {
        let bio = try MemoryBIO(bytes: Array(pem.utf8))
        guard let x509 = PEM_read_bio_X509(bio.pointer, nil, nil, nil) else {
            throw DeviceSimError.openSSL("PEM_read_bio_X509")
        }
        try self.init(taking: x509)
    }

    deinit { X509_free(pointer) }

    public func pem() throws -> String {
        let bio = try MemoryBIO()
        guard PEM_write_bio_X509(bio.pointer, pointer) == 1 else { throw DeviceSimError.openSSL("PEM_write_bio_X509") }
        return bio.string()
    }
}
