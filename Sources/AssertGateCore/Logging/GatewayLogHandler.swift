import Logging
import Synchronization

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// Level and format shared by every handler, so a reload changes them in
/// place (swift-log can be bootstrapped only once per process).
public final class LogControl: Sendable {
    private let levelRaw: Atomic<UInt8>
    private let jsonFormat: Atomic<Bool>

    public init(level: Logger.Level = .info, format: LogFormat = .json) {
        levelRaw = Atomic(Self.index(level))
        jsonFormat = Atomic(format == .json)
    }

    public var level: Logger.Level {
        get { Self.levels[Int(levelRaw.load(ordering: .relaxed))] }
        set { levelRaw.store(Self.index(newValue), ordering: .relaxed) }
    }

    public var format: LogFormat {
        get { jsonFormat.load(ordering: .relaxed) ? .json : .text }
        set { jsonFormat.store(newValue == .json, ordering: .relaxed) }
    }

    public func apply(_ config: LoggingConfig) {
        level = Logger.Level(rawValue: config.level) ?? .info
        format = config.format
    }

    private static let levels: [Logger.Level] = [.trace, .debug, .info, .notice, .warning, .error, .critical]
    private static func index(_ level: Logger.Level) -> UInt8 {
        UInt8(levels.firstIndex(of: level) ?? 2)
    }
}

/// One JSON object per line (`ts`, `level`, `msg`, `logger`, then metadata such
/// as `requestId`) or a `key=value` text line. Metadata whose key names a
/// secret is replaced by `<redacted>`: a defence in depth, callers must still
/// never log secrets, assertions or challenges.
public struct GatewayLogHandler: LogHandler {
    public var metadata: Logger.Metadata = [:]
    public var metadataProvider: Logger.MetadataProvider?
    private let label: String
    private let control: LogControl
    private let sink: any LogSink
    private var levelOverride: Logger.Level?

    public init(label: String, control: LogControl, sink: any LogSink, metadataProvider: Logger.MetadataProvider? = nil) {
        self.label = label
        self.control = control
        self.sink = sink
        self.metadataProvider = metadataProvider
    }

    public var logLevel: Logger.Level {
        get { levelOverride ?? control.level }
        set { levelOverride = newValue }
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        var merged = metadata
        if let provided = metadataProvider?.get() { merged.merge(provided) { _, new in new } }
        if let extra = event.metadata { merged.merge(extra) { _, new in new } }
        if let error = event.error { merged["error"] = .string("\(error)") }
        let ts = RFC3339.format(unixNanoseconds: Self.nowNanoseconds(), milliseconds: true)
        let line: String
        switch control.format {
        case .json: line = Self.json(ts: ts, level: event.level, message: event.message.description, label: label, metadata: merged)
        case .text: line = Self.text(ts: ts, level: event.level, message: event.message.description, label: label, metadata: merged)
        }
        sink.write(line: line)
    }

    static let sensitiveKeyParts = ["secret", "password", "token", "authorization", "assertion", "challenge", "privatekey"]

    static func isSensitive(_ key: String) -> Bool {
        let lower = key.lowercased()
        return sensitiveKeyParts.contains { lower.contains($0) }
    }

    static func json(ts: String, level: Logger.Level, message: String, label: String, metadata: Logger.Metadata) -> String {
        var out = "{\"ts\":\"\(ts)\",\"level\":\"\(level.rawValue)\",\"msg\":"
        out += JSONText.quoted(message)
        out += ",\"logger\":" + JSONText.quoted(label)
        for key in metadata.keys.sorted() where !["ts", "level", "msg", "logger"].contains(key) {
            guard let value = metadata[key] else { continue }
            out += "," + JSONText.quoted(key) + ":"
            out += isSensitive(key) ? "\"<redacted>\"" : jsonValue(value, depth: 0)
        }
        return out + "}\n"
    }

    static func jsonValue(_ value: Logger.Metadata.Value, depth: Int) -> String {
        guard depth < 8 else { return "\"…\"" }
        switch value {
        case .string(let s): return JSONText.quoted(s)
        case .stringConvertible(let c): return JSONText.quoted(c.description)
        case .array(let items): return "[" + items.map { jsonValue($0, depth: depth + 1) }.joined(separator: ",") + "]"
        case .dictionary(let dict):
            let members = dict.keys.sorted().compactMap { k in
                dict[k].map { (k, isSensitive(k) ? "\"<redacted>\"" : jsonValue($0, depth: depth + 1)) }
            }
            return JSONText.object(members)
        }
    }

    static func text(ts: String, level: Logger.Level, message: String, label: String, metadata: Logger.Metadata) -> String {
        var out = "\(ts) \(level.rawValue) [\(label)] \(message)"
        for key in metadata.keys.sorted() {
            guard let value = metadata[key] else { continue }
            out += " \(key)=" + (isSensitive(key) ? "<redacted>" : textValue(value))
        }
        return out + "\n"
    }

    static func textValue(_ value: Logger.Metadata.Value) -> String {
        let raw: String
        switch value {
        case .string(let s): raw = s
        case .stringConvertible(let c): raw = c.description
        case .array, .dictionary: return jsonValue(value, depth: 0)
        }
        // Quoted (and so escaped) whenever a value could forge a field or a line:
        // request paths and client-chosen ids reach the log.
        let needsQuotes =
            raw.isEmpty
            || raw.unicodeScalars.contains {
                $0 == " " || $0 == "\"" || $0 == "=" || $0 == "\\" || JSONText.isControl($0) || $0.properties.isWhitespace
            }
        return needsQuotes ? JSONText.quoted(raw) : raw
    }

    static func nowNanoseconds() -> Int64 {
        var ts = timespec()
        clock_gettime(CLOCK_REALTIME, &ts)
        return Int64(ts.tv_sec) * 1_000_000_000 + Int64(ts.tv_nsec)
    }
}

/// Installs the gateway's handler as the process-wide swift-log backend.
public enum LogBootstrap {
    /// The control every bootstrapped handler reads; `apply` it on reload.
    public static let control = LogControl()
    private static let done = Atomic<Bool>(false)

    /// Safe to call more than once: later calls only update level and format.
    public static func bootstrap(_ config: LoggingConfig, sink: any LogSink = FileDescriptorLogSink.standardError) {
        control.apply(config)
        guard done.compareExchange(expected: false, desired: true, ordering: .acquiringAndReleasing).exchanged else {
            return
        }
        LoggingSystem.bootstrap { label in
            GatewayLogHandler(label: label, control: control, sink: sink)
        }
    }
}
