import COpenSSL

/// Owns a memory BIO for PEM/PKCS#7 input and output.
final class MemoryBIO {
    let pointer: OpaquePointer

    init() throws {
        guard let bio = BIO_new(BIO_s_mem()) else { throw DeviceSimError.openSSL("BIO_new") }
        pointer = bio
    }

    /// A read-write memory BIO pre-filled with `bytes` (copied, so nothing is lent).
    convenience init(bytes: [UInt8]) throws {
        try self.init()
        let written = bytes.withUnsafeBufferPointer { BIO_write(pointer, $0.baseAddress, Int32($0.count)) }
        guard bytes.isEmpty || written == Int32(bytes.count) else { throw DeviceSimError.openSSL("BIO_write") }
    }

    deinit { BIO_free(pointer) }

    /// Everything written so far, copied out of the BIO.
    func contents() -> [UInt8] {
        var data: UnsafePointer<UInt8>?
        let length = CAssertGate_DS_BIO_get_mem_data(pointer, &data)
        guard let data, length > 0 else { return [] }
        return Array(UnsafeBufferPointer(start: data, count: Int(length)))
    }

    func string() -> String { String(decoding: contents(), as: UTF8.self) }
}
