/// The App Attest environment, read from the authenticator data's aaguid.
public enum AppAttestEnvironment: String, Sendable, Hashable, CaseIterable {
    case production
    case development

    /// `appattestdevelop` → development; `appattest` + seven 0x00 → production.
    public init?(aaguid: [UInt8]) {
        if aaguid == Self.developmentAAGUID {
            self = .development
        } else if aaguid == Self.productionAAGUID {
            self = .production
        } else {
            return nil
        }
    }

    static let developmentAAGUID = Array("appattestdevelop".utf8)
    static let productionAAGUID = Array("appattest".utf8) + [UInt8](repeating: 0, count: 7)
}
