import NIOCore
import Verifier

/// RFC 9457 problem+json answers produced by the gateway itself.
enum ProblemResponse {
    static func body(_ reason: ReasonToken, requestId: String, allocator: ByteBufferAllocator) -> ByteBuffer {
        let json = ProblemDetails.body(reason: reason, requestId: requestId)
        return allocator.buffer(string: json)
    }

    static func headers(bodyLength: Int, requestId: String, extra: [(String, String)]) -> [(String, String)] {
        var h: [(String, String)] = [
            ("content-type", "application/problem+json"),
            ("content-length", String(bodyLength)),
            ("x-request-id", requestId),
        ]
        h.append(contentsOf: extra)
        return h
    }
}
