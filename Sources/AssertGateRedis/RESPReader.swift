import CHiredis

/// Owns a hiredis `redisReader` (freed in deinit) that parses RESP into
/// `RESPValue`s directly: the reader is created with our own reply-object
/// functions, so hiredis never builds a `redisReply` tree that would then be
/// converted and freed (about ten mallocs and frees per reply). Bytes pass
/// `RESPLimitScanner` first, so every size the functions see is bounded.
/// Not thread-safe: one per connection, used on its event loop.
public final class RESPReader {
    private let reader: UnsafeMutablePointer<redisReader>
    private let functions: UnsafeMutablePointer<redisReplyObjectFunctions>
    private let builder = RESPReplyBuilder()
    private var scanner: RESPLimitScanner

    public init(limits: RESPLimits = .default) throws(RESPDecodingError) {
        let functions = UnsafeMutablePointer<redisReplyObjectFunctions>.allocate(capacity: 1)
        ag_hiredis_fill_functions(
            functions, RESPReplyBuilder.createString, RESPReplyBuilder.createArray, RESPReplyBuilder.createInteger,
            RESPReplyBuilder.createNil, RESPReplyBuilder.freeObject)
        guard let reader = redisReaderCreateWithFunctions(functions) else {
            functions.deallocate()
            throw .readerCreationFailed
        }
        self.functions = functions
        self.reader = reader
        self.scanner = RESPLimitScanner(limits: limits)
        // Lives as long as `self` (which frees the reader first in deinit).
        reader.pointee.privdata = Unmanaged.passUnretained(builder).toOpaque()
    }

    deinit {
        redisReaderFree(reader)
        functions.deallocate()
    }

    /// Scans and then copies `bytes` into hiredis' buffer.
    public func feed(_ bytes: UnsafeRawBufferPointer) throws(RESPDecodingError) {
        guard let base = bytes.baseAddress, bytes.count > 0 else { return }
        try scanner.scan(bytes)
        if redisReaderFeed(reader, base.assumingMemoryBound(to: CChar.self), bytes.count) != REDIS_OK {
            throw .hiredis(errorString())
        }
    }

    /// The next complete reply, or nil when more bytes are needed.
    public func next() throws(RESPDecodingError) -> RESPValue? {
        var raw: UnsafeMutableRawPointer?
        guard redisReaderGetReply(reader, &raw) == REDIS_OK else {
            builder.reset()
            throw .hiredis(errorString())
        }
        guard raw != nil else { return nil }
        return builder.takeCompleted()
    }

    private func errorString() -> String {
        withUnsafeBytes(of: &reader.pointee.errstr) { raw in
            let bytes = raw.bindMemory(to: UInt8.self)
            let end = bytes.firstIndex(of: 0) ?? bytes.count
            return String(decoding: bytes[..<end], as: UTF8.self)
        }
    }
}

/// Receives hiredis' parse events (depth first, in stream order) and
/// assembles `RESPValue`s. hiredis only needs a non-NULL token per object; it
/// gets the builder's own address, and `freeObject` has nothing to free.
final class RESPReplyBuilder {
    private struct Frame {
        var values: [RESPValue]
        var expected: Int
    }

    /// Arrays being filled, outermost first.
    private var open: [Frame] = []
    private var completed: RESPValue?

    func reset() {
        open.removeAll(keepingCapacity: true)
        completed = nil
    }

    func takeCompleted() -> RESPValue? {
        defer { completed = nil }
        return completed
    }

    private func add(_ value: RESPValue) {
        var value = value
        while true {
            guard let last = open.indices.last else {
                completed = value
                return
            }
            open[last].values.append(value)
            guard open[last].values.count == open[last].expected else { return }
            value = .array(open.removeLast().values)
        }
    }

    private func beginArray(_ count: Int) {
        guard count > 0 else {
            add(.array([]))
            return
        }
        var values: [RESPValue] = []
        values.reserveCapacity(count)
        open.append(Frame(values: values, expected: count))
    }

    private static func builder(_ task: UnsafePointer<redisReadTask>?) -> (RESPReplyBuilder, UnsafeMutableRawPointer)? {
        guard let privdata = task?.pointee.privdata else { return nil }
        return (Unmanaged<RESPReplyBuilder>.fromOpaque(privdata).takeUnretainedValue(), privdata)
    }

    static let createString: @convention(c) (UnsafePointer<redisReadTask>?, UnsafeMutablePointer<CChar>?, Int)
        -> UnsafeMutableRawPointer? = { task, str, len in
            guard let (b, token) = builder(task) else { return nil }
            let bytes: [UInt8] = (str != nil && len > 0)
                ? Array(UnsafeRawBufferPointer(start: str, count: len)) : []
            switch task?.pointee.type {
            case REDIS_REPLY_STATUS: b.add(.status(String(decoding: bytes, as: UTF8.self)))
            case REDIS_REPLY_ERROR: b.add(.error(String(decoding: bytes, as: UTF8.self)))
            default: b.add(.bulk(bytes))
            }
            return token
        }

    static let createArray: @convention(c) (UnsafePointer<redisReadTask>?, ag_hiredis_array_length)
        -> UnsafeMutableRawPointer? = { task, count in
            guard let (b, token) = builder(task) else { return nil }
            b.beginArray(Int(count))
            return token
        }

    static let createInteger: @convention(c) (UnsafePointer<redisReadTask>?, Int64) -> UnsafeMutableRawPointer? = {
        task, value in
        guard let (b, token) = builder(task) else { return nil }
        b.add(.integer(value))
        return token
    }

    static let createNil: @convention(c) (UnsafePointer<redisReadTask>?) -> UnsafeMutableRawPointer? = { task in
        guard let (b, token) = builder(task) else { return nil }
        b.add(.null)
        return token
    }

    static let freeObject: @convention(c) (UnsafeMutableRawPointer?) -> Void = { _ in }
}
