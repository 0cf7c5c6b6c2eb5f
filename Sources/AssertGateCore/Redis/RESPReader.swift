import CHiredis

/// Owns a hiredis `redisReader` (freed in deinit) and turns the bytes fed to it
/// into `RESPValue`s. Every `redisReply` tree is converted and freed inside
/// `next()`, so no C pointer escapes. Bytes pass `RESPLimitScanner` first.
/// Not thread-safe: one per connection, used on its event loop.
final class RESPReader {
    private let reader: UnsafeMutablePointer<redisReader>
    private var scanner: RESPLimitScanner

    init(limits: RESPLimits = .default) throws(RESPDecodingError) {
        guard let reader = redisReaderCreate() else { throw .readerCreationFailed }
        self.reader = reader
        self.scanner = RESPLimitScanner(limits: limits)
    }

    deinit {
        redisReaderFree(reader)
    }

    /// Scans and then copies `bytes` into hiredis' buffer.
    func feed(_ bytes: UnsafeRawBufferPointer) throws(RESPDecodingError) {
        guard let base = bytes.baseAddress, bytes.count > 0 else { return }
        try scanner.scan(bytes)
        if redisReaderFeed(reader, base.assumingMemoryBound(to: CChar.self), bytes.count) != REDIS_OK {
            throw .hiredis(errorString())
        }
    }

    /// The next complete reply, or nil when more bytes are needed.
    func next() throws(RESPDecodingError) -> RESPValue? {
        var raw: UnsafeMutableRawPointer?
        guard redisReaderGetReply(reader, &raw) == REDIS_OK else {
            throw .hiredis(errorString())
        }
        guard let raw else { return nil }
        defer { freeReplyObject(raw) }
        return Self.convert(raw.assumingMemoryBound(to: redisReply.self))
    }

    private func errorString() -> String {
        withUnsafeBytes(of: &reader.pointee.errstr) { raw in
            let bytes = raw.bindMemory(to: UInt8.self)
            let end = bytes.firstIndex(of: 0) ?? bytes.count
            return String(decoding: bytes[..<end], as: UTF8.self)
        }
    }

    private static func convert(_ reply: UnsafePointer<redisReply>) -> RESPValue {
        let r = reply.pointee
        switch r.type {
        case REDIS_REPLY_STRING:
            return .bulk(bytes(r.str, r.len))
        case REDIS_REPLY_STATUS:
            return .status(String(decoding: bytes(r.str, r.len), as: UTF8.self))
        case REDIS_REPLY_ERROR:
            return .error(String(decoding: bytes(r.str, r.len), as: UTF8.self))
        case REDIS_REPLY_INTEGER:
            return .integer(Int64(r.integer))
        case REDIS_REPLY_ARRAY:
            guard let element = r.element else { return .array([]) }
            var values: [RESPValue] = []
            values.reserveCapacity(r.elements)
            for i in 0..<r.elements {
                if let child = element[i] {
                    values.append(convert(child))
                } else {
                    values.append(.null)
                }
            }
            return .array(values)
        default:
            return .null
        }
    }

    private static func bytes(_ str: UnsafeMutablePointer<CChar>?, _ len: Int) -> [UInt8] {
        guard let str, len > 0 else { return [] }
        return Array(UnsafeRawBufferPointer(start: str, count: len))
    }
}
