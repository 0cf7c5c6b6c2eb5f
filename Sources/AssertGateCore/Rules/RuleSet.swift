import Verifier

/// One block of rules (`require` or `flag`, risk.md §2): each key optional.
public struct RuleSet: Sendable, Equatable {
    public var environments: Set<AppEnvironment>?
    public var launchCategories: LaunchCategoryRule?
    public var minAppVersion: AppVersion?
    public var keyPolicy: KeyPolicy?
    public var maxUserKeys: Int?
    public var maxRiskMetric: Int?
    /// Parsed and validated; acts only once DeviceCheck exists (docs/devicecheck.md).
    public var deviceBits: DeviceBitsRule?

    public init() {}

    public var isEmpty: Bool { self == RuleSet() }

    /// Per key, `overrides`' value where it has one, else this one's.
    public func overlaid(by overrides: RuleSet) -> RuleSet {
        var r = self
        if let v = overrides.environments { r.environments = v }
        if let v = overrides.launchCategories { r.launchCategories = v }
        if let v = overrides.minAppVersion { r.minAppVersion = v }
        if let v = overrides.keyPolicy { r.keyPolicy = v }
        if let v = overrides.maxUserKeys { r.maxUserKeys = v }
        if let v = overrides.maxRiskMetric { r.maxRiskMetric = v }
        if let v = overrides.deviceBits { r.deviceBits = v }
        return r
    }
}

/// `launchCategories`: the allowed numbers, and whether a key without a
/// category (iOS 26 and older) passes (`missing`).
public struct LaunchCategoryRule: Sendable, Equatable {
    public var allowed: Set<UInt32>
    public var allowsMissing: Bool

    public init(allowed: Set<UInt32>, allowsMissing: Bool) {
        self.allowed = allowed
        self.allowsMissing = allowsMissing
    }

    /// Names where Apple's table has one, numbers otherwise, `missing` last.
    public var description: String {
        let names = allowed.sorted().map { LaunchCategory.name($0) }
        return "[" + (names + (allowsMissing ? ["missing"] : [])).joined(separator: ", ") + "]"
    }
}

/// `deviceBits: {bit0: false, bit1: true}`: the listed bits must have these values.
public struct DeviceBitsRule: Sendable, Equatable {
    public var bit0: Bool?
    public var bit1: Bool?

    public init(bit0: Bool? = nil, bit1: Bool? = nil) {
        self.bit0 = bit0
        self.bit1 = bit1
    }

    public var description: String {
        "{" + [bit0.map { "bit0: \($0)" }, bit1.map { "bit1: \($0)" }].compactMap { $0 }.joined(separator: ", ") + "}"
    }
}

/// `rules: {require: {...}, flag: {...}}` on an app or a route.
public struct RulesConfig: Sendable, Equatable {
    public var require: RuleSet
    public var flag: RuleSet

    public init(require: RuleSet = RuleSet(), flag: RuleSet = RuleSet()) {
        self.require = require
        self.flag = flag
    }

    public var isEmpty: Bool { require.isEmpty && flag.isEmpty }

    /// The rules of a route for one app's keys: per key and per block, the
    /// route's value replaces the app's (risk.md §2, §6.20).
    public static func effective(app: RulesConfig, route: RulesConfig) -> RulesConfig {
        RulesConfig(require: app.require.overlaid(by: route.require), flag: app.flag.overlaid(by: route.flag))
    }
}
