import NIOCore
import Yams

/// Walks the composed YAML tree with key paths and line numbers, collecting
/// every problem instead of stopping at the first. Each typed getter reports
/// its own error and returns nil, so callers fall back to defaults and keep
/// validating the rest of the file.
final class ConfigReader {
    let filename: String
    private(set) var diagnostics: [ConfigDiagnostic] = []

    init(filename: String) {
        self.filename = filename
    }

    func error(_ line: Int?, _ message: String) {
        diagnostics.append(ConfigDiagnostic(file: filename, line: line, message: message))
    }

    func error(at node: Node?, _ message: String) {
        error(node?.mark?.line, message)
    }

    /// A mapping with its known keys checked; unknown ones are reported with their line.
    struct MappingView {
        let node: Node
        let path: String
        let entries: [String: (key: Node, value: Node)]

        subscript(key: String) -> Node? {
            guard let value = entries[key]?.value, !value.isNull else { return nil }
            return value
        }

        func has(_ key: String) -> Bool { self[key] != nil }

        func path(_ key: String) -> String { path.isEmpty ? key : "\(path).\(key)" }

        var line: Int? { node.mark?.line }
    }

    func describe(_ path: String) -> String { path.isEmpty ? "at top level" : "in \(path)" }

    func mapping(_ node: Node, path: String, allowed: Set<String>) -> MappingView? {
        guard case .mapping(let mapping) = node else {
            error(at: node, "\(path.isEmpty ? "the file" : path): expected a mapping, got \(shape(node))")
            return nil
        }
        var entries: [String: (key: Node, value: Node)] = [:]
        for (key, value) in mapping {
            guard case .scalar(let scalar) = key else {
                error(at: key, "\(path.isEmpty ? "top level" : path): keys must be plain strings")
                continue
            }
            let name = scalar.string
            guard allowed.contains(name) else {
                let hint = KeySuggestion.closest(to: name, in: allowed).map { "; did you mean '\($0)'?" } ?? ""
                error(at: key, "unknown key '\(name)' \(describe(path))\(hint)")
                continue
            }
            entries[name] = (key, value)
        }
        return MappingView(node: node, path: path, entries: entries)
    }

    func sequence(_ node: Node, path: String) -> [Node]? {
        guard case .sequence(let seq) = node else {
            error(at: node, "\(path): expected a list, got \(shape(node))")
            return nil
        }
        return Array(seq)
    }

    /// What stands where a mapping or list belongs, without its value: a
    /// section written as one value is often a secret or a URL with a
    /// password (`admin: s3cret`, `store: {redis: "redis://:pw@…"}`), and
    /// these messages reach the log and `POST /reload`'s answer.
    func shape(_ node: Node) -> String {
        if case .scalar = node, !node.isNull { return "a single value" }
        return kind(node)
    }

    func kind(_ node: Node) -> String {
        switch node {
        case .mapping: return "a mapping"
        case .sequence: return "a list"
        case .alias: return "an alias"
        case .scalar(let s):
            if node.isNull { return "nothing (null)" }
            return "'\(s.string)'"
        }
    }

    // MARK: Typed values. Missing keys yield nil; `required` reports them.

    func required(_ view: MappingView, _ key: String) -> Node? {
        guard let node = view[key] else {
            let where_ = view.path.isEmpty ? "at top level" : "in \(view.path)"
            error(view.entries[key]?.key.mark?.line ?? view.line, "missing required key '\(key)' \(where_)")
            return nil
        }
        return node
    }

    func scalarString(_ node: Node, path: String, what: String = "a string") -> String? {
        guard case .scalar(let scalar) = node, !node.isNull else {
            error(at: node, "\(path): expected \(what), got \(kind(node))")
            return nil
        }
        return scalar.string
    }

    func string(_ view: MappingView, _ key: String, required isRequired: Bool = false) -> String? {
        guard let node = isRequired ? required(view, key) : view[key] else { return nil }
        guard let value = scalarString(node, path: view.path(key)) else { return nil }
        if value.isEmpty {
            error(at: node, "\(view.path(key)): must not be empty")
            return nil
        }
        return value
    }

    func bool(_ view: MappingView, _ key: String) -> Bool? {
        guard let node = view[key] else { return nil }
        guard case .scalar(let scalar) = node, scalar.style == .plain || scalar.style == .any else {
            error(at: node, "\(view.path(key)): expected true or false, got \(kind(node))")
            return nil
        }
        switch scalar.string {
        case "true": return true
        case "false": return false
        default:
            error(at: node, "\(view.path(key)): expected true or false, got '\(scalar.string)'")
            return nil
        }
    }

