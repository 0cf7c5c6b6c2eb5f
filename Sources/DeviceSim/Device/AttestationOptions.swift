/// App Attest environments and their AAGUIDs (authData bytes 37..<53).
public enum AttestationEnvironment: String, Sendable, CaseIterable {
    case development
    case production

    /// `appattestdevelop`, or `appattest` followed by seven 0x00.
    public var aaguid: [UInt8] {
        switch self {
        case .development: return Array("appattestdevelop".utf8)
        case .production: return Array("appattest".utf8) + [UInt8](repeating: 0, count: 7)
        }
    }

    /// The receipt's field 7 for this environment.
    public var receiptEnvironment: ReceiptPayload.Environment {
        self == .development ? .sandbox : .production
    }
}

/// The authData extension map iOS 27 appends after the COSE key (ED flag clear).
public struct AuthenticatorExtensions: Sendable, Equatable {
    /// "apple_bundle_version_01" (text).
    public var bundleVersion: String?
    /// "apple_validation_category_01" (bytes), e.g. 01 00 00 00.
    public var validationCategory: [UInt8]?

    public init(bundleVersion: String? = nil, validationCategory: [UInt8]? = nil) {
        self.bundleVersion = bundleVersion
        self.validationCategory = validationCategory
    }

    var cbor: CBOR {
        var pairs: [(CBOR, CBOR)] = []
        if let bundleVersion { pairs.append((.text("apple_bundle_version_01"), .text(bundleVersion))) }
        if let validationCategory { pairs.append((.text("apple_validation_category_01"), .bytes(validationCategory))) }
        return .map(pairs)
    }
}

/// Everything about an attestation that is not a failure mutation.
public struct AttestationOptions: Sendable {
    /// Appended to authData after the COSE key (iOS 27 style); nil = none.
    public var extensions: AuthenticatorExtensions?
    /// Leaf validity: [at - 60 s, at + leafLifetime].
    public var leafLifetime: Int64
    /// Adds the 1.2.840.113635.100.8.5 App ID extension to the leaf.
    public var includeAppIdExtension: Bool
    /// Adds 1.2.840.113635.100.8.7 with this OS version.
    public var osVersion: String?
    /// Adds 1.2.840.113635.100.8.6 with these bytes.
    public var aclBlob: [UInt8]?
    /// Receipt field 5; nil = 64 random bytes in base64.
    public var receiptToken: String?
    /// Receipt field 21 = creation + this (Apple: ~90 days).
    public var receiptLifetimeMillis: Int64

    public init(
        extensions: AuthenticatorExtensions? = nil, leafLifetime: Int64 = 3 * 86_400,
        includeAppIdExtension: Bool = true, osVersion: String? = "27.0", aclBlob: [UInt8]? = nil,
        receiptToken: String? = nil, receiptLifetimeMillis: Int64 = 90 * 86_400_000
    ) {
        self.extensions = extensions
        self.leafLifetime = leafLifetime
        self.includeAppIdExtension = includeAppIdExtension
        self.osVersion = osVersion
        self.aclBlob = aclBlob
        self.receiptToken = receiptToken
        self.receiptLifetimeMillis = receiptLifetimeMillis
    }
}
