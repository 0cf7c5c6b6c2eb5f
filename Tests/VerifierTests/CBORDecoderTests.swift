import Testing
import Verifier

@Suite struct CBORDecoderTests {
    let decoder = CBORDecoder(limits: .assertion)

    func error(_ bytes: [UInt8], limits: CBORLimits = .assertion) -> CBORError? {
        do {
            _ = try CBORDecoder(limits: limits).decode(bytes)
            return nil
        } catch {
            return error
        }
    }

    @Test func decodesTypedValues() throws {
        let bytes = TestCBOR.map([
            (.text("a"), .uint(500)), (.neg(6), .bytes([1, 2])), (.uint(1), .array([.text("x"), .neg(0)])),
        ]).encoded
        let value = try decoder.decode(bytes)
        #expect(value[text: "a"] == .unsigned(500))
        #expect(value[int: -7]?.bytesValue == [1, 2])
        #expect(value[int: 1] == .array([.text("x"), .negative(0)]))
        if case .array(let elements)? = value[int: 1] {
            #expect(elements[1].int64 == -1)
        } else {
            Issue.record("key 1 is not an array")
        }
        #expect(try decoder.decode([0xf4, ]) == .bool(false))
        #expect(try decoder.decode([0xf5]) == .bool(true))
        #expect(try decoder.decode([0xf6]) == .null)
        #expect(try decoder.decode([0x1b, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]) == .unsigned(.max))
        #expect(try decoder.decode([0x3b, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]).int64 == nil)
    }

    @Test func rejectsTrailingBytes() {
        #expect(error([0x01, 0x02]) == .trailingBytes(offset: 1, count: 1))
    }

    @Test func prefixDecodingReportsTheEnd() throws {
        let (value, end) = try decoder.decodePrefix([0x01, 0x02, 0x03], range: 1..<3)
        #expect(value == .unsigned(2))
        #expect(end == 2)
    }

    @Test func rejectsIndefiniteLengths() {
        #expect(error([0x5f, 0x41, 0x00, 0xff]) == .indefiniteLength(offset: 0))
        #expect(error([0x7f, 0xff]) == .indefiniteLength(offset: 0))
        #expect(error([0x9f, 0xff]) == .indefiniteLength(offset: 0))
        #expect(error([0xbf, 0xff]) == .indefiniteLength(offset: 0))
        #expect(error([0xff]) == .indefiniteLength(offset: 0))
    }

    @Test func rejectsDuplicateMapKeys() {
        let bytes = TestCBOR.map([(.text("k"), .uint(1)), (.text("k"), .uint(2))]).encoded
        #expect(error(bytes) == .duplicateMapKey(offset: 4))
        // Same value with a non-minimal encoding is still a duplicate.
        #expect(error([0xa2, 0x01, 0x00, 0x18, 0x01, 0x00]) == .duplicateMapKey(offset: 3))
    }

    @Test func enforcesDepthLimit() {
        var limits = CBORLimits.assertion
        limits.maxDepth = 3
        #expect(error([0x81, 0x81, 0x80], limits: limits) == nil)
        #expect(error([0x81, 0x81, 0x81, 0x80], limits: limits) == .depthExceeded(offset: 3, limit: 3))
        // Deep nesting cannot exhaust the stack.
        let deep = [UInt8](repeating: 0x81, count: 100_000) + [0x00]
        var big = CBORLimits.assertion
        big.maxInputSize = 200_000
        big.maxItems = 200_000
        #expect(error(deep, limits: big) == .depthExceeded(offset: 8, limit: 8))
    }

    @Test func enforcesItemLimit() {
        var limits = CBORLimits.assertion
        limits.maxItems = 3
        #expect(error([0x82, 0x01, 0x02], limits: limits) == nil)
        #expect(error([0x83, 0x01, 0x02, 0x03], limits: limits) == .tooManyItems(offset: 3, limit: 3))
    }

    @Test func enforcesContainerAndStringLimits() {
        var limits = CBORLimits.assertion
        limits.maxContainerCount = 2
        limits.maxStringLength = 4
        #expect(error([0x83, 0x01, 0x02, 0x03], limits: limits) == .containerTooLarge(offset: 0, count: 3, limit: 2))
        #expect(error([0xa3, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06], limits: limits) == .containerTooLarge(offset: 0, count: 3, limit: 2))
        #expect(error([0x45, 1, 2, 3, 4, 5], limits: limits) == .stringTooLong(offset: 0, length: 5, limit: 4))
        // A huge declared length fails before any allocation.
        #expect(error([0x5b, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]) == .stringTooLong(offset: 0, length: .max, limit: 16 * 1024))
        #expect(error([0x9b, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]) == .containerTooLarge(offset: 0, count: .max, limit: 64))
        // Count larger than what remains.
        #expect(error([0x84, 0x01]) == .truncated(offset: 2))
    }

    @Test func enforcesInputSize() {
        var limits = CBORLimits.assertion
        limits.maxInputSize = 4
        #expect(error([0x44, 1, 2, 3, 4], limits: limits) == .inputTooLarge(size: 5, limit: 4))
    }

    @Test func rejectsTruncatedInput() {
        #expect(error([]) == .truncated(offset: 0))
        #expect(error([0x19, 0x01]) == .truncated(offset: 2))
        #expect(error([0x43, 0x01]) == .truncated(offset: 2))
        #expect(error([0xa1, 0x01]) == .truncated(offset: 2))
    }

    @Test func rejectsUnsupportedItems() {
        #expect(error([0xc0, 0x01]) == .unsupportedItem(offset: 0, what: "tag"))
        #expect(error([0xf9, 0x00, 0x00]) == .unsupportedItem(offset: 0, what: "float"))
        #expect(error([0xf7]) == .unsupportedItem(offset: 0, what: "undefined"))
        #expect(error([0x1c]) == .reservedAdditionalInfo(offset: 0, value: 28))
        #expect(error([0x62, 0xc3, 0x28]) == .invalidUTF8(offset: 0))
    }
}
