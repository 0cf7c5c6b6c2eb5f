/// The admin view of a key (protocol.md §7), without secrets or the receipt.
public struct KeyRecord: Sendable, Equatable {
    public var keyId: [UInt8]
    public var appId: String
    public var environment: AppEnvironment
    public var counter: UInt32
    public var publicKey: [UInt8]
    public var userId: String?
    /// Unix seconds.
    public var createdAt: Int64
    public var revoked: Bool
    public var riskMetric: Int?
    /// Unix seconds.
    public var riskMetricAt: Int64?

    public init(
        keyId: [UInt8], appId: String, environment: AppEnvironment, counter: UInt32, publicKey: [UInt8],
        userId: String?, createdAt: Int64, revoked: Bool, riskMetric: Int?, riskMetricAt: Int64?
    ) {
        self.keyId = keyId
        self.appId = appId
        self.environment = environment
        self.counter = counter
        self.publicKey = publicKey
        self.userId = userId
        self.createdAt = createdAt
        self.revoked = revoked
        self.riskMetric = riskMetric
        self.riskMetricAt = riskMetricAt
    }

    /// `{"keyId","appId","environment","counter","publicKey","userId"?,"createdAt",
    /// "revoked","riskMetric"?,"riskMetricAt"?}`: ids and key as b64url, times as
    /// RFC 3339 UTC, absent optionals left out.
    public var json: String {
        var out = "{"
        out += "\"keyId\":\"\(StoreBase64URL.encode(keyId))\""
        out += ",\"appId\":\(JSONText.quoted(appId))"
        out += ",\"environment\":\"\(environment.rawValue)\""
        out += ",\"counter\":\(counter)"
        out += ",\"publicKey\":\"\(StoreBase64URL.encode(publicKey))\""
        if let userId { out += ",\"userId\":\(JSONText.quoted(userId))" }
        out += ",\"createdAt\":\"\(RFC3339.format(unixSeconds: createdAt))\""
        out += ",\"revoked\":\(revoked)"
        if let riskMetric { out += ",\"riskMetric\":\(riskMetric)" }
        if let riskMetricAt { out += ",\"riskMetricAt\":\"\(RFC3339.format(unixSeconds: riskMetricAt))\"" }
        out += "}"
        return out
    }
}

enum JSONText {
    static func quoted(_ s: String) -> String {
        var out = "\""
        for scalar in s.unicodeScalars {
            switch scalar {
            case "\"": out += "\\\""
            case "\\": out += "\\\\"
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            default:
                if scalar.value < 0x20 || scalar.value == 0x7F || scalar.value == 0x2028 || scalar.value == 0x2029 {
                    let hex = String(scalar.value, radix: 16)
                    out += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
                } else {
                    out.unicodeScalars.append(scalar)
                }
            }
        }
        out += "\""
        return out
    }
}

enum RFC3339 {
    /// `YYYY-MM-DDTHH:MM:SSZ` (proleptic Gregorian, UTC).
    static func format(unixSeconds: Int64) -> String {
        let days = unixSeconds >= 0 ? unixSeconds / 86400 : (unixSeconds - 86399) / 86400
        let secs = unixSeconds - days * 86400
        // Civil date from days since 1970-01-01 (H. Hinnant's algorithm).
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let doe = z - era * 146_097
        let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365
        let doy = doe - (365 * yoe + yoe / 4 - yoe / 100)
        let mp = (5 * doy + 2) / 153
        let d = doy - (153 * mp + 2) / 5 + 1
        let m = mp < 10 ? mp + 3 : mp - 9
        let y = yoe + era * 400 + (m <= 2 ? 1 : 0)
        func two(_ v: Int64) -> String { v < 10 ? "0\(v)" : "\(v)" }
        let year = y >= 0 && y < 10000 ? String(repeating: "0", count: 4 - String(y).count) + String(y) : String(y)
        return "\(year)-\(two(m))-\(two(d))T\(two(secs / 3600)):\(two(secs / 60 % 60)):\(two(secs % 60))Z"
    }
}
