#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The process's descriptor limit, which bounds how many connections it can
/// hold. Debian's default soft limit (1,024) is far below the hard one, and a
/// proxy needs one descriptor per client plus its upstream and store
/// connections, so `serve` (and `check-config`, to print what `serve` would
/// use) raises the soft limit to the hard one at start, as HAProxy and the Go
/// runtime do.
public enum FileDescriptorLimit {
    /// A hard limit of "unlimited" is read as this many.
    public static let ceiling = 1 << 20

    #if canImport(Glibc)
    private static let resource = Int32(RLIMIT_NOFILE.rawValue)
    #else
    private static let resource = RLIMIT_NOFILE
    #endif

    private static func read() -> rlimit? {
        var r = rlimit()
        return getrlimit(resource, &r) == 0 ? r : nil
    }

    private static func count(_ value: rlim_t) -> Int {
        value == rlim_t.max ? ceiling : Int(clamping: min(UInt64(value), UInt64(ceiling)))
    }

    /// The soft limit in force now (what the default `limits.maxConnections`
    /// is half of).
    public static var current: Int { read().map { count($0.rlim_cur) } ?? 1024 }

    /// The hard limit: what `raise` aims for.
    public static var hard: Int { read().map { count($0.rlim_max) } ?? 1024 }

    /// Sets the soft limit to the hard one (at most `ceiling`); the limit in
    /// force afterwards (lower than `hard` when the system refused).
    @discardableResult
    public static func raise() -> Int {
        guard var r = read() else { return current }
        let target = rlim_t(count(r.rlim_max))
        if r.rlim_cur != rlim_t.max, r.rlim_cur < target {
            r.rlim_cur = target
            _ = setrlimit(resource, &r)
        }
        return current
    }
}
