/// A secret must never reach a log line, a `print` or a debugger dump by accident:
/// every textual form names only where it came from.
extension Secret: CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    public var description: String {
        switch source {
        case .inline: return "<secret: inline, redacted>"
        case .file(let path): return "<secret: file \(path), redacted>"
        case .env(let name): return "<secret: env \(name), redacted>"
        }
    }

    public var debugDescription: String { description }

    public var customMirror: Mirror { Mirror(self, children: ["source": source]) }
}
