import Foundation
import Logging
import Testing
@testable import AssertGateCore

@Suite struct LogHandlerTests {
    @Test func jsonLinesCarryTsLevelMsgAndMetadata() throws {
        let sink = MemoryLogSink()
        let control = LogControl(level: .info, format: .json)
        var logger = Logger(label: "gw") { GatewayLogHandler(label: $0, control: control, sink: sink) }
        logger[metadataKey: "worker"] = "1"
        logger.debug("hidden")
        logger.info("request done", metadata: ["requestId": "abc-1", "status": "\(200)", "token": "hunter2", "nested": ["adminSecret": "x", "n": "1"]])
        #expect(sink.lines.count == 1)
        let line = try #require(sink.lines.first)
        #expect(line.hasSuffix("}\n"))
        #expect(!line.contains("hunter2"))
        let object = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any])
        #expect(object["level"] as? String == "info")
        #expect(object["msg"] as? String == "request done")
        #expect(object["requestId"] as? String == "abc-1")
        #expect(object["worker"] as? String == "1")
        #expect(object["token"] as? String == "<redacted>")
        #expect((object["nested"] as? [String: Any])?["adminSecret"] as? String == "<redacted>")
        let ts = try #require(object["ts"] as? String)
        #expect(ts.count == 24 && ts.hasSuffix("Z"))
    }

    @Test func textFormatAndReloadableLevel() {
        let sink = MemoryLogSink()
        let control = LogControl(level: .warning, format: .text)
        let logger = Logger(label: "gw") { GatewayLogHandler(label: $0, control: control, sink: sink) }
        logger.info("dropped")
        control.apply({ var c = LoggingConfig(); c.level = "debug"; c.format = .text; return c }())
        logger.debug("kept", metadata: ["requestId": "r1", "path": "/a b"])
        #expect(sink.lines.count == 1)
        let line = sink.lines.first ?? ""
        #expect(line.contains(" debug [gw] kept path=\"/a b\" requestId=r1\n"))
    }

    @Test func escapesControlCharactersInJSON() throws {
        let sink = MemoryLogSink()
        let logger = Logger(label: "gw") { GatewayLogHandler(label: $0, control: LogControl(), sink: sink) }
        logger.error("line\nbreak \"quoted\"")
        let line = try #require(sink.lines.first)
        #expect(line.filter { $0 == "\n" }.count == 1)
        let object = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any]
        #expect(object?["msg"] as? String == "line\nbreak \"quoted\"")
    }

    /// A path from an HTTP/2 client may carry C1 controls (NEL, CSI) and bidi
    /// overrides: escaped in both formats, never written raw.
    @Test func c1ControlsAndBidiOverridesAreEscaped() throws {
        let path = "/api/x\u{9B}2J\u{202E}evil\u{85}next\u{2066}"
        for format in [LogFormat.json, .text] {
            let sink = MemoryLogSink()
            let logger = Logger(label: "gw") { GatewayLogHandler(label: $0, control: LogControl(level: .info, format: format), sink: sink) }
            logger.warning("request refused", metadata: ["path": "\(path)"])
            let line = try #require(sink.lines.first)
            #expect(!line.unicodeScalars.contains { [0x9B, 0x202E, 0x85, 0x2066].contains($0.value) }, "\(format): \(line)")
            #expect(line.contains("\\u009b2J\\u202eevil\\u0085next\\u2066"), "\(format): \(line)")
        }
    }
}
