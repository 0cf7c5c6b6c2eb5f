/// An RFC 3339 timestamp as used in receipts (`2020-11-27T22:41:40.46Z`,
/// 0–9 fraction digits), kept with its original text.
public struct RFC3339Time: Sendable, Hashable, Comparable, CustomStringConvertible {
    /// Seconds since the Unix epoch (UTC).
    public let unixSeconds: Int64
    public let nanoseconds: Int32
    public let text: String

    public var description: String { text }

    public static func < (a: RFC3339Time, b: RFC3339Time) -> Bool {
        (a.unixSeconds, a.nanoseconds) < (b.unixSeconds, b.nanoseconds)
    }

    /// Strict parse of `YYYY-MM-DDTHH:MM:SS[.fraction](Z|±HH:MM)`; `t` and
    /// `z` are accepted as RFC 3339 allows.
    public init?(_ text: String) {
        let c = Array(text.utf8)
        guard c.count >= 20, c.count <= 40 else { return nil }
        func digits(_ start: Int, _ count: Int) -> Int? {
            guard start + count <= c.count else { return nil }
            var value = 0
            for i in start..<start + count {
                guard c[i] >= 0x30, c[i] <= 0x39 else { return nil }
                value = value * 10 + Int(c[i] - 0x30)
            }
            return value
        }
        guard let year = digits(0, 4), c[4] == UInt8(ascii: "-"),
            let month = digits(5, 2), c[7] == UInt8(ascii: "-"),
            let day = digits(8, 2), c[10] == UInt8(ascii: "T") || c[10] == UInt8(ascii: "t"),
            let hour = digits(11, 2), c[13] == UInt8(ascii: ":"),
            let minute = digits(14, 2), c[16] == UInt8(ascii: ":"),
            let second = digits(17, 2)
        else { return nil }
        guard (1...12).contains(month), day >= 1, day <= Self.daysIn(month: month, year: year),
            hour <= 23, minute <= 59, second <= 60
        else { return nil }
        var index = 19
        var nanos = 0
        if index < c.count, c[index] == UInt8(ascii: ".") {
            index += 1
            var count = 0
            while index < c.count, c[index] >= 0x30, c[index] <= 0x39 {
                guard count < 9 else { return nil }
                nanos = nanos * 10 + Int(c[index] - 0x30)
                count += 1
                index += 1
            }
            guard count >= 1 else { return nil }
            for _ in count..<9 { nanos *= 10 }
        }
        guard index < c.count else { return nil }
        var offsetSeconds = 0
        if c[index] == UInt8(ascii: "Z") || c[index] == UInt8(ascii: "z") {
            index += 1
        } else if c[index] == UInt8(ascii: "+") || c[index] == UInt8(ascii: "-") {
            let sign = c[index] == UInt8(ascii: "+") ? 1 : -1
            guard let oh = digits(index + 1, 2), index + 3 < c.count, c[index + 3] == UInt8(ascii: ":"),
                let om = digits(index + 4, 2), oh <= 23, om <= 59
            else { return nil }
            offsetSeconds = sign * (oh * 3600 + om * 60)
            index += 6
        } else {
            return nil
        }
        guard index == c.count else { return nil }
        let days = Self.daysFromCivil(year: year, month: month, day: day)
        let seconds = Int64(days) * 86_400 + Int64(hour * 3600 + minute * 60 + second) - Int64(offsetSeconds)
        self.unixSeconds = seconds
        self.nanoseconds = Int32(nanos)
        self.text = text
    }

    static func daysIn(month: Int, year: Int) -> Int {
        switch month {
        case 2: return (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 ? 29 : 28
        case 4, 6, 9, 11: return 30
        default: return 31
        }
    }

    /// Days since 1970-01-01 in the proleptic Gregorian calendar.
    static func daysFromCivil(year: Int, month: Int, day: Int) -> Int {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yearOfEra = y - era * 400
        let m = month > 2 ? month - 3 : month + 9
        let dayOfYear = (153 * m + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }
}
