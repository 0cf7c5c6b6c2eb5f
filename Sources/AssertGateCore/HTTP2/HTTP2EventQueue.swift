/// What an `HTTP2Session` recorded and its owner has not yet acted on, for
/// both owners (the front end's `HTTP2ServerConnection` and an upstream's
/// `UpstreamH2Connection`). `pending` is what `feed`/`drain` append to;
/// `process` hands the events out in order, each moved out of its batch (a
/// payload-free one left in its place) rather than copied and destroyed
/// twice, since a head carries its fields. Events recorded while one is
/// handled wait for the next round of the same loop, and a nested `process`
/// leaves them to it: none is handled twice or out of order. A class, so a
/// handler may feed or drain the session (appending to `pending`) while
/// `process` runs.
final class HTTP2EventQueue {
    var pending: [HTTP2Session.Event] {
        _read { yield arrays.value.pending }
        _modify { yield &arrays.value.pending }
    }
    /// The events being handed out, taken from `pending` whole; kept for its capacity.
    private var batch: [HTTP2Session.Event] {
        _read { yield arrays.value.batch }
        _modify { yield &arrays.value.batch }
    }
    /// An `UncheckedCell`: `pending` is lent to the session's `feed`/`drain`
    /// (a long access each time), so every read of it kept a runtime check.
    /// Nothing overlaps: the session appends to an array of its own while
    /// nghttp2 runs and swaps it back after, and `process` takes the events
    /// out of both arrays before it hands any to `handle`.
    private let arrays = UncheckedCell((pending: [HTTP2Session.Event](), batch: [HTTP2Session.Event]()))
    private var processing = false

    var isEmpty: Bool { pending.isEmpty }

    /// `handle` owns each event: a handler that switches on it with `consume`
    /// takes a head's parts without copying them, and the payload-free
    /// events need no destroy through the enum's value witness.
    func process(_ handle: (consuming HTTP2Session.Event) -> Void) {
        if processing || pending.isEmpty { return }
        processing = true
        defer { processing = false }
        while !pending.isEmpty {
            // A local array: no exclusivity check per element.
            var taken: [HTTP2Session.Event] = []
            swap(&taken, &batch)
            swap(&taken, &pending)
            for i in taken.indices {
                var e = HTTP2Session.Event.settingsReceived
                swap(&e, &taken[i])
                handle(consume e)
            }
            taken.removeAll(keepingCapacity: true)
            swap(&taken, &batch)
        }
    }
}
