import Verifier
import Yams

/// `rules: {require: {...}, flag: {...}}` of apps and routes (risk.md §2):
/// unknown keys and names are errors with their line, like the rest of the file.
extension ConfigSectionParser {
    static let maxAppVersionBytes = 64

    /// `routeLevel`: `deviceBits` is allowed (risk.md §6.21).
    func parseRules(_ node: Node, path: String, routeLevel: Bool) -> RulesConfig? {
        guard let view = reader.mapping(node, path: path, section: .rules) else { return nil }
        var rules = RulesConfig()
        if let n = view["require"] { rules.require = parseRuleSet(n, path: view.path("require"), routeLevel: routeLevel) }
        if let n = view["flag"] { rules.flag = parseRuleSet(n, path: view.path("flag"), routeLevel: routeLevel) }
        return rules
    }

    func parseRuleSet(_ node: Node, path: String, routeLevel: Bool) -> RuleSet {
        var set = RuleSet()
        guard let view = reader.mapping(node, path: path, section: .ruleSet) else { return set }
        if let n = view["environments"] { set.environments = ruleEnvironments(n, path: view.path("environments")) }
        if let n = view["launchCategories"] {
            set.launchCategories = launchCategories(n, path: view.path("launchCategories"))
        }
        if let text = reader.string(view, "minAppVersion"), let n = view["minAppVersion"] {
            let parts = text.split(separator: ".", omittingEmptySubsequences: false)
            if text.utf8.count > Self.maxAppVersionBytes || parts.contains(where: \.isEmpty)
                || text.utf8.contains(where: { $0 <= 0x20 || $0 >= 0x7f })
            {
                reader.error(at: n, "\(view.path("minAppVersion")): '\(text)' is not a version (dot-separated, non-empty components, printable ASCII, at most \(Self.maxAppVersionBytes) bytes)")
            } else {
                set.minAppVersion = AppVersion(text)
            }
        }
        if let text = reader.string(view, "keyPolicy"), let n = view["keyPolicy"] {
            if text == KeyPolicy.macosFullSecurity.rawValue {
                set.keyPolicy = .macosFullSecurity
            } else {
                reader.error(at: n, "\(view.path("keyPolicy")): expected macos-full-security (the only policy a rule can require), got '\(text)'")
            }
        }
        set.maxUserKeys = reader.int(view, "maxUserKeys", min: 1, max: Int(ConfigReader.maxNumber))
        set.maxRiskMetric = reader.int(view, "maxRiskMetric", min: 0, max: Int(ConfigReader.maxNumber))
        if let n = view["deviceBits"] {
            if routeLevel {
                set.deviceBits = deviceBits(n, path: view.path("deviceBits"))
            } else {
                reader.error(at: n, "\(view.path("deviceBits")): deviceBits is a route-level rule only (bits exist only where a route queries them)")
            }
        }
        return set
    }

    private func ruleEnvironments(_ node: Node, path: String) -> Set<AppEnvironment>? {
        guard let list = reader.sequence(node, path: path) else { return nil }
        if list.isEmpty { reader.error(at: node, "\(path): must not be empty") }
        var out = Set<AppEnvironment>()
        for (i, item) in list.enumerated() {
            guard let text = reader.scalarString(item, path: "\(path)[\(i)]") else { continue }
            guard let env = AppEnvironment(rawValue: text) else {
                reader.error(at: item, "\(path)[\(i)]: expected production or development, got '\(text)'")
                continue
            }
            out.insert(env)
        }
        return out.isEmpty ? nil : out
    }

    private func launchCategories(_ node: Node, path: String) -> LaunchCategoryRule? {
        guard let list = reader.sequence(node, path: path) else { return nil }
        if list.isEmpty { reader.error(at: node, "\(path): must not be empty") }
        var rule = LaunchCategoryRule(allowed: [], allowsMissing: false)
        for (i, item) in list.enumerated() {
            guard let text = reader.scalarString(item, path: "\(path)[\(i)]") else { continue }
            if text == "missing" {
                rule.allowsMissing = true
            } else if let value = LaunchCategory.values[text] {
                rule.allowed.insert(value)
            } else if !text.isEmpty, text.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }), let value = UInt32(text) {
                rule.allowed.insert(value)
            } else {
                let names = LaunchCategory.names.sorted { $0.key < $1.key }.map(\.value).joined(separator: ", ")
                reader.error(at: item, "\(path)[\(i)]: '\(text)' is not a launch category (\(names), a number up to 4294967295, or missing)")
            }
        }
        return rule.allowed.isEmpty && !rule.allowsMissing ? nil : rule
    }

    private func deviceBits(_ node: Node, path: String) -> DeviceBitsRule? {
        guard let view = reader.mapping(node, path: path, section: .deviceBits) else { return nil }
        let rule = DeviceBitsRule(bit0: reader.bool(view, "bit0"), bit1: reader.bool(view, "bit1"))
        if rule.bit0 == nil && rule.bit1 == nil {
            reader.error(at: node, "\(path): give bit0 and/or bit1 (true or false)")
            return nil
        }
        return rule
    }
}
