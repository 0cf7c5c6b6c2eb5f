/// The CBOR extension map that iOS 27+ appends to authenticator data (also
/// when the ED flag is clear). Unknown keys are kept in `entries`.
public struct AuthenticatorExtensions: Sendable, Hashable {
    public static let bundleVersionKey = "apple_bundle_version_01"
    public static let validationCategoryKey = "apple_validation_category_01"

    /// The app's bundle version (`apple_bundle_version_01`).
    public var bundleVersion: String?
    /// The launch validation category (`apple_validation_category_01`).
    public var validationCategory: [UInt8]?
    /// Every entry in encoded order, known keys included.
    public var entries: [CBORMapEntry]
    /// The encoded map as it appeared in the authenticator data (empty when absent).
    public var raw: [UInt8]

    public static let none = AuthenticatorExtensions(
        bundleVersion: nil, validationCategory: nil, entries: [], raw: [])

    public var isEmpty: Bool { raw.isEmpty }

    public init(bundleVersion: String?, validationCategory: [UInt8]?, entries: [CBORMapEntry], raw: [UInt8]) {
        self.bundleVersion = bundleVersion
        self.validationCategory = validationCategory
        self.entries = entries
        self.raw = raw
    }

    /// Parses `bytes[range]` as exactly one CBOR map.
    static func parse(_ bytes: [UInt8], range: Range<Int>) throws(AuthDataError) -> AuthenticatorExtensions {
        if range.isEmpty { return .none }
        let value: CBORValue
        do {
            value = try CBORDecoder(limits: .assertion).decode(bytes, range: range)
        } catch {
            throw .extensions(error)
        }
        guard let entries = value.mapEntries else { throw .extensionsNotAMap }
        var result = AuthenticatorExtensions(
            bundleVersion: nil, validationCategory: nil, entries: entries, raw: Array(bytes[range]))
        if let version = value[text: bundleVersionKey] {
            guard let text = version.textValue else { throw .extensionType(key: bundleVersionKey) }
            result.bundleVersion = text
        }
        if let category = value[text: validationCategoryKey] {
            guard let data = category.bytesValue else { throw .extensionType(key: validationCategoryKey) }
            result.validationCategory = data
        }
        return result
    }
}
