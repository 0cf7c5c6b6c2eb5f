/// Minimal JSON writing for the few fixed-shape bodies the gateway emits
/// (problem+json, admin records, log lines) without a Foundation encoder.
public enum JSONText {
    public static func quoted(_ value: String) -> String {
        var out = "\""
        append(value, to: &out)
        out += "\""
        return out
    }

    public static func append(_ value: String, to out: inout String) {
        for scalar in value.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case _ where isControl(scalar):
                let hex = String(scalar.value, radix: 16)
                out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default:
                out.unicodeScalars.append(scalar)
            }
        }
    }

    /// Written as `\uXXXX`, never raw: C0 and C1 controls and DEL (a log
    /// viewer may take U+0085 NEL as a line break, or U+009B CSI as a
    /// terminal command), the line and paragraph separators, and the bidi
    /// controls that reorder what a reader sees. A client chooses request
    /// paths and header values that reach the log.
    public static func isControl(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.value {
        case 0..<0x20, 0x7F...0x9F, 0x200E, 0x200F, 0x2028...0x202E, 0x2066...0x2069: return true
        default: return false
        }
    }

    /// Builds `{"k":v,...}` from already-encoded values, keeping the order given.
    public static func object(_ members: [(String, String)]) -> String {
        var out = "{"
        for (i, (key, encodedValue)) in members.enumerated() {
            if i > 0 { out += "," }
            out += quoted(key)
            out += ":"
            out += encodedValue
        }
        out += "}"
        return out
    }
}

/// RFC 3339 timestamps in UTC without Foundation date formatters.
public enum RFC3339 {
    /// `2026-11-21T22:17:56Z`, or with milliseconds when `milliseconds` is set.
    public static func format(unixNanoseconds: Int64, milliseconds: Bool = false) -> String {
        let secs = unixNanoseconds >= 0 ? unixNanoseconds / 1_000_000_000 : (unixNanoseconds - 999_999_999) / 1_000_000_000
        let millis = Int((unixNanoseconds - secs * 1_000_000_000) / 1_000_000)
        let days = secs >= 0 ? secs / 86_400 : (secs - 86_399) / 86_400
        let secOfDay = Int(secs - days * 86_400)
        // Civil-from-days (proleptic Gregorian), valid for the whole Int64 day range we use.
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let doe = z - era * 146_097
        let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365
        var year = yoe + era * 400
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let day = doy - (153 * mp + 2) / 5 + 1
        let month = mp < 10 ? mp + 3 : mp - 9
        if month <= 2 { year += 1 }
        func pad(_ v: Int64, _ width: Int) -> String {
            let s = String(v)
            return s.count >= width ? s : String(repeating: "0", count: width - s.count) + s
        }
        var out = "\(pad(year, 4))-\(pad(month, 2))-\(pad(day, 2))T"
        out += "\(pad(Int64(secOfDay / 3600), 2)):\(pad(Int64(secOfDay / 60 % 60), 2)):\(pad(Int64(secOfDay % 60), 2))"
        if milliseconds { out += "." + pad(Int64(millis), 3) }
        return out + "Z"
    }

    public static func format(unixSeconds: Int64) -> String {
        format(unixNanoseconds: unixSeconds &* 1_000_000_000)
    }
}
