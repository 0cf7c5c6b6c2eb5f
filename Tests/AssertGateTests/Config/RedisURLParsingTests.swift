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