    func int(_ view: MappingView, _ key: String, min: Int? = nil, max: Int? = nil) -> Int? {
        guard let node = view[key] else { return nil }
        return int(node, path: view.path(key), min: min, max: max)
    }

    func int(_ node: Node, path: String, min: Int? = nil, max: Int? = nil) -> Int? {
        guard case .scalar(let scalar) = node, let value = Int(scalar.string) else {
            error(at: node, "\(path): expected an integer, got \(kind(node))")
            return nil
        }
        return checkRange(value, node: node, path: path, min: min, max: max)
    }

    func number(_ view: MappingView, _ key: String, greaterThanZero: Bool, min: Double? = nil) -> Double? {
        guard let node = view[key] else { return nil }
        guard case .scalar(let scalar) = node, let value = Double(scalar.string), value.isFinite else {
            error(at: node, "\(view.path(key)): expected a number, got \(kind(node))")
            return nil
        }
        if greaterThanZero && value <= 0 {
            error(at: node, "\(view.path(key)): must be greater than 0, got \(scalar.string)")
            return nil
        }
        if let min, value < min {
            error(at: node, "\(view.path(key)): must be at least \(min), got \(scalar.string)")
            return nil
        }
        // Rates and budgets become integers at run time (a token bucket's
        // burst, nghttp2's reset limit): a value past this traps converting.
        if value > Self.maxNumber {
            error(at: node, "\(view.path(key)): must be at most \(Int(Self.maxNumber)), got \(scalar.string)")
            return nil
        }
        return value
    }

    static let maxNumber: Double = 1_000_000_000
    /// The slowest rate (about one a day): slower ones are mistakes, and a
    /// token's wait must stay a whole number of milliseconds that Redis and
    /// `Retry-After` can carry.
    static let minRate: Double = 0.00001
    /// Longer waits are mistakes, and sums of them (an idle timeout past the
    /// longest wait) must not overflow.
    static let maxDuration: TimeAmount = .hours(24 * 30)

    private func checkRange(_ value: Int, node: Node, path: String, min: Int?, max: Int?) -> Int? {
        if let min, value < min {
            error(at: node, "\(path): must be at least \(min), got \(value)")
            return nil
        }
        if let max, value > max {
            error(at: node, "\(path): must be at most \(max), got \(value)")
            return nil
        }
        return value
    }

    func duration(_ view: MappingView, _ key: String, allowZero: Bool = false) -> TimeAmount? {
        guard let node = view[key] else { return nil }
        guard let text = scalarString(node, path: view.path(key), what: "a duration") else { return nil }
        do {
            let amount = try DurationParser.parse(text)
            if !allowZero && amount.nanoseconds == 0 {
                error(at: node, "\(view.path(key)): must be greater than 0")
                return nil
            }
            if amount > Self.maxDuration {
                error(at: node, "\(view.path(key)): must be at most 30 days, got '\(text)'")
                return nil
            }
            return amount
        } catch {
            self.error(at: node, "\(view.path(key)): \(error.message)")
            return nil
        }
    }

    func size(_ view: MappingView, _ key: String, min: Int = 0, max: Int? = nil) -> Int? {
        guard let node = view[key] else { return nil }
        guard let text = scalarString(node, path: view.path(key), what: "a size") else { return nil }
        do {
            let value = try SizeParser.parse(text)
            if value < min {
                error(at: node, "\(view.path(key)): must be at least \(SizeParser.format(min)), got '\(text)'")
                return nil
            }
            if let max, value > max {
                error(at: node, "\(view.path(key)): must be at most \(SizeParser.format(max)), got '\(text)'")
                return nil
            }
            return value
        } catch {
            self.error(at: node, "\(view.path(key)): \(error.message)")
            return nil
        }
    }

    func oneOf<T: RawRepresentable>(_ view: MappingView, _ key: String, _ type: T.Type, required isRequired: Bool = false) -> T?
    where T.RawValue == String, T: CaseIterable {
        guard let node = isRequired ? required(view, key) : view[key] else { return nil }
        guard let text = scalarString(node, path: view.path(key)) else { return nil }
        guard let value = T(rawValue: text) else {
            let options = T.allCases.map(\.rawValue).joined(separator: ", ")
            error(at: node, "\(view.path(key)): expected one of \(options), got '\(text)'")
            return nil
        }
        return value
    }
}

extension Node {
    /// YAML null: an empty plain value, `~` or `null`; a quoted `""` is a string.
    var isNull: Bool {
        guard case .scalar(let scalar) = self, scalar.style == .plain || scalar.style == .any else { return false }
        switch scalar.string {
        case "", "~", "null", "Null", "NULL": return true
        default: return false
        }
    }
}
