import Foundation

/// A DeviceCheck request body as the mock reads it (`device_token`,
/// `transaction_id`, `timestamp`, optional `bit0` / `bit1` booleans). The
/// handler has bounded its size.
struct DeviceCheckMockBody: Sendable, Decodable {
    var deviceToken: String
    var transactionId: String
    var timestamp: Int64
    var bit0: Bool?
    var bit1: Bool?

    enum CodingKeys: String, CodingKey {
        case deviceToken = "device_token"
        case transactionId = "transaction_id"
        case timestamp
        case bit0
        case bit1
    }

    static func parse(_ body: [UInt8]) -> DeviceCheckMockBody? {
        try? JSONDecoder().decode(DeviceCheckMockBody.self, from: Data(body))
    }
}
