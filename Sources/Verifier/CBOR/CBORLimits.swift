/// Resource limits for decoding attacker-controlled CBOR. Every limit is
/// checked before memory is allocated for the item it bounds.
public struct CBORLimits: Sendable, Hashable {
    /// Maximum size of the whole input in bytes.
    public var maxInputSize: Int
    /// Maximum nesting depth of arrays and maps (the top-level item is depth 1).
    public var maxDepth: Int
    /// Maximum number of data items in the whole input (map entries count twice).
    public var maxItems: Int
    /// Maximum length of one byte or text string.
    public var maxStringLength: Int
    /// Maximum number of elements of one array or entries of one map.
    public var maxContainerCount: Int

    public init(
        maxInputSize: Int, maxDepth: Int, maxItems: Int, maxStringLength: Int,
        maxContainerCount: Int
    ) {
        self.maxInputSize = maxInputSize
        self.maxDepth = maxDepth
        self.maxItems = maxItems
        self.maxStringLength = maxStringLength
        self.maxContainerCount = maxContainerCount
    }

    /// Attestation objects: ≤ 64 KiB (app-attest.md §1).
    public static let attestation = CBORLimits(
        maxInputSize: 64 * 1024, maxDepth: 8, maxItems: 512, maxStringLength: 64 * 1024,
        maxContainerCount: 64)

    /// Assertion objects and authenticator-data extension maps.
    public static let assertion = CBORLimits(
        maxInputSize: 16 * 1024, maxDepth: 8, maxItems: 256, maxStringLength: 16 * 1024,
        maxContainerCount: 64)
}
