import NIOCore
import Testing
@testable import AssertGateCore

@Suite struct ValueParserTests {
    @Test(arguments: [
        ("250ms", Int64(250_000_000)), ("30s", 30_000_000_000), ("5m", 300_000_000_000),
        ("24h", 86_400_000_000_000), ("1h30m", 5_400_000_000_000), ("0s", 0),
    ])
    func durations(text: String, nanos: Int64) throws {
        #expect(try DurationParser.parse(text).nanoseconds == nanos)
        #expect(try DurationParser.parse(DurationParser.format(.nanoseconds(nanos))).nanoseconds == nanos)
    }

    @Test(arguments: ["", "30", "s", "1.5s", "-1s", "1d", "10 s", "99999999999999999999h", "3000000h"])
    func badDurations(text: String) {
        #expect(throws: ValueParseError.self) { try DurationParser.parse(text) }
    }

    @Test func durationFormat() {
        #expect(DurationParser.format(.milliseconds(250)) == "250ms")
        #expect(DurationParser.format(.seconds(90)) == "1m30s")
        #expect(DurationParser.format(.hours(24)) == "24h")
    }

    @Test(arguments: [
        ("64KiB", 65_536), ("8MiB", 8_388_608), ("1GiB", 1 << 30), ("4096", 4096), ("10B", 10), ("0", 0),
    ])
    func sizes(text: String, bytes: Int) throws {
        #expect(try SizeParser.parse(text) == bytes)
    }

    @Test(arguments: ["", "KiB", "1KB", "1 MiB", "-5", "1.5MiB", "99999999999999999999", "9999999999999GiB"])
    func badSizes(text: String) {
        #expect(throws: ValueParseError.self) { try SizeParser.parse(text) }
    }

    @Test func sizeFormat() {
        #expect(SizeParser.format(1 << 20) == "1MiB")
        #expect(SizeParser.format(1536) == "1536B")
    }

    @Test func requestIds() {
        #expect(RequestId.isValid("abc-DEF_1.2~:x"))
        #expect(!RequestId.isValid(""))
        #expect(!RequestId.isValid(String(repeating: "a", count: 129)))
        #expect(RequestId.isValid(String(repeating: "a", count: 128)))
        #expect(!RequestId.isValid("a b"))
        #expect(!RequestId.isValid("a/b"))
        #expect(!RequestId.isValid("é"))
        #expect(RequestId.resolve("client-id") == "client-id")
        let fresh = RequestId.resolve("bad id")
        #expect(fresh.count == 36 && RequestId.isValid(fresh))
        #expect(Array(fresh)[14] == "4")
        #expect(RequestId.generate() != RequestId.generate())
    }

    @Test func constantTimeEquals() {
        #expect(ConstantTime.equals("secret-token", "secret-token"))
        #expect(!ConstantTime.equals("secret-tokeN", "secret-token"))
        #expect(!ConstantTime.equals("secret-token-longer", "secret-token"))
        #expect(!ConstantTime.equals("secret", "secret-token"))
        #expect(!ConstantTime.equals("", "secret-token"))
        #expect(!ConstantTime.equals("", ""))
    }

    @Test func rfc3339() {
        #expect(RFC3339.format(unixSeconds: 0) == "1970-01-01T00:00:00Z")
        #expect(RFC3339.format(unixSeconds: 1_795_299_476) == "2026-11-21T22:17:56Z")
        #expect(RFC3339.format(unixNanoseconds: 951_782_400_123_000_000, milliseconds: true) == "2000-02-29T00:00:00.123Z")
    }

    @Test func jsonEscaping() {
        #expect(JSONText.quoted("a\"b\\c\n\u{01}") == #""a\"b\\c\n\u0001""#)
    }
}
