import NIOCore

/// Why a duration or size string was refused; the message is shown to operators.
public struct ValueParseError: Error, Sendable, Equatable, CustomStringConvertible {
    public var message: String
    public init(_ message: String) { self.message = message }
    public var description: String { message }
}

/// Durations as written in the config: one or more `<integer><unit>` groups,
/// units `ms`, `s`, `m`, `h` (`250ms`, `30s`, `1h30m`). A bare number is refused
/// because `30` could mean seconds or milliseconds.
public enum DurationParser {
    public static func parse(_ text: String) throws(ValueParseError) -> TimeAmount {
        let bytes = Array(text.utf8)
        guard !bytes.isEmpty, bytes.count <= 64 else { throw ValueParseError("invalid duration '\(text)'") }
        var index = 0
        var totalNanos: Int64 = 0
        while index < bytes.count {
            var value: Int64 = 0
            let digitsStart = index
            while index < bytes.count, bytes[index] >= UInt8(ascii: "0"), bytes[index] <= UInt8(ascii: "9") {
                let (m, o1) = value.multipliedReportingOverflow(by: 10)
                let (a, o2) = m.addingReportingOverflow(Int64(bytes[index] - UInt8(ascii: "0")))
                guard !o1, !o2 else { throw ValueParseError("duration '\(text)' is too large") }
                value = a
                index += 1
            }
            guard index > digitsStart else {
                throw ValueParseError("invalid duration '\(text)' (expected e.g. 250ms, 30s, 5m, 24h)")
            }
            let unitStart = index
            while index < bytes.count, !(bytes[index] >= UInt8(ascii: "0") && bytes[index] <= UInt8(ascii: "9")) {
                index += 1
            }
            let unit = String(decoding: bytes[unitStart..<index], as: UTF8.self)
            let scale: Int64
            switch unit {
            case "ms": scale = 1_000_000
            case "s": scale = 1_000_000_000
            case "m": scale = 60_000_000_000
            case "h": scale = 3_600_000_000_000
            case "":
                throw ValueParseError("duration '\(text)' needs a unit (ms, s, m, h)")
            default:
                throw ValueParseError("unknown duration unit '\(unit)' in '\(text)' (use ms, s, m, h)")
            }
            let (n, o1) = value.multipliedReportingOverflow(by: scale)
            let (t, o2) = totalNanos.addingReportingOverflow(n)
            guard !o1, !o2 else { throw ValueParseError("duration '\(text)' is too large") }
            totalNanos = t
        }
        return .nanoseconds(totalNanos)
    }

    /// The shortest exact rendering in the config syntax (`1h30m`, `250ms`, `0s`).
    public static func format(_ amount: TimeAmount) -> String {
        var nanos = amount.nanoseconds
        if nanos == 0 { return "0s" }
        let sign = nanos < 0 ? "-" : ""
        nanos = nanos.magnitude > Int64.max.magnitude ? Int64.max : abs(nanos)
        if nanos % 1_000_000 != 0 { return "\(sign)\(nanos)ns" }
        var out = sign
        let units: [(Int64, String)] = [(3_600_000_000_000, "h"), (60_000_000_000, "m"), (1_000_000_000, "s"), (1_000_000, "ms")]
        for (scale, name) in units where nanos >= scale {
            out += "\(nanos / scale)\(name)"
            nanos %= scale
        }
        return out
    }
}

/// Sizes: a plain integer (bytes) or `<integer><unit>` with `B`, `KiB`, `MiB`, `GiB`.
/// Decimal units (`KB`, `MB`) are refused rather than guessed.
public enum SizeParser {
    public static func parse(_ text: String) throws(ValueParseError) -> Int {
        let bytes = Array(text.utf8)
        guard !bytes.isEmpty, bytes.count <= 32 else { throw ValueParseError("invalid size '\(text)'") }
        var index = 0
        var value = 0
        while index < bytes.count, bytes[index] >= UInt8(ascii: "0"), bytes[index] <= UInt8(ascii: "9") {
            let (m, o1) = value.multipliedReportingOverflow(by: 10)
            let (a, o2) = m.addingReportingOverflow(Int(bytes[index] - UInt8(ascii: "0")))
            guard !o1, !o2 else { throw ValueParseError("size '\(text)' is too large") }
            value = a
            index += 1
        }
        guard index > 0 else { throw ValueParseError("invalid size '\(text)' (expected e.g. 64KiB, 8MiB or a number of bytes)") }
        let unit = String(decoding: bytes[index...], as: UTF8.self)
        let scale: Int
        switch unit {
        case "", "B": scale = 1
        case "KiB": scale = 1 << 10
        case "MiB": scale = 1 << 20
        case "GiB": scale = 1 << 30
        default: throw ValueParseError("unknown size unit '\(unit)' in '\(text)' (use B, KiB, MiB, GiB)")
        }
        let (result, overflow) = value.multipliedReportingOverflow(by: scale)
        guard !overflow else { throw ValueParseError("size '\(text)' is too large") }
        return result
    }

    public static func format(_ size: Int) -> String {
        for (scale, name) in [(1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")] where size >= scale && size % scale == 0 {
            return "\(size / scale)\(name)"
        }
        return "\(size)B"
    }
}
