import Testing
@testable import AssertGateCore

@Suite struct Base64Tests {
    @Test(arguments: [0, 1, 2, 3, 4, 31, 32, 33, 100])
    func roundTripsBothAlphabets(count: Int) throws {
        let bytes = (0..<count).map { UInt8(truncatingIfNeeded: $0 &* 37 &+ 250) }
        let std = Base64.encode(bytes)
        let url = Base64.encodeURL(bytes)
        #expect(try Base64.decode(std, maxDecodedBytes: 1000) == bytes)
        #expect(try Base64.decode(url, maxDecodedBytes: 1000) == bytes)
        // Unpadded standard and padded URL-safe are accepted too.
        let unpadded = String(std.prefix { $0 != "=" })
        #expect(try Base64.decode(unpadded, maxDecodedBytes: 1000) == bytes)
        #expect(!url.contains("="))
    }

    @Test func knownVector() throws {
        #expect(Base64.encode(Array("foobar".utf8)) == "Zm9vYmFy")
        #expect(Base64.encode(Array("fo".utf8)) == "Zm8=")
        #expect(Base64.encodeURL([0xFB, 0xFF]) == "-_8")
        #expect(try Base64.decode("+/8=", maxDecodedBytes: 10) == [0xFB, 0xFF])
    }

    @Test(arguments: ["Zm9v YmFy", "Zm9v\nYmFy", "Zm9v*", "Z", "Zm9=v", "Zm8==", "Zm9vY===", "Zm9=="])
    func rejectsJunk(_ s: String) {
        #expect(throws: Base64.DecodeError.self) { try Base64.decode(s, maxDecodedBytes: 100) }
    }

    @Test func rejectsNonCanonicalTail() {
        // "Zm9" decodes "fo" with tail bits; "Zm9" is canonical, "Zm/" is not.
        #expect(throws: Base64.DecodeError.nonCanonical) { try Base64.decode("Zm/", maxDecodedBytes: 10) }
    }

    @Test func enforcesSizeLimitBeforeDecoding() {
        let big = String(repeating: "A", count: 4000)
        #expect(throws: Base64.DecodeError.tooLong) { try Base64.decode(big, maxDecodedBytes: 2999) }
    }
}
