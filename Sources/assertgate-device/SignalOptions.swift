import ArgumentParser
import DeviceSim

/// The iOS 27 / macOS 27 signals a simulated device writes (risk.md §1), so
/// every risk rule can be shown without an iPhone.
struct SignalOptions: ParsableArguments {
    @Option(help: "Launch category to write: a name (app-store, testflight, platform, …) or a number.")
    var launchCategory: String?

    @Flag(help: "Write the launch category as a CBOR unsigned integer instead of Apple's 4 little-endian bytes.")
    var categoryAsInteger = false

    @Option(help: "Bundle version to write (apple_bundle_version_01).")
    var bundleVersion: String?

    /// Apple's ValidationCategory names (risk.md §1), for the CLI only.
    static let categoryNames: [String: UInt32] = [
        "invalid": 0, "platform": 1, "testflight": 2, "development": 3, "app-store": 4, "enterprise": 5,
        "developer-id": 6, "local-signing": 7, "rosetta": 8, "oop-jit": 9, "none": 10,
    ]

    func validate() throws {
        _ = try category()
    }

    func category() throws -> UInt32? {
        guard let launchCategory else { return nil }
        if let n = Self.categoryNames[launchCategory] ?? UInt32(launchCategory) { return n }
        let names = Self.categoryNames.sorted { $0.value < $1.value }.map(\.key).joined(separator: ", ")
        throw ValidationError("--launch-category: '\(launchCategory)' is not a number or one of \(names)")
    }

    /// The extension map to write, or nil when no signal was chosen.
    func extensions() throws -> AuthenticatorExtensions? {
        let category = try category()
        guard category != nil || bundleVersion != nil else { return nil }
        return .launch(category: category, asInteger: categoryAsInteger, bundleVersion: bundleVersion)
    }
}

extension SimKeyPolicy: ExpressibleByArgument {}
