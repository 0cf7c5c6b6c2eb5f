import Testing
import Verifier

@Suite struct EncodingTests {
    @Test func base64AcceptsBothAlphabetsWithAndWithoutPadding() throws {
        let bytes: [UInt8] = [0xfb, 0xff, 0xbf, 0x01]
        #expect(Base64.encode(bytes) == "+/+/AQ==")
        #expect(try Base64.decode("+/+/AQ==") == bytes)
        #expect(try Base64.decode("+/+/AQ") == bytes)
        #expect(try Base64.decode("-_-_AQ==") == bytes)
        #expect(try Base64.decode("-_-_AQ") == bytes)
        #expect(try Base64.decode("") == [])
    }

    @Test func base64RejectsEverythingElse() {
        #expect(throws: Base64.DecodeError.mixedAlphabets) { try Base64.decode("+_AA") }
        #expect(throws: Base64.DecodeError.invalidCharacter(offset: 2)) { try Base64.decode("AA A") }
        #expect(throws: Base64.DecodeError.invalidPadding) { try Base64.decode("AQ=") }
        #expect(throws: Base64.DecodeError.invalidPadding) { try Base64.decode("A===") }
        #expect(throws: Base64.DecodeError.invalidLength) { try Base64.decode("AAAAA") }
        #expect(throws: Base64.DecodeError.nonZeroPadBits) { try Base64.decode("AR==") }
        #expect(throws: Base64.DecodeError.invalidCharacter(offset: 1)) { try Base64.decode("A=AA") }
        #expect(throws: Base64.DecodeError.tooLong(limit: 4)) { try Base64.decode("AAAAAAAA", maxLength: 4) }
    }

    @Test func hexRoundTripAndStrictness() {
        #expect(Hex.encode([0x00, 0xab, 0xff]) == "00abff")
        #expect(Hex.decode("00ABff") == [0x00, 0xab, 0xff])
        #expect(Hex.decode("abc") == nil)
        #expect(Hex.decode("zz") == nil)
    }

    @Test func rfc3339WithZeroToNineFractionDigits() throws {
        let t = try #require(RFC3339Time("2020-11-27T22:41:40.46Z"))
        #expect(t.unixSeconds == 1_606_516_900)
        #expect(t.nanoseconds == 460_000_000)
        #expect(RFC3339Time("2020-11-27T22:41:40Z")?.nanoseconds == 0)
        #expect(RFC3339Time("2020-11-27T22:41:40.123456789Z")?.nanoseconds == 123_456_789)
        #expect(RFC3339Time("2020-11-27T23:41:40+01:00")?.unixSeconds == 1_606_516_900)
        #expect(RFC3339Time("1970-01-01T00:00:00Z")?.unixSeconds == 0)
        #expect(RFC3339Time("2024-02-29T00:00:00Z")?.unixSeconds == 1_709_164_800)
        for bad in [
            "2020-11-27T22:41:40.1234567890Z", "2020-11-27T22:41:40.Z", "2020-11-27 22:41:40Z", "2020-11-27T22:41:40",
            "2021-02-29T00:00:00Z", "2020-13-01T00:00:00Z", "2020-11-27T24:00:00Z", "2020-11-27T22:41:40Zjunk",
        ] {
            #expect(RFC3339Time(bad) == nil, "\(bad)")
        }
    }

    @Test func sha256KnownAnswer() {
        #expect(Hex.encode(SHA256.hash(Array("abc".utf8))) == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
        #expect(Base64.encode(SHA256.hash(Array("wurzelpfropf".utf8))) == "i+ZcylFa0JfJU5Z9GNY12G3XihQu09B3UmvtEca+xns=")
    }
}

@Suite struct Base64URLEncodingTests {
    @Test(arguments: [0, 1, 2, 3, 31, 32, 33])
    func encodeURLIsUnpaddedAndRoundTrips(count: Int) throws {
        let bytes = (0..<count).map { UInt8(truncatingIfNeeded: $0 &* 37 &+ 250) }
        let url = Base64.encodeURL(bytes)
        #expect(!url.contains("=") && !url.contains("+") && !url.contains("/"))
        #expect(url.utf8.count == (count * 4 + 2) / 3)
        #expect(try Base64.decode(url) == bytes)
        #expect(Base64.encodeURL([0xFB, 0xFF]) == "-_8")
    }
}
