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

/// The authData extension map iOS 27 appends after the COSE key (ED flag
/// clear), and after the 37 fixed bytes of an assertion's authenticator data.
public struct AuthenticatorExtensions: Sendable, Equatable {
    /// "apple_bundle_version_01" (text).
    public var bundleVersion: String?
    /// "apple_validation_category_01" as a byte string, e.g. 01 00 00 00
    /// (Apple's form; any length, so malformed values can be sent too).
    public var validationCategory: [UInt8]?
    /// "apple_validation_category_01" as a CBOR unsigned integer instead
    /// (the other form risk.md §1 accepts). Wins over `validationCategory`.
    public var validationCategoryInteger: UInt64?
    /// Extra entries after the known ones (text key → text value).
    public var extra: [(String, String)]

    public init(
        bundleVersion: String? = nil, validationCategory: [UInt8]? = nil, validationCategoryInteger: UInt64? = nil,
        extra: [(String, String)] = []
    ) {
        self.bundleVersion = bundleVersion
        self.validationCategory = validationCategory
        self.validationCategoryInteger = validationCategoryInteger
        self.extra = extra
    }

    /// A launch category in Apple's form: 4 bytes, little-endian.
    public static func categoryBytes(_ value: UInt32) -> [UInt8] {
        [UInt8(value & 0xff), UInt8(value >> 8 & 0xff), UInt8(value >> 16 & 0xff), UInt8(value >> 24)]
    }

    /// Extensions carrying `category` in the chosen form, and a bundle version.
    public static func launch(
        category: UInt32?, asInteger: Bool = false, bundleVersion: String? = nil
    ) -> AuthenticatorExtensions {
        AuthenticatorExtensions(
            bundleVersion: bundleVersion,
            validationCategory: asInteger ? nil : category.map(categoryBytes),
            validationCategoryInteger: asInteger ? category.map(UInt64.init) : nil)
    }

    public static func == (a: AuthenticatorExtensions, b: AuthenticatorExtensions) -> Bool {
        a.bundleVersion == b.bundleVersion && a.validationCategory == b.validationCategory
            && a.validationCategoryInteger == b.validationCategoryInteger
            && a.extra.map { [$0.0, $0.1] } == b.extra.map { [$0.0, $0.1] }
    }

    var cbor: CBOR {
        var pairs: [(CBOR, CBOR)] = []
        if let bundleVersion { pairs.append((.text("apple_bundle_version_01"), .text(bundleVersion))) }
        if let validationCategoryInteger {
            pairs.append((.text("apple_validation_category_01"), .unsigned(validationCategoryInteger)))
        } else if let validationCategory {
            pairs.append((.text("apple_validation_category_01"), .bytes(validationCategory)))
        }
        for (key, value) in extra { pairs.append((.text(key), .text(value))) }
        return .map(pairs)
    }
}

/// The credential certificate's 1.2.840.113635.100.8.6 contents a simulated
/// key carries (risk.md §1).
public enum SimKeyPolicy: String, Sendable, CaseIterable {
    /// Apple's documented macOS 27 policy (Full Security, SIP): 72 bytes.
    case macosFullSecurity = "macos-full-security"
    /// Some other policy blob, like an iOS key's.
    case other

    /// The extnValue octets to put in the leaf.
    public var aclBlob: [UInt8] {
        switch self {
        case .macosFullSecurity: return Self.macOSFullSecurityBytes
        case .other: return [0x30, 0x06, 0xa3, 0x04, 0x04, 0x02, 0x30, 0x00]
        }
    }

    /// Written out independently of the Verifier's copy (the two are compared by tests).
    public static let macOSFullSecurityBytes: [UInt8] = hex(
        "3046a344044230400c023131303a30090c026f6ba1030101ff30090c026f61a1030101ff"
            + "300b0c046f64656ca1030101ff30150c046f73676ea0060c04727365633005a603020101")

    private static func hex(_ text: String) -> [UInt8] {
        var out: [UInt8] = []
        var index = text.startIndex
        while index < text.endIndex {
            let next = text.index(index, offsetBy: 2)
            out.append(UInt8(text[index..<next], radix: 16) ?? 0)
            index = next
        }
        return out
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
    /// Adds 1.2.840.113635.100.8.6 with these bytes as its extnValue contents
    /// (`SimKeyPolicy.aclBlob` for Apple's macOS policy or another one).
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
