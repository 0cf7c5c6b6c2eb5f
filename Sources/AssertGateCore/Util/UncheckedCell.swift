/// A value in memory of its own, read and changed through addressors, so its
/// accesses carry no runtime exclusivity check.
///
/// Swift checks every access to a class's stored property that whole-module
/// optimisation cannot prove instantaneous (a mutating method's call, an
/// `inout` argument): ~94 instructions each, and on the request path they
/// were a fifth of a request's instructions. This is for loop-confined state
/// there whose accesses cannot overlap: while one is in progress the value's
/// code calls out to nothing (no closure, delegate, channel or C library that
/// could come back to it, no object whose deinit does). An overlap the checks
/// would have trapped is undefined behaviour here, so each use says why none
/// can happen.
///
/// Debug builds (the test suite) keep a check of their own: an access that
/// overlaps a modification traps, as the runtime's would, so every path the
/// tests drive is checked for the overlaps the release build no longer sees.
final class UncheckedCell<Value> {
    private let storage: UnsafeMutablePointer<Value>

    init(_ value: Value) {
        storage = .allocate(capacity: 1)
        storage.initialize(to: value)
    }

    deinit {
        storage.deinitialize(count: 1)
        storage.deallocate()
    }

    #if DEBUG
    private var readers = 0
    private var modifying = false

    var value: Value {
        _read {
            precondition(!modifying, "UncheckedCell: a read overlaps a modification")
            readers += 1
            defer { readers -= 1 }
            yield storage.pointee
        }
        _modify {
            precondition(!modifying && readers == 0, "UncheckedCell: a modification overlaps another access")
            modifying = true
            defer { modifying = false }
            yield &storage.pointee
        }
    }
    #else
    var value: Value {
        unsafeAddress { UnsafePointer(storage) }
        unsafeMutableAddress { storage }
    }
    #endif
}
