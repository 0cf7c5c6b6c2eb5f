import AssertGateRedis

/// Reading `redis[s]://[user:password@]host[:port][/db]` from the config
/// file (the syntax of `host:port` and the error type are the config's).
extension RedisURL {
    public init(parsing text: String) throws(ValueParseError) {
        self = try Self.parse(text).get()
    }

    public static func parse(_ text: String) -> Result<RedisURL, ValueParseError> {
        let tls = text.hasPrefix("rediss://")
        guard tls || text.hasPrefix("redis://") else {
            return .failure(
                ValueParseError("'\(redacted(text))' must be a redis://[user:password@]host:port/db URL (rediss:// for TLS)"))
        }
        var rest = Substring(text.dropFirst(tls ? "rediss://".count : "redis://".count))
        var username: String?
        var password: String?
        if let at = rest.lastIndex(of: "@") {
            let userinfo = rest[..<at]
            rest = rest[rest.index(after: at)...]
            let user: Substring
            let pass: Substring?
            if let colon = userinfo.firstIndex(of: ":") {
                user = userinfo[..<colon]
                pass = userinfo[userinfo.index(after: colon)...]
            } else {
                user = userinfo
                pass = nil
            }
            guard let u = percentDecode(user), pass.map({ percentDecode($0) != nil }) ?? true else {
                return .failure(ValueParseError("bad percent-encoding in the user info of the redis URL"))
            }
            username = u.isEmpty ? nil : u
            password = pass.flatMap { percentDecode($0) }
            if password?.isEmpty == true { password = nil }
        }
        var database = 0
        if let slash = rest.firstIndex(of: "/") {
            let db = rest[rest.index(after: slash)...]
            rest = rest[..<slash]
            if !db.isEmpty {
                guard db.utf8.allSatisfy({ $0 >= 48 && $0 <= 57 }), db.count <= 5, let n = Int(db) else {
                    return .failure(ValueParseError("redis database '\(db)' must be a number"))
                }
                database = n
            }
        }
        if rest.contains("?") || rest.contains("#") {
            return .failure(ValueParseError("redis URL must not have a query or fragment"))
        }
        let hostPortText: String
        if rest.hasPrefix("[") {
            hostPortText = rest.hasSuffix("]") ? "\(rest):6379" : String(rest)
        } else {
            hostPortText = rest.contains(":") ? String(rest) : "\(rest):6379"
        }
        switch ConfigSyntax.hostPort(hostPortText) {
        case .success(let hp):
            guard hp.port > 0 else { return .failure(ValueParseError("redis port must not be 0")) }
            return .success(
                RedisURL(host: hp.host, port: hp.port, username: username, password: password, database: database, tls: tls))
        case .failure(let e):
            return .failure(ValueParseError("redis URL: \(e.message)"))
        }
    }

    /// The URL with any password replaced, for messages.
    static func redacted(_ text: String) -> String {
        guard let at = text.lastIndex(of: "@") else { return text }
        // A mistyped scheme (`redis:/:pw@host`) still hides what precedes the host.
        guard let scheme = text.range(of: "://"), at > scheme.upperBound else { return "***" + String(text[at...]) }
        return String(text[..<scheme.upperBound]) + "***" + String(text[at...])
    }

    static func percentDecode(_ text: Substring) -> String? {
        var out = [UInt8]()
        var it = Array(text.utf8)[...]
        while let b = it.popFirst() {
            if b == UInt8(ascii: "%") {
                guard it.count >= 2, let hi = hexValue(it[it.startIndex]), let lo = hexValue(it[it.startIndex + 1]) else {
                    return nil
                }
                out.append(hi << 4 | lo)
                it = it.dropFirst(2)
            } else {
                out.append(b)
            }
        }
        return String(validating: out, as: UTF8.self)
    }

    static func hexValue(_ b: UInt8) -> UInt8? {
        switch b {
        case 48...57: return b - 48
        case 65...70: return b - 55
        case 97...102: return b - 87
        default: return nil
        }
    }
}

extension RedisConfig {
    /// The parsed `url`, or the first cluster seed (validated at load, so
    /// non-nil for a loaded config).
    public var endpoint: RedisURL? {
        if case .success(let url) = RedisURL.parse(cluster.first ?? url) { return url }
        return nil
    }
}

extension RedisConfig {
    /// Lets tests and callers print a URL without its password.
    public var redactedURL: String { RedisURL.redacted(url) }
}

extension AppEnvironment: Comparable {
    public static func < (lhs: AppEnvironment, rhs: AppEnvironment) -> Bool { lhs.rawValue < rhs.rawValue }
}

extension StoreErrorAction: CaseIterable {
    public static var allCases: [StoreErrorAction] { [.reject, .forward] }
}

extension PolicyMode: CaseIterable {
    public static var allCases: [PolicyMode] { [.enforce, .monitor, .passthrough] }
}

extension LogFormat: CaseIterable {
    public static var allCases: [LogFormat] { [.json, .text] }
}
