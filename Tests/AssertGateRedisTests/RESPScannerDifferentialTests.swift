import Testing

@testable import AssertGateRedis

/// The scanner handles a line in one pass when all of it is in the buffer,
/// and byte by byte otherwise. Both paths must agree on every input: fed
/// whole, fed in 1-byte pieces (never the one-pass path) and fed in uneven
/// pieces, the same bytes are accepted or refused with the same error.
@Suite struct RESPScannerDifferentialTests {
    private enum Outcome: Equatable {
        case accepted
        case refused(RESPDecodingError)
    }

    private func scan(_ input: [UInt8], _ limits: RESPLimits, pieces: [Int]) -> Outcome {
        var scanner = RESPLimitScanner(limits: limits)
        var offset = 0
        var k = 0
        do throws(RESPDecodingError) {
            while offset < input.count {
                let size = min(max(1, pieces[k % pieces.count]), input.count - offset)
                k += 1
                let chunk = Array(input[offset..<offset + size])
                offset += size
                let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: chunk.count, alignment: 1)
                defer { buffer.deallocate() }
                buffer.copyBytes(from: chunk)
                try scanner.scan(UnsafeRawBufferPointer(buffer))
            }
            return .accepted
        } catch {
            return .refused(error)
        }
    }

    private func check(_ input: [UInt8], _ limits: RESPLimits) {
        let whole = scan(input, limits, pieces: [input.count])
        #expect(scan(input, limits, pieces: [1]) == whole, "\(String(decoding: input, as: UTF8.self).debugDescription)")
        #expect(scan(input, limits, pieces: [3, 7, 2]) == whole, "\(String(decoding: input, as: UTF8.self).debugDescription)")
    }

    @Test func handPickedEdgesAgree() {
        let tight = RESPLimits(
            maxBulkLength: 8, maxArrayCount: 4, maxDepth: 2, maxReplyBytes: 40, maxTotalElements: 6, maxLineLength: 6)
        let inputs = [
            "*6\r\n:0\r\n:0\r\n$0\r\n\r\n:0\r\n$0\r\n\r\n$0\r\n\r\n", "+OK\r\n", "-ERR x\r\n", ":-42\r\n", "$-1\r\n",
            "*-1\r\n", "*0\r\n", "$01\r\nx\r\n", "$9\r\n123456789\r\n", "$8\r\n12345678\r\n", "*5\r\n", "*4\r\n",
            "*1\r\n*1\r\n*1\r\n:1\r\n", "+12345\r\n", "+123456\r\n", ":1\r\r\n", "$\r\n", "$1x\r\n", "$1\r\r", "$-0\r\n",
            "$-2\r\n", "$1234567890123456789012\r\n", "?x\r\n", "*2\r\n$3\r\nabc\r\n$40\r\n",
            ":1\r\n:2\r\n:3\r\n:4\r\n:5\r\n:6\r\n:7\r\n:8\r\n:9\r\n", "*3\r\n*2\r\n:1\r\n:2\r\n:3\r\n",
            // Leading zeros: a small value on a line longer than maxLineLength.
            "$0001\r\nx\r\n", "$00001\r\nx\r\n", "$000001\r\nx\r\n", "*00001\r\n:1\r\n", "*000001\r\n:1\r\n",
            "$0000000000000000001\r\nx\r\n", "$00000000000000000001\r\nx\r\n",
        ]
        for text in inputs {
            check(Array(text.utf8), tight)
            check(Array(text.utf8), .default)
        }
    }

    @Test func randomStreamsAgree() {
        // RESP-shaped noise from a fixed seed: type bytes, digits, signs, CR, LF, letters.
        let alphabet = Array("+-:$*0000123456789\r\n\r\n\r\nab".utf8)
        var state: UInt64 = 0x2545_F491_4F6C_DD1D
        func next() -> UInt64 {
            state ^= state << 13
            state ^= state >> 7
            state ^= state << 17
            return state
        }
        let limits = RESPLimits(
            maxBulkLength: 12, maxArrayCount: 5, maxDepth: 3, maxReplyBytes: 64, maxTotalElements: 10, maxLineLength: 8)
        for _ in 0..<20_000 {
            let length = Int(next() % 40) + 1
            let input = (0..<length).map { _ in alphabet[Int(next() % UInt64(alphabet.count))] }
            check(input, limits)
        }
    }
}
