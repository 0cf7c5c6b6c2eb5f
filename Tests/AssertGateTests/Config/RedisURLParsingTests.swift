import AssertGateRedis
import Testing

@testable import AssertGateCore

@Suite struct RedisURLParsingTests {
    @Test func urlParsing() throws {
        #expect(try RedisURL(parsing: "redis://127.0.0.1:6380/2") == RedisURL(host: "127.0.0.1", port: 6380, database: 2))
        #expect(try RedisURL(parsing: "redis://u:p%40ss@h") == RedisURL(host: "h", username: "u", password: "p@ss"))
        #expect(try RedisURL(parsing: "redis://:pw@[::1]:7000/") == RedisURL(host: "::1", port: 7000, password: "pw"))
        #expect(try RedisURL(parsing: "redis://u:pw@h").description == "redis://u:***@h:6379/0")
        #expect(throws: ValueParseError.self) { try RedisURL(parsing: "http://h") }
        #expect(throws: ValueParseError.self) { try RedisURL(parsing: "redis://h:0") }
        #expect(throws: ValueParseError.self) { try RedisURL(parsing: "redis://h/x") }
        #expect(throws: ValueParseError.self) { try RedisURL(parsing: "redis://:6379") }
    }
}

/// `store.redis.password`: the AUTH password from a file or the environment,
/// so that it need not sit in the config file inside the URL.
@Suite struct RedisPasswordConfigTests {
    static func yaml(_ redis: String) -> String {
        """
        listeners: [{address: 127.0.0.1:8080}]
        apps: [{appId: ABCDE12345.com.example.app}]
        store: {redis: {\(redis)}}
        upstreams: {api: {endpoints: [http://127.0.0.1:9001]}}
        routes: [{match: {prefix: /}, upstream: api, mode: passthrough}]

        """
    }

    @Test func aPasswordFromTheEnvironmentReachesTheClientAndIsNeverPrinted() throws {
        let c = try ConfigText.load(
            Self.yaml(#"url: "redis://user@127.0.0.1:6380/1", password: {env: REDIS_PW}"#), env: ["REDIS_PW": "s3:cr@t"])
        guard case .redis(let r) = c.store else {
            Issue.record("not redis")
            return
        }
        let client = try RedisClientConfiguration(r)
        #expect(client.url.password == "s3:cr@t")
        #expect(client.url.username == "user")
        #expect(client.url.database == 1)
        let summary = ConfigSummary.render(c)
        #expect(summary.contains("password from env REDIS_PW"))
        #expect(!summary.contains("s3:cr@t"))
        #expect(!c.warnings.contains { $0.contains("store.redis") }, "\(c.warnings)")
    }

    /// Every node of a cluster gets the same credentials.
    @Test func aClusterTakesThePasswordForEverySeed() throws {
        let c = try ConfigText.load(
            Self.yaml(#"cluster: ["redis://127.0.0.1:7000", "redis://127.0.0.1:7001"], password: {env: PW}"#), env: ["PW": "x"])
        guard case .redis(let r) = c.store else {
            Issue.record("not redis")
            return
        }
        #expect(try RedisClientConfiguration(r).url.password == "x")
    }

    @Test func twoPasswordsOrAnInlineOneAreSaidSo() throws {
        let both = ConfigText.errors(Self.yaml(#"url: "redis://:a@127.0.0.1:6379", password: {env: PW}"#), env: ["PW": "b"])
        #expect(both.contains { $0.contains("store.redis.password: the URL carries a password too") }, "\(both)")
        let inURL = try ConfigText.load(Self.yaml(#"url: "redis://:a@127.0.0.1:6379""#))
        #expect(inURL.warnings.contains { $0.contains("store.redis: the URL carries the password inline") }, "\(inURL.warnings)")
        let inline = try ConfigText.load(Self.yaml(#"url: "redis://127.0.0.1:6379", password: hunter2"#))
        #expect(inline.warnings.contains { $0.contains("store.redis.password is inline") }, "\(inline.warnings)")
        let unset = ConfigText.errors(Self.yaml(#"url: "redis://127.0.0.1:6379", password: {env: NOT_SET_ANYWHERE}"#))
        #expect(unset.contains { $0.contains("store.redis.password.env") }, "\(unset)")
    }
}
