/// The three calls of Apple's DeviceCheck API ("Accessing and modifying
/// per-device data"), each a `POST` of JSON to its path.
enum DeviceCheckCall: String, Sendable, CaseIterable {
    case validate
    case query
    case update

    var path: String {
        switch self {
        case .validate: return "/v1/validate_device_token"
        case .query: return "/v1/query_two_bits"
        case .update: return "/v1/update_two_bits"
        }
    }
}
