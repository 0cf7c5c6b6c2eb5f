/// `redis://[user:password@]host:port/db`, parsed. The password is never
/// included in `description`.
public struct RedisURL: Sendable, Equatable, CustomStringConvertible {
    public enum ParseError: Error, Equatable, Sendable {
        case notRedisScheme
        case missingHost
        case invalidPort
        case invalidDatabase
    }

    public var host: String
    public var port: Int
    public var username: String?
    public var password: String?
    public var database: Int

    public init(host: String, port: Int = 6379, username: String? = nil, password: String? = nil, database: Int = 0) {
        self.host = host
        self.port = port
        self.username = username
        self.password = password
        self.database = database
    }

    public init(parsing url: String) throws(ParseError) {
        guard url.hasPrefix("redis://") else { throw .notRedisScheme }
        var rest = Substring(url.dropFirst("redis://".count))
        var username: String?
        var password: String?
        if let at = rest.lastIndex(of: "@") {
            let userinfo = rest[..<at]
            rest = rest[rest.index(after: at)...]
            if let colon = userinfo.firstIndex(of: ":") {
                let user = userinfo[..<colon]
                username = user.isEmpty ? nil : Self.percentDecoded(user)
                password = Self.percentDecoded(userinfo[userinfo.index(after: colon)...])
            } else if !userinfo.isEmpty {
                // `redis://secret@host` — a lone userinfo is the password, as redis-cli reads it.
                password = Self.percentDecoded(userinfo)
            }
        }
        var database = 0
        if let slash = rest.firstIndex(of: "/") {
            let db = rest[rest.index(after: slash)...]
            rest = rest[..<slash]
            if !db.isEmpty {
                guard let n = Int(db), n >= 0, n < 1 << 16 else { throw .invalidDatabase }
                database = n
            }
        }
        var host = rest
        var port = 6379
        if host.hasPrefix("[") {
            guard let close = host.firstIndex(of: "]") else { throw .missingHost }
            let after = host[host.index(after: close)...]
            host = host[host.index(after: host.startIndex)..<close]
            if after.hasPrefix(":") {
                guard let p = Int(after.dropFirst()), (1...65535).contains(p) else { throw .invalidPort }
                port = p
            } else if !after.isEmpty {
                throw .invalidPort
            }
        } else if let colon = host.lastIndex(of: ":") {
            guard let p = Int(host[host.index(after: colon)...]), (1...65535).contains(p) else { throw .invalidPort }
            port = p
            host = host[..<colon]
        }
        guard !host.isEmpty else { throw .missingHost }
        self.init(host: String(host), port: port, username: username, password: password, database: database)
    }

    public var description: String {
        let auth = password == nil ? "" : "\(username ?? ""):***@"
        let h = host.contains(":") ? "[\(host)]" : host
        return "redis://\(auth)\(h):\(port)/\(database)"
    }

    private static func percentDecoded(_ s: Substring) -> String {
        var out: [UInt8] = []
        out.reserveCapacity(s.utf8.count)
        var it = Array(s.utf8)[...]
        while let c = it.popFirst() {
            if c == UInt8(ascii: "%"), it.count >= 2,
                let v = UInt8(String(decoding: it.prefix(2), as: UTF8.self), radix: 16)
            {
                out.append(v)
                it = it.dropFirst(2)
            } else {
                out.append(c)
            }
        }
        return String(decoding: out, as: UTF8.self)
    }
}
