/// A bundle version compared as risk.md §6.2 fixes: split on `.`; a
/// component of ASCII digits only is a number (`03` = 3), any other is text;
/// numbers compare by value, text by bytes, every number below every text;
/// missing trailing components are 0 (`2` = `2.0`).
public struct AppVersion: Sendable, Hashable, Comparable, CustomStringConvertible {
    enum Component: Sendable, Hashable, Comparable {
        /// Digits with leading zeros dropped ("" = 0), so any length compares exactly.
        case number(String)
        case text([UInt8])

        static func < (a: Component, b: Component) -> Bool {
            switch (a, b) {
            case (.number(let x), .number(let y)):
                return x.utf8.count != y.utf8.count ? x.utf8.count < y.utf8.count : x < y
            case (.number, .text): return true
            case (.text, .number): return false
            case (.text(let x), .text(let y)): return x.lexicographicallyPrecedes(y)
            }
        }
    }

    public let text: String
    let components: [Component]

    public init(_ text: String) {
        self.text = text
        self.components = text.split(separator: ".", omittingEmptySubsequences: false).map { part in
            if !part.isEmpty, part.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) {
                return .number(String(part.drop { $0 == "0" }))
            }
            return .text(Array(part.utf8))
        }
    }

    public var description: String { text }

    public static func < (a: AppVersion, b: AppVersion) -> Bool {
        let count = max(a.components.count, b.components.count)
        for i in 0..<count {
            let x = i < a.components.count ? a.components[i] : .number("")
            let y = i < b.components.count ? b.components[i] : .number("")
            if x != y { return x < y }
        }
        return false
    }

    public static func == (a: AppVersion, b: AppVersion) -> Bool { !(a < b) && !(b < a) }

    public func hash(into hasher: inout Hasher) {
        // Trailing zero components do not change the value (`2` = `2.0`).
        var trimmed = components
        while trimmed.last == .number("") { trimmed.removeLast() }
        hasher.combine(trimmed)
    }
}
