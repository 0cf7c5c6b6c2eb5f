import NIOCore

extension ByteBuffer {
    /// Moves as many readable bytes as fit into `dst` from `offset` on (a
    /// frame buffer nghttp2 lends a data source) and returns how many.
    mutating func moveBytes(into dst: UnsafeMutableRawBufferPointer, at offset: Int) -> Int {
        guard let base = dst.baseAddress else { return 0 }
        let n = Swift.min(dst.count - offset, readableBytes)
        guard n > 0 else { return 0 }
        withUnsafeReadableBytes { src in
            if let from = src.baseAddress { (base + offset).copyMemory(from: from, byteCount: n) }
        }
        moveReaderIndex(forwardBy: n)
        return n
    }
}
