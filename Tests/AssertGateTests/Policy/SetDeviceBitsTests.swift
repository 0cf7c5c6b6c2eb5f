import NIOCore
import Testing

@testable import AssertGateCore

/// risk.md §6.8: what an upstream may answer in `<prefix>Set-Device-Bits`,
/// and that every trust-prefixed response field is taken off.
@Suite struct SetDeviceBitsTests {
    private func parse(_ text: String) -> SetDeviceBits? { SetDeviceBits(parsing: Array(text.utf8)) }

    @Test func eitherOrBothBitsInAnyOrder() {
        #expect(parse("bit0=1") == SetDeviceBits(bit0: true, bit1: nil))
        #expect(parse("bit1=0") == SetDeviceBits(bit0: nil, bit1: false))
        #expect(parse("bit1=1, bit0=0") == SetDeviceBits(bit0: false, bit1: true))
        #expect(parse("bit0=1,bit1=1") == SetDeviceBits(bit0: true, bit1: true))
    }

    @Test func anythingElseIsRefusedWhole() {
        for bad in ["", "bit0", "bit0=", "bit0=2", "bit0=true", "bit2=1", "bit0=1, bit0=0", "bit0=1,", "BIT0=1",
            "bit0=1; bit1=0", String(repeating: "bit0=1, ", count: 20)]
        {
            #expect(parse(bad) == nil, "\(bad)")
        }
    }

    @Test func trustFieldsAreTakenOffAndTheInstructionRead() {
        var parser = UpstreamResponseParser()
        parser.expectResponse(isHead: false)
        var buffer = ByteBuffer(string: 
            "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nX-AssertGate-Trust: spoof\r\n"
                + "X-AssertGate-Set-Device-Bits: bit0=1\r\nX-AssertGate-Set-Device-Bits: bit1=1\r\nContent-Length: 0\r\n\r\n")
        guard case .head(var head, _)? = try? parser.next(&buffer) else {
            Issue.record("no head")
            return
        }
        let value = RequestPipeline.removeTrustFields(&head, prefix: Array("x-assertgate-".utf8))
        // Several lines are one value (RFC 9110 §5.3); all of them are removed.
        #expect(value.map { String(decoding: $0, as: UTF8.self) } == "bit0=1, bit1=1")
        #expect(value.flatMap { SetDeviceBits(parsing: $0) } == SetDeviceBits(bit0: true, bit1: true))
        var forwarded: [String] = []
        head.forEachForwarded { name, _ in forwarded.append(String(decoding: name, as: UTF8.self)) }
        #expect(forwarded == ["content-type", "content-length"])

        // A bit on two lines, contradicting itself: malformed, not the first line's.
        var twice = UpstreamResponseParser()
        twice.expectResponse(isHead: false)
        var b3 = ByteBuffer(string:
            "HTTP/1.1 200 OK\r\nX-AssertGate-Set-Device-Bits: bit0=1\r\nX-AssertGate-Set-Device-Bits: bit0=0\r\nContent-Length: 0\r\n\r\n")
        guard case .head(var h3, _)? = try? twice.next(&b3) else {
            Issue.record("no head")
            return
        }
        let contradictory = RequestPipeline.removeTrustFields(&h3, prefix: Array("x-assertgate-".utf8))
        #expect(contradictory.map { String(decoding: $0, as: UTF8.self) } == "bit0=1, bit0=0")
        #expect(contradictory.flatMap { SetDeviceBits(parsing: $0) } == nil)

        // A head without such fields is left as it is.
        var plain = UpstreamResponseParser()
        plain.expectResponse(isHead: false)
        var b2 = ByteBuffer(string: "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
        guard case .head(var h2, _)? = try? plain.next(&b2) else { return }
        let none = RequestPipeline.removeTrustFields(&h2, prefix: Array("x-assertgate-".utf8))
        let untouched = h2.fields.allSatisfy { $0.forward }
        #expect(none == nil)
        #expect(untouched)
    }
}
