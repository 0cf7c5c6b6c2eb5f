import Foundation

/// Reads Apple's answer to a DeviceCheck call (devicecheck.md "Apple's
/// API"). The body was already bounded by the client (`maxBody`); the text
/// kept for logs is cut to `maxReasonLength` printable ASCII characters.
enum DeviceCheckAnswer {
    static let maxReasonLength = 200

    static func result(of call: DeviceCheckCall, status: Int, body: [UInt8]) -> DeviceCheckResult {
        switch status {
        case 200:
            switch call {
            case .validate: return .valid
            case .update: return .updated
            // Apple answers a device whose bits were never set with 200 and
            // plain text ("Failed to find bit state", "Bit State Not Found"):
            // whatever is not the bits object means unset.
            case .query: return bits(body).map { .bits($0) } ?? .unset
            }
        case 400:
            let text = reason(body)
            let lower = text.lowercased()
            // "Missing or badly formatted authorization token" is about our JWT.
            if lower.contains("authorization") { return .unauthorized(status: 400, reason: text) }
            // "Missing or incorrectly formatted device token payload", "Bad Device Token".
            if lower.contains("device token") || lower.contains("device_token") { return .invalidToken(text) }
            return .badRequest(text)
        case 401, 403:
            return .unauthorized(status: status, reason: reason(body))
        case 429:
            return .throttled
        default:
            let text = reason(body)
            return .failed(text.isEmpty ? "Apple answered \(status)" : "Apple answered \(status): \(text)")
        }
    }

    /// The bits object: `bit0` and `bit1` JSON booleans; `last_update_time`
    /// kept when it is `YYYY-MM`.
    static func bits(_ body: [UInt8]) -> DeviceCheckBits? {
        guard body.first(where: { !isSpace($0) }) == UInt8(ascii: "{") else { return nil }
        guard let object = try? JSONDecoder().decode(BitsObject.self, from: Data(body)) else { return nil }
        let month = object.last_update_time.flatMap { isMonth($0) ? $0 : nil }
        return DeviceCheckBits(bit0: object.bit0, bit1: object.bit1, lastUpdate: month)
    }

    /// `YYYY-MM` with a month 01–12.
    static func isMonth(_ text: String) -> Bool {
        let b = Array(text.utf8)
        guard b.count == 7, b[4] == UInt8(ascii: "-") else { return false }
        let digits = b[0..<4] + b[5..<7]
        guard digits.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return false }
        let month = Int(b[5] - 0x30) * 10 + Int(b[6] - 0x30)
        return (1...12).contains(month)
    }

    /// Apple's text reason, safe for a log line.
    static func reason(_ body: [UInt8]) -> String {
        let printable = body.prefix(maxReasonLength).map { $0 >= 0x20 && $0 < 0x7F ? Character(UnicodeScalar($0)) : " " }
        return String(printable).trimmingCharacters(in: .whitespaces)
    }

    private static func isSpace(_ b: UInt8) -> Bool { b == 0x20 || b == 0x09 || b == 0x0A || b == 0x0D }

    private struct BitsObject: Decodable {
        var bit0: Bool
        var bit1: Bool
        var last_update_time: String?

        enum CodingKeys: String, CodingKey { case bit0, bit1, last_update_time }

        /// The bits must be booleans; a month of another type is dropped, not fatal.
        init(from decoder: any Decoder) throws {
            let c = try decoder.container(keyedBy: CodingKeys.self)
            bit0 = try c.decode(Bool.self, forKey: .bit0)
            bit1 = try c.decode(Bool.self, forKey: .bit1)
            last_update_time = try? c.decodeIfPresent(String.self, forKey: .last_update_time)
        }
    }
}
