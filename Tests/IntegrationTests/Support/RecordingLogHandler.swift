import Logging
import NIOConcurrencyHelpers

/// Keeps every message at or above its level, for tests that check what the
/// gateway says in its log (and how often).
struct RecordingLogHandler: LogHandler {
    final class Lines: Sendable {
        private let lines = NIOLockedValueBox<[(Logger.Level, String)]>([])
        func append(_ level: Logger.Level, _ text: String) { lines.withLockedValue { $0.append((level, text)) } }
        var all: [(level: Logger.Level, text: String)] { lines.withLockedValue { $0.map { ($0.0, $0.1) } } }
    }

    let lines: Lines
    var logLevel: Logger.Level
    var metadata: Logger.Metadata = [:]

    init(lines: Lines, level: Logger.Level) {
        self.lines = lines
        self.logLevel = level
    }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        let all = metadata.merging(event.metadata ?? [:]) { $1 }
        let fields = all.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " ")
        lines.append(event.level, fields.isEmpty ? "\(event.message)" : "\(event.message) \(fields)")
    }
}
