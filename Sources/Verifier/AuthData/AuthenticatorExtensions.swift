/// The CBOR extension map that iOS 27+ appends to authenticator data (also
/// when the ED flag is clear), in attestations and assertions alike. Unknown
/// keys are kept in `entries`. A known key of the wrong type or length is
/// treated as absent and named in `malformedKeys` (risk.md §1): an optional
/// signal never fails the object it came in by itself.
public struct AuthenticatorExtensions: Sendable, Hashable {
    public static let bundleVersionKey = "apple_bundle_version_01"
    public static let validationCategoryKey = "apple_validation_category_01"
    /// The known keys, in the order `malformedKeys` lists them.
    public static let knownKeys = [bundleVersionKey, validationCategoryKey]
    /// A bundle version longer than this is treated as malformed (Apple's are
    /// short; the value goes into a header and the key record).
    public static let maxBundleVersionBytes = 256

    /// The app's bundle version (`apple_bundle_version_01`).
    public var bundleVersion: String?
    /// The raw bytes of `apple_validation_category_01` when it was a byte
    /// string (any length; shown by the offline CLI).
    public var validationCategory: [UInt8]?
    /// The launch category as a number: 4 bytes little-endian, or a CBOR
    /// unsigned integer up to 2^32-1; nil when absent or malformed.
    public var launchCategory: UInt32?
    /// Known keys whose value had the wrong type or length.
    public var malformedKeys: [String]
    /// Every entry in encoded order, known keys included.
    public var entries: [CBORMapEntry]
    /// The encoded map as it appeared in the authenticator data (empty when absent).
    public var raw: [UInt8]

    public static let none = AuthenticatorExtensions(
        bundleVersion: nil, validationCategory: nil, entries: [], raw: [])

    public var isEmpty: Bool { raw.isEmpty }

    public init(
        bundleVersion: String?, validationCategory: [UInt8]?, launchCategory: UInt32? = nil,
        malformedKeys: [String] = [], entries: [CBORMapEntry], raw: [UInt8]
    ) {
        self.bundleVersion = bundleVersion
        self.validationCategory = validationCategory
        self.launchCategory = launchCategory
        self.malformedKeys = malformedKeys
        self.entries = entries
        self.raw = raw
    }

    /// Parses `bytes[range]` as exactly one CBOR map, bounded by the
    /// assertion limits (16 KiB, depth 8, 256 items). A map that does not
    /// decode is an error (it is part of the signed structure); a known key
    /// with a bad value is not.
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
            if let text = version.textValue, !text.isEmpty, text.utf8.count <= maxBundleVersionBytes {
                result.bundleVersion = text
            } else {
                result.malformedKeys.append(bundleVersionKey)
            }
        }
        if let category = value[text: validationCategoryKey] {
            result.validationCategory = category.bytesValue
            if let number = LaunchCategory.decode(category) {
                result.launchCategory = number
            } else {
                result.malformedKeys.append(validationCategoryKey)
            }
        }
        return result
    }
}
