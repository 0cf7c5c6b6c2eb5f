import Verifier
/// Signs the trust headers the gateway adds (protocol.md §6) so an upstream
/// reachable by other paths can tell they came from the gateway and are fresh.
///
/// Signed string: `t LF requestId LF method LF path LF` followed, for every
/// trust-prefixed header the gateway added except the signature itself, sorted
/// by lower-cased name, by `name ":" value LF`.
public struct TrustSigner: Sendable {
    private let key: [UInt8]
    /// Lower-cased name of the signature header (`<prefix>signature`).
    public let headerName: String
    private let lowerPrefix: String

    public init(secret: String, headerPrefix: String) {
        self.key = Array(secret.utf8)
        self.headerName = headerPrefix + "Signature"
        self.lowerPrefix = headerPrefix.lowercased()
    }

    /// `trustHeaders`: the headers the gateway added, as sent upstream. Headers
    /// not carrying the trust prefix (and the signature) are ignored.
    public func signature(
        timestamp: Int64, requestId: String, method: String, path: String,
        trustHeaders: [(name: String, value: String)]
    ) -> String {
        let signatureLower = headerName.lowercased()
        let lines =
            trustHeaders
            .map { (name: $0.name.lowercased(), value: $0.value) }
            .filter { $0.name.hasPrefix(lowerPrefix) && $0.name != signatureLower }
            .sorted { $0.name.utf8.lexicographicallyPrecedes($1.name.utf8) }
        var message: [UInt8] = []
        message.reserveCapacity(256)
        for part in ["\(timestamp)", requestId, method, path] {
            message.append(contentsOf: part.utf8)
            message.append(0x0A)
        }
        for line in lines {
            message.append(contentsOf: line.name.utf8)
            message.append(UInt8(ascii: ":"))
            message.append(contentsOf: line.value.utf8)
            message.append(0x0A)
        }
        let mac = Digest.hmacSHA256(key: key, message: message)
        return "t=\(timestamp), v1=\(Hex.encode(mac))"
    }
}
