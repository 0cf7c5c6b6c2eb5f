import NIOCore
import NIOEmbedded
import Testing

@testable import AssertGateRedis

/// Inputs found by `Fuzz/run.sh gateway`, kept so the fixes stay fixed.
@Suite(.timeLimit(.minutes(1))) struct RESPFuzzRegressionTests {
    private func decoderChannel(_ limits: RESPLimits) throws -> EmbeddedChannel {
        let channel = EmbeddedChannel()
        try channel.pipeline.syncOperations.addHandler(RESPValueDecoder(limits: limits))
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 6379)).wait()
        return channel
    }

    /// An empty array one level below `maxDepth` used to pass the scanner
    /// (only non-empty arrays were depth-checked), so hiredis built a reply
    /// nested deeper than the limit.
    @Test func emptyArrayBeyondTheDepthLimitIsRefused() throws {
        let limits = RESPLimits(maxDepth: 3)
        let deep = try decoderChannel(limits)
        #expect(throws: RESPDecodingError.tooDeep) {
            try deep.writeInbound(ByteBuffer(string: "*1\r\n*2\r\n:1\r\n*1\r\n*0\r\n"))
        }
        #expect(!deep.isActive)

        // The scanner on its own, the same bytes.
        var scanner = RESPLimitScanner(limits: limits)
        #expect(throws: RESPDecodingError.tooDeep) {
            try Array("*1\r\n*1\r\n*1\r\n*0\r\n".utf8).withUnsafeBytes { try scanner.scan($0) }
        }

        // At the limit, and at the top level, empty arrays still pass.
        let ok = try decoderChannel(limits)
        try ok.writeInbound(ByteBuffer(string: "*0\r\n*1\r\n*1\r\n*0\r\n"))
        var got: [RESPValue] = []
        while let v: RESPValue = try ok.readInbound() { got.append(v) }
        #expect(got == [.array([]), .array([.array([.array([])])])])
    }
}
