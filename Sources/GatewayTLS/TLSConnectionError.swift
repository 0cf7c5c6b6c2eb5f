/// Why a TLS connection ended abnormally. Pending write promises fail with
/// this; the reason comes from OpenSSL and names no secret material.
public struct TLSConnectionError: Error, Hashable, Sendable, CustomStringConvertible {
    public let reason: String

    init(reason: String) {
        self.reason = reason
    }

    public var description: String { "TLS connection failed: \(self.reason)" }
}
