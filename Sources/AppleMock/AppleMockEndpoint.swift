/// The Apple endpoints the mock plays: DeviceCheck's three calls and App
/// Attest's receipt refresh.
public enum AppleMockEndpoint: String, Sendable, CaseIterable, Hashable {
    case validate = "validate_device_token"
    case query = "query_two_bits"
    case update = "update_two_bits"
    case attestationData

    public var path: String { "/v1/" + rawValue }

    public init?(path: String) {
        guard let found = Self.allCases.first(where: { $0.path == path }) else { return nil }
        self = found
    }
}
