#if canImport(Glibc)
import Glibc
#endif

/// The process's descriptor limit, which bounds how many connections it can
/// hold. Debian's default soft limit (1,024) is far below the hard one, and a
/// proxy needs one descriptor per client plus its upstream and store
/// connections, so `serve` raises the soft limit to the hard one at start (as
/// HAProxy and the Go runtime do).
enum FileDescriptorLimit {
    /// A hard limit of "unlimited" is read as this many.
    static let ceiling = 1 << 20

    /// The soft limit `serve` runs with once `raise` has run: the hard limit,
    /// at most `ceiling`.
    static var usable: Int {
        var r = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &r) == 0 else { return 1024 }
        return r.rlim_max == rlim_t.max ? ceiling : Int(clamping: min(UInt64(r.rlim_max), UInt64(ceiling)))
    }

    /// Sets the soft limit to `usable`; the limit it now has.
    @discardableResult
    static func raise() -> Int {
        var r = rlimit()
        guard getrlimit(Int32(RLIMIT_NOFILE.rawValue), &r) == 0 else { return 1024 }
        let target = rlim_t(usable)
        if r.rlim_cur != rlim_t.max, r.rlim_cur < target {
            var raised = r
            raised.rlim_cur = target
            if setrlimit(Int32(RLIMIT_NOFILE.rawValue), &raised) == 0 { return Int(target) }
        }
        return r.rlim_cur == rlim_t.max ? ceiling : Int(clamping: UInt64(r.rlim_cur))
    }
}
