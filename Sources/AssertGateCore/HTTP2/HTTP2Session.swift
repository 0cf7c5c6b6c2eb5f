#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import CNGHTTP2
import NIOCore
import NIOHTTP1

/// One nghttp2 session as a codec on bytes: frames in (`feed`), frames out
/// (`drain`), and what happened in between as `Event`s. It knows nothing of
/// channels, budgets or requests: the handler that owns it moves the bytes and
/// decides what the events mean (`HTTP2ServerConnection`).
///
/// nghttp2's callbacks only record: they append events, decode header blocks
/// and copy outgoing bytes from the streams' data sources. They never call
/// nghttp2 (debug builds assert it), so every method here is a plain nghttp2
/// call made outside them.
///
/// Lifetimes: `user_data` is this object, unretained — it deletes the session
/// in `deinit`, so it outlives every callback. A stream's state (and its data
/// source) is kept here in a slot until nghttp2 closes the stream; nghttp2
/// holds only the slot's number (see `slots`). Memory lent to nghttp2 (fed
/// bytes, header lists) is valid only inside the call that lends it.
///
/// Both sides are this one object: `server` for the front end (requests in,
/// `submitResponse`), `client` for `h2c://`/`h2://` upstreams (`submitRequest`,
/// responses in). The events are the same; a client's heads carry `:status`.
final class HTTP2Session {
    /// What the session advertises and enforces.
    struct Settings {
        var maxConcurrentStreams: Int
        /// Advertised as SETTINGS_MAX_HEADER_LIST_SIZE and enforced per
        /// stream over its head and trailers (RFC 9113's size: name + value + 32).
        var maxHeaderListBytes: Int
        /// nghttp2's own RST_STREAM limiter.
        var streamResetBurst: Int
        var streamResetPerSecond: Double
        var initialStreamWindow: UInt32 = 256 << 10
        var connectionWindow: Int32 = 1 << 20
        /// The most one `drain` moves, so one busy connection cannot fill
        /// memory (or hog the loop) in one go.
        var maxOutputPerDrain = 1 << 20
    }

    /// Recorded by the callbacks, in the order nghttp2 reported them.
    enum Event {
        /// A header block began (HEADERS: a head or trailers) and was still
        /// unfinished when `feed` returned: recorded last in that feed's
        /// events. It ends with `headerBlockEnded`, or when its stream closes.
        case headerBlockStarted(Int32)
        /// A header block ended (also one whose start was not recorded: it
        /// began and ended within one `feed`).
        case headerBlockEnded(Int32)
        /// A stream's head, complete (a request's on a server, a final
        /// response's on a client: 1xx heads are dropped).
        case head(Int32, HTTP2HeaderBlock, endStream: Bool)
        /// A client's final response head, as bytes (names lower-case, as
        /// HTTP/2 has them; `X-Request-Id` marked not forwarded): no `String`
        /// per field between the socket and the front end's encoder.
        case response(Int32, UpstreamResponseHead, endStream: Bool)
        /// A client's final head whose status is outside 200–599 (nghttp2
        /// checks three digits only, and refuses 101): answered 502 rather
        /// than passed on as a status no client can read (RFC 9110 §15).
        case responseInvalid(Int32)
        /// A client's interim head (1xx but `100`; nghttp2 refuses `101`).
        case interim(Int32, UpstreamResponseHead)
        /// Trailer fields (pseudo-headers dropped), before the stream's `end`.
        case trailers(Int32, HTTPHeaders)
        /// Body bytes: a view of the fed buffer when they lie in it (no copy).
        case data(Int32, ByteBuffer)
        /// The peer ended its half (END_STREAM on DATA or trailers).
        case end(Int32)
        /// nghttp2 closed the stream; its data source has been let go.
        case closed(Int32, errorCode: UInt32)
        /// A data source's backlog fell below its low-water mark.
        case drained(Int32)
        /// A stream's head, complete, whose header list passed
        /// `maxHeaderListBytes`: the fields past the limit were decoded and
        /// dropped (what came before, pseudo-headers first, is kept). The
        /// stream stays open for an answer.
        case headTooLarge(Int32, HTTP2HeaderBlock)
        /// Trailers took the stream's header list past the limit: nghttp2
        /// resets the stream (its request is already under way).
        case trailersTooLarge(Int32)
        // Frames whose rate the owner may want to bound (nghttp2 1.52 does not limit them all).
        case settingsReceived
        case pingReceived
        case emptyDataReceived(Int32)
        case resetReceived(Int32)
        /// nghttp2 reset the stream for an error of the peer's (DATA on a
        /// stream the peer had ended, a window overflow, a malformed field):
        /// a reset the peer caused without sending one, which a rapid-reset
        /// limit counting RST_STREAM frames would miss ("MadeYouReset",
        /// CVE-2025-8671). Servers only.
        case resetForPeerError(Int32)
        /// The peer is going away: streams above `lastStreamId` were never
        /// processed (nghttp2 closes them with REFUSED_STREAM).
        case goAwayReceived(lastStreamId: Int32, errorCode: UInt32)
        case pingAcked
    }

    private let raw: OpaquePointer
    let settings: Settings
    /// Streams of a server session reset by the owner (`reset`) or by the
    /// peer (RST_STREAM) and not yet closed: a stream closed with an error
    /// and not in here was reset by nghttp2 for an error of the peer's.
    private var resetsAccounted = Set<Int32>()
    /// Tests: the set stays empty once the streams are closed.
    var resetsAwaitingClose: Int { resetsAccounted.count }
    private let allocator: ByteBufferAllocator
    /// The HEADERS category that opens a stream's head here (a request's on a server).
    private let headCategory: nghttp2_headers_category
    private var isClient: Bool { headCategory == NGHTTP2_HCAT_RESPONSE }

    /// The caller's event list, lent for the length of `feed`/`drain`.
    private var events: [Event] {
        _read { yield rx.events }
        _modify { yield &rx.events }
    }
    /// True while nghttp2 runs: no nghttp2 function may be entered from a callback.
    private var insideNghttp2 = false
    private var inbound: (base: UnsafeRawPointer, count: Int, buffer: ByteBuffer)? {
        _read { yield rx.inbound }
        _modify { yield &rx.inbound }
    }

    /// What the session keeps per open stream (from its head until nghttp2 closes it).
    private struct StreamState {
        /// The stream's id; 0 while the slot is free.
        var id: Int32 = 0
        /// Header list bytes so far (head, then trailers).
        var headerListBytes = 0
        /// The head passed the limit: its trailers are dropped too.
        var headTooLarge = false
        var source: (any HTTP2DataSource)?
        /// The source said `.deferred`: nghttp2 waits for `resume`.
        var deferred = false
        /// Client: a final (non-1xx) response head arrived; later HEADERS are trailers.
        var finalHeadSeen = false
        /// Trailers to send once the source's last byte is out (`setTrailers`).
        var trailers: HTTPHeaders?
    }
    /// Open streams' states, found without hashing in Swift: nghttp2 keeps
    /// each stream's slot number as its stream_user_data (and a data
    /// provider's `source.ptr`), a number rather than an address, so nothing
    /// is retained behind Swift's back and a stale one can only name a slot
    /// whose id no longer matches (checked on every lookup). A slot is freed
    /// exactly once, when nghttp2 closes its stream; the streams still open
    /// when the session goes are freed with the array.
    private var slots: StreamSlots {
        _read { yield rx.slots }
        _modify { yield &rx.slots }
    }
    /// Streams whose head has begun (a server's) or that were submitted (a
    /// client's) and that nghttp2 has not closed.
    var openStreams: Int { slots.open }

    /// The states, the free slots and the count in one property: opening or
    /// closing a stream is one exclusive access, not three.
    private struct StreamSlots {
        var states: [StreamState] = []
        var free: [Int] = []
        var open = 0

        var count: Int { states.count }

        subscript(slot: Int) -> StreamState {
            get { states[slot] }
            _modify { yield &states[slot] }
        }

        /// A free slot's state was reset when it was freed: only its id is set.
        mutating func alloc(_ id: Int32) -> Int {
            open += 1
            if let slot = free.popLast() {
                states[slot].id = id
                return slot
            }
            states.append(StreamState(id: id))
            return states.count - 1
        }

        /// Lets go of the stream's source and trailers; the slot serves the next stream.
        mutating func release(_ slot: Int) {
            states[slot] = StreamState()
            free.append(slot)
            open -= 1
        }

        /// `slot` if it holds stream `id`. A method, so the session's lookups
        /// make one exclusivity check on `slots`, not one per property read.
        @inline(__always)
        func live(_ slot: Int, _ id: Int32) -> Int? {
            slot >= 0 && slot < states.count && states[slot].id == id && id != 0 ? slot : nil
        }

        /// Clears the slot's `deferred` flag: true if it was set.
        mutating func undefer(_ slot: Int) -> Bool {
            guard states[slot].deferred else { return false }
            states[slot].deferred = false
            return true
        }

        /// Keeps a head's list size for its trailers, if `slot` still holds stream `id`.
        mutating func setHeaderListBytes(_ bytes: Int, slot: Int, id: Int32) {
            guard let slot = live(slot, id) else { return }
            states[slot].headerListBytes = bytes
        }

        /// What a header block beginning on `slot` carries over: the list size so far, and a head over the limit.
        func blockStart(_ slot: Int) -> (listBytes: Int, overLimit: Bool) {
            (states[slot].headerListBytes, states[slot].headTooLarge)
        }
    }

    /// The header block (HEADERS + CONTINUATIONs) arriving now: at most one,
    /// as a block's frames may not interleave with others.
    private struct HeaderBlock {
        /// A head whose decoded list reaches this many times the limit is reset.
        static let overrunFactor = 4
        var streamId: Int32 = 0  // 0: none
        /// The stream's slot, -1 if it has none (checked against `streamId` before use).
        var slot = -1
        /// A head (else trailers).
        var isHead = false
        var head = HTTP2HeaderBlock()
        /// A client's response head (nil on a server, and until its first field).
        var response: UpstreamResponseHead?
        var trailers = HTTPHeaders()
        /// `cookie` crumbs, joined into one field when the block ends.
        var cookies: [String] = []
        var listBytes = 0
        /// Past the limit: the rest of the block is decoded and dropped.
        var overLimit = false
        /// Handed to the owner by `takeUnfinishedHead`.
        var handedOver = false
        /// `headerBlockStarted` recorded (at the end of the `feed` the block did not finish in).
        var startReported = false
        /// The last value seen of fields a connection's requests tend to
        /// repeat (`:authority` and the slots `knownName` gives): carried from
        /// block to block by `moveOut`, and kept here so that a field is
        /// recorded with one exclusive access to the session's `block`.
        /// Made with the first such field.
        var recent: [String] = []
        static let recentSlots = 5
        static let authoritySlot = 4

        /// The head, moved out (an empty one left).
        mutating func takeHead() -> HTTP2HeaderBlock {
            var taken = HTTP2HeaderBlock()
            swap(&taken, &head)
            return taken
        }

        /// The block, moved out; a fresh one takes its place and keeps `recent`.
        mutating func moveOut() -> HeaderBlock {
            var ended = HeaderBlock()
            swap(&ended, &self)
            swap(&recent, &ended.recent)
            return ended
        }

        /// A block begins on stream `id` (one left unfinished is dropped:
        /// nghttp2 gave up on it and closes its stream later).
        mutating func begin(_ id: Int32, isHead: Bool, slot: Int?, carried: (listBytes: Int, overLimit: Bool)?) {
            if streamId != 0 { _ = moveOut() }
            streamId = id
            self.isHead = isHead
            if let slot, let carried {
                self.slot = slot
                listBytes = carried.listBytes
                overLimit = carried.overLimit
            }
        }

        /// One decoded field of stream `id`'s block (ignored for another
        /// stream's). False: trailers passed the header list limit, or a head
        /// decoded to `overrunFactor` times it, and nghttp2 is to reset the
        /// stream.
        mutating func add(
            _ id: Int32, _ name: UnsafeBufferPointer<UInt8>, _ value: UnsafeBufferPointer<UInt8>, limit: Int, client: Bool
        ) -> Bool {
            guard id == streamId else { return true }
            listBytes += name.count + value.count + 32
            if overLimit {
                // Past the limit the rest is decoded and dropped, so the owner can
                // answer 431; but HPACK references to one big table entry decode
                // to far more than was sent, and nghttp2 checks every decoded
                // byte: a block that keeps going is reset, and nghttp2 then only
                // keeps its table in step, checking nothing.
                keepContentType(name, value)
                return listBytes <= limit * Self.overrunFactor
            }
            if listBytes > limit {
                // Trailers: nghttp2 resets the stream.
                guard isHead else { return false }
                // A head: the rest of the block is dropped as it is decoded (nghttp2
                // keeps no list of it), so the owner can answer once the block ends.
                // Only a short `content-type` is kept: a gRPC client reads its
                // refusal from trailers.
                overLimit = true
                let type = head.fieldList.first { $0.0 == "content-type" && $0.1.utf8.count <= Self.keptContentTypeBytes }
                head.fieldList = type.map { [$0] } ?? []
                keepContentType(name, value)
                cookies = []
                return true
            }
            if !isHead {
                // Trailers carry no pseudo-headers (nghttp2 refuses them).
                if name.first != UInt8(ascii: ":") {
                    trailers.add(name: String(decoding: name, as: UTF8.self), value: String(decoding: value, as: UTF8.self))
                }
            } else if client {
                responseField(name, value)
            } else {
                requestField(name, value)
            }
            return true
        }

        /// A request's `content-type` short enough to keep from a head over the limit.
        static let keptContentTypeBytes = 128

        /// Past the limit: a short `content-type` is kept if none is yet.
        private mutating func keepContentType(_ name: UnsafeBufferPointer<UInt8>, _ value: UnsafeBufferPointer<UInt8>) {
            guard head.fieldList.isEmpty, value.count <= Self.keptContentTypeBytes, HTTP2Session.equals(name, "content-type")
            else { return }
            head.fieldList = [("content-type", String(decoding: value, as: UTF8.self))]
        }

        private mutating func requestField(_ name: UnsafeBufferPointer<UInt8>, _ value: UnsafeBufferPointer<UInt8>) {
            if name.first == UInt8(ascii: ":") {
                // Compared as bytes: no `String` per pseudo-header name.
                if HTTP2Session.equals(name, ":path") {
                    head.path = String(decoding: value, as: UTF8.self)
                } else if HTTP2Session.equals(name, ":method") {
                    head.method = HTTP2Session.knownMethod(value) ?? String(decoding: value, as: UTF8.self)
                } else if HTTP2Session.equals(name, ":authority") {
                    head.authority = shared(value, Self.authoritySlot)
                }  // :scheme is the transport's, :protocol unsupported
                return
            }
            if HTTP2Session.equals(name, "cookie") {
                cookies.append(String(decoding: value, as: UTF8.self))
                return
            }
            if name.count == 4, HTTP2Session.equals(name, "host") { head.hasHost = true }
            // Most requests carry several fields: room for them with the first.
            if head.fieldList.capacity == 0 { head.fieldList.reserveCapacity(8) }
            if let known = HTTP2Session.knownName(name) {
                // A connection's clients repeat these from request to request: the last
                // one's string is shared instead of a new one made (and allocated, past 15 bytes).
                let v = known.repeated >= 0 ? shared(value, known.repeated) : String(decoding: value, as: UTF8.self)
                head.fieldList.append((known.name, v))
            } else {
                head.fieldList.append((String(decoding: name, as: UTF8.self), String(decoding: value, as: UTF8.self)))
            }
        }

        /// `value` as a `String`, shared with the last one in `recent[slot]` when equal.
        private mutating func shared(_ value: UnsafeBufferPointer<UInt8>, _ slot: Int) -> String {
            if recent.isEmpty { recent = Array(repeating: "", count: Self.recentSlots) }
            return HTTP2Session.string(value, reusing: &recent[slot])
        }

        /// A client's response field, copied into the head's bytes. nghttp2 has
        /// checked it (HTTP messaging): a three-digit `:status`, lower-case names.
        private mutating func responseField(_ name: UnsafeBufferPointer<UInt8>, _ value: UnsafeBufferPointer<UInt8>) {
            if response == nil {
                var head = UpstreamResponseHead(status: 0, bytes: [], fields: [])
                head.bytes.reserveCapacity(256)
                head.fields.reserveCapacity(8)
                response = head
            }
            if name.first == UInt8(ascii: ":") {
                if name.count == 7, name[1] == UInt8(ascii: "s") {  // :status (the only response pseudo-header)
                    var status = 0
                    for d in value { status = status * 10 + Int(d &- UInt8(ascii: "0")) }
                    response?.status = status
                }
                return
            }
            let ns = response?.bytes.count ?? 0
            response?.bytes.append(contentsOf: name)
            let vs = response?.bytes.count ?? 0
            response?.bytes.append(contentsOf: value)
            // The gateway sets its own X-Request-Id; `te` belongs to requests
            // only (RFC 9113 §8.2.2) and is hop-by-hop to an HTTP/1.1 client.
            let forward = !HTTP2Session.equals(name, "x-request-id") && !(name.count == 2 && HTTP2Session.equals(name, "te"))
            response?.fields.append(
                .init(nameStart: ns, nameLength: name.count, valueStart: vs, valueLength: value.count, forward: forward))
        }
    }
    private var block: HeaderBlock {
        _read { yield rx.block }
        _modify { yield &rx.block }
    }

    /// The events, the stream slots, the header block in progress, the
    /// trailers due and the bytes being fed: what the callbacks change.
    /// `events`, `slots`, `block`, `trailersDue` and `inbound` name its parts.
    ///
    /// An `UncheckedCell`: as a stored property each callback's access (a
    /// mutating method) kept a runtime exclusivity check, ~16 per request on
    /// each session. None can overlap another: `Receive` and its parts are
    /// plain values whose methods call out to nothing, nghttp2 runs one
    /// callback at a time and never inside another, and the owner's calls
    /// never come from a callback (`assertOutsideCallbacks`).
    private let rxCell = UncheckedCell(Receive())
    private var rx: Receive {
        _read { yield rxCell.value }
        _modify { yield &rxCell.value }
    }

    private struct Receive {
        var events: [Event] = []
        var slots = StreamSlots()
        var block = HeaderBlock()
        /// Streams whose source gave its last byte and that have trailers: the
        /// trailers are submitted after `mem_send` returns (never from a callback).
        var trailersDue: [Int32] = []
        /// The buffer `feed` passes to nghttp2, for zero-copy DATA slices. Set
        /// only for the length of the `mem_recv` call that lends its bytes.
        var inbound: (base: UnsafeRawPointer, count: Int, buffer: ByteBuffer)?

        /// A header block begins on stream `id` (its slot, if it has one, already open).
        mutating func beginBlock(_ id: Int32, isHead: Bool, slot: Int?) {
            // Set in place: the block left by `endBlock` is a fresh one, with nothing to destroy.
            block.begin(id, isHead: isHead, slot: slot, carried: slot.map { slots.blockStart($0) })
        }

        /// A block still unfinished once nghttp2 has taken the fed bytes: its
        /// start is recorded, once (heads and trailers alike: the owner may
        /// want it complete in time). One that began and ended within the
        /// same bytes reports only its end: nothing waited on it.
        mutating func reportUnfinishedBlock() {
            guard block.streamId != 0, !block.startReported else { return }
            block.startReported = true
            events.append(.headerBlockStarted(block.streamId))
        }

        /// The block in progress is complete (or its stream is gone): its size
        /// stays with the stream, for the trailers' share of the limit.
        mutating func endBlock() -> HeaderBlock {
            let ended = block.moveOut()
            slots.setHeaderListBytes(ended.listBytes, slot: ended.slot, id: ended.streamId)
            events.append(.headerBlockEnded(ended.streamId))
            return ended
        }

        /// A HEADERS frame (with its CONTINUATIONs) arrived whole on stream
        /// `id`: its block is ended and its head or trailers recorded. False
        /// when no block of the stream is in progress.
        mutating func headersReceived(_ id: Int32, endStream: Bool, client: Bool) -> Bool {
            guard id == block.streamId else { return false }
            if !block.cookies.isEmpty {
                // Joined here, while the fields have one owner: appended in place.
                block.head.fieldList.append(("cookie", block.cookies.joined(separator: "; ")))
            }
            // Moved out of `block`, and its parts out of it into the events: not copied.
            var ended = endBlock()
            guard let slot = slots.live(ended.slot, id) else { return true }
            if ended.isHead {
                if client {
                    let response = ended.response.take() ?? UpstreamResponseHead(status: 0, bytes: [], fields: [])
                    // Informational: the final head follows; a 103's hints are
                    // passed on (RFC 9110 §15.2), a 100 is the gateway's own business.
                    if (100..<200).contains(response.status) {
                        if response.status != 100, !ended.overLimit { events.append(.interim(id, response)) }
                        return true
                    }
                    slots[slot].finalHeadSeen = true
                    if ended.overLimit {
                        events.append(.headTooLarge(id, ended.takeHead()))
                    } else if response.status > 599 || response.status < 200 {
                        events.append(.responseInvalid(id))
                    } else {
                        events.append(.response(id, response, endStream: endStream))
                    }
                } else if ended.overLimit {
                    slots[slot].headTooLarge = true
                    events.append(.headTooLarge(id, ended.takeHead()))
                } else {
                    events.append(.head(id, ended.takeHead(), endStream: endStream))
                }
            } else {
                if !ended.trailers.isEmpty {
                    var trailers = HTTPHeaders()
                    swap(&trailers, &ended.trailers)
                    events.append(.trailers(id, trailers))
                }
                if endStream { events.append(.end(id)) }
            }
            return true
        }

        /// nghttp2 closed the stream: a block it refused (bad field, too
        /// large) ends with it, and its slot (if it has one) is freed.
        mutating func streamClosed(_ id: Int32, slot: Int?, errorCode: UInt32) {
            if id == block.streamId { _ = endBlock() }
            if let slot { slots.release(slot) }
            events.append(.closed(id, errorCode: errorCode))
        }
    }
    private var trailersDue: [Int32] {
        _read { yield rx.trailersDue }
        _modify { yield &rx.trailersDue }
    }
    /// HEADERS + CONTINUATION payload of the block in progress, as sent.
    private var blockWireBytes = 0

    private init(raw: OpaquePointer, settings: Settings, allocator: ByteBufferAllocator,
                 headCategory: nghttp2_headers_category) {
        self.raw = raw
        self.settings = settings
        self.allocator = allocator
        self.headCategory = headCategory
    }

    /// A server session with its SETTINGS and connection window queued (the
    /// first `drain` sends them).
    static func server(_ settings: Settings, allocator: ByteBufferAllocator) throws(HTTP2SessionError) -> HTTP2Session {
        try make(settings, allocator: allocator, client: false)
    }

    /// A client session (an `h2c://`/`h2://` upstream connection): the
    /// preface and SETTINGS are queued (the first `drain` sends them). Push is
    /// refused; windows open as the owner takes response bytes (`consume*`).
    static func client(_ settings: Settings, allocator: ByteBufferAllocator) throws(HTTP2SessionError) -> HTTP2Session {
        try make(settings, allocator: allocator, client: true)
    }

    private static func make(
        _ settings: Settings, allocator: ByteBufferAllocator, client: Bool
    ) throws(HTTP2SessionError) -> HTTP2Session {
        var cbs: OpaquePointer?
        guard nghttp2_session_callbacks_new(&cbs) == 0, let cbs else {
            throw HTTP2SessionError(code: NGHTTP2_ERR_NOMEM.rawValue)
        }
        defer { nghttp2_session_callbacks_del(cbs) }
        installCallbacks(cbs)

        var opt: OpaquePointer?
        guard nghttp2_option_new(&opt) == 0, let opt else { throw HTTP2SessionError(code: NGHTTP2_ERR_NOMEM.rawValue) }
        defer { nghttp2_option_del(opt) }
        // The owner opens the windows as the body is taken (`consume`).
        nghttp2_option_set_no_auto_window_update(opt, 1)
        if client {
            // Until the server's SETTINGS say otherwise (RFC 9113 leaves it unlimited).
            nghttp2_option_set_peer_max_concurrent_streams(opt, UInt32(clamping: settings.maxConcurrentStreams))
        } else {
            nghttp2_option_set_stream_reset_rate_limit(
                opt, UInt64(max(1, settings.streamResetBurst)), UInt64(max(1, settings.streamResetPerSecond.rounded(.up))))
        }
        // nghttp2 will not send a HEADERS frame whose estimate (12 bytes a
        // field more than the names and values) passes 64 KiB by default, and
        // drops it without closing the stream: a 63 KiB upstream head of many
        // fields hung its client stream, and a large client head would hang
        // on an h2 upstream. Every head is bounded by the gateway's own limits
        // long before this.
        nghttp2_option_set_max_send_header_block_length(opt, Self.maxSendHeaderBlock)
        // CONTINUATION floods (CVE-2024-27316's kind) come from clients; an
        // upstream's large head in many frames must fail its own stream (a
        // 502), not the connection every other client's stream shares.
        nghttp2_option_set_max_continuations(opt, client ? 64 : 8)
        nghttp2_option_set_max_settings(opt, 32)
        nghttp2_option_set_max_outbound_ack(opt, 1000)

        // user_data is set once the object exists; until then no callback can run.
        var s: OpaquePointer?
        let rv = client ? nghttp2_session_client_new2(&s, cbs, nil, opt) : nghttp2_session_server_new2(&s, cbs, nil, opt)
        guard rv == 0, let s else { throw HTTP2SessionError(code: rv) }
        let session = HTTP2Session(
            raw: s, settings: settings, allocator: allocator, headCategory: client ? NGHTTP2_HCAT_RESPONSE : NGHTTP2_HCAT_REQUEST)
        nghttp2_session_set_user_data(s, Unmanaged.passUnretained(session).toOpaque())

        // A server bounds its peer's streams; a client refuses push.
        let first =
            client
            ? nghttp2_settings_entry(settings_id: Int32(NGHTTP2_SETTINGS_ENABLE_PUSH.rawValue), value: 0)
            : nghttp2_settings_entry(
                settings_id: Int32(NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS.rawValue),
                value: UInt32(clamping: settings.maxConcurrentStreams))
        var entries = [
            first,
            nghttp2_settings_entry(
                settings_id: Int32(NGHTTP2_SETTINGS_INITIAL_WINDOW_SIZE.rawValue), value: settings.initialStreamWindow),
            nghttp2_settings_entry(
                settings_id: Int32(NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE.rawValue),
                value: UInt32(clamping: settings.maxHeaderListBytes)),
            // RFC 9218: no RFC 7540 priority tree. A proxy answers each stream
            // as its upstream does, so the tree would only order writes; kept,
            // nghttp2 builds it from every PRIORITY frame and keeps closed
            // streams in it, work a peer can multiply. nghttpx sends it too.
            nghttp2_settings_entry(settings_id: Int32(NGHTTP2_SETTINGS_NO_RFC7540_PRIORITIES.rawValue), value: 1),
        ]
        let srv = nghttp2_submit_settings(s, UInt8(NGHTTP2_FLAG_NONE.rawValue), &entries, entries.count)
        guard srv == 0 else { throw HTTP2SessionError(code: srv) }
        _ = nghttp2_session_set_local_window_size(s, UInt8(NGHTTP2_FLAG_NONE.rawValue), 0, settings.connectionWindow)
        return session
    }

    /// Above any head the gateway lets through (`limits.maxHeaderListBytes`
    /// is at most 8 MiB; upstream heads 64 KiB) with nghttp2's per-field estimate.
    static let maxSendHeaderBlock = 32 << 20

    /// The only place the session is freed: nothing else holds `raw`.
    deinit {
        nghttp2_session_del(raw)
    }

    // MARK: state

    var wantsRead: Bool { nghttp2_session_want_read(raw) != 0 }
    /// Trailers queued by a data source's last read count as output: they are
    /// submitted at the next drain, which may be nghttp2's only reason to write.
    var wantsWrite: Bool { !trailersDue.isEmpty || nghttp2_session_want_write(raw) != 0 }
    /// Streams whose head has begun and that nghttp2 has not closed.
    var hasOpenStreams: Bool { slots.open > 0 }
    /// The peer's SETTINGS_MAX_CONCURRENT_STREAMS (before its SETTINGS: the
    /// assumed `settings.maxConcurrentStreams`).
    var remoteMaxConcurrentStreams: Int {
        Int(nghttp2_session_get_remote_settings(raw, NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS))
    }

    /// The head being received when the session failed, if any: what was
    /// decoded of it, its block's size on the wire so far, and whether it had
    /// passed `maxHeaderListBytes`. Handed over once.
    func takeUnfinishedHead() -> (head: HTTP2HeaderBlock, wireBytes: Int, overLimit: Bool)? {
        guard block.streamId != 0, block.isHead, !block.handedOver else { return nil }
        block.handedOver = true
        return (block.head, blockWireBytes, block.overLimit)
    }

    // MARK: bytes in, bytes out

    /// Hands `bytes` to nghttp2; what they caused is appended to `events`
    /// (also when it throws: a bad preface, a flood nghttp2 detected, … —
    /// nghttp2 then queued a GOAWAY if it could).
    func feed(_ bytes: ByteBuffer, into events: inout [Event]) throws(HTTP2SessionError) {
        assertOutsideCallbacks()
        let rv = recording(into: &events) { () -> Int in
            let n = bytes.withUnsafeReadableBytes { raw -> Int in
                guard let base = raw.baseAddress else { return 0 }
                inbound = (base, raw.count, bytes)
                insideNghttp2 = true
                defer {
                    insideNghttp2 = false
                    inbound = nil
                }
                return nghttp2_session_mem_recv(self.raw, base.assumingMemoryBound(to: UInt8.self), raw.count)
            }
            rx.reportUnfinishedBlock()
            return n
        }
        if rv < 0 { throw HTTP2SessionError(code: rv) }
    }

    /// Moves what nghttp2 has to send into `out` (allocated with the first
    /// byte if nil) until nothing is left or `out` holds `maxOutputPerDrain`:
    /// true in that case, when more is waiting. Streams closed or drained
    /// meanwhile are appended to `events`.
    func drain(into out: inout ByteBuffer?, events: inout [Event]) throws(HTTP2SessionError) -> Bool {
        assertOutsideCallbacks()
        let limit = settings.maxOutputPerDrain
        let allocator = self.allocator
        let result: Int = recording(into: &events) {
            while true {
                if !trailersDue.isEmpty { submitDueTrailers() }
                var ptr: UnsafePointer<UInt8>?
                insideNghttp2 = true
                let n = nghttp2_session_mem_send(raw, &ptr)
                insideNghttp2 = false
                if n < 0 { return n }
                guard n > 0, let ptr else {
                    if trailersDue.isEmpty { return 0 }
                    continue
                }
                if out == nil { out = allocator.buffer(capacity: max(4096, n)) }
                out?.writeBytes(UnsafeRawBufferPointer(start: ptr, count: n))
                if let o = out, o.readableBytes >= limit { return 1 }
            }
        }
        if result < 0 { throw HTTP2SessionError(code: result) }
        return result > 0
    }

    /// Runs `body` with `events` as the callbacks' record: the caller's array
    /// is swapped in and back, so its capacity serves every call.
    private func recording<R>(into events: inout [Event], _ body: () -> R) -> R {
        swap(&events, &self.events)
        defer { swap(&events, &self.events) }
        return body()
    }

    // MARK: submitting (never from a callback)

    /// A response the owner made itself; its headers are sent as they are
    /// (names lower-cased). No `body`: the HEADERS end the stream.
    func submitResponse(
        _ streamId: Int32, status: Int, headers: HTTPHeaders, body: (any HTTP2DataSource)?
    ) throws(HTTP2SessionError) {
        assertOutsideCallbacks()
        let rv = withNVScratch { bytes, spans, nva -> Int32 in
            Self.appendNV(":status", String(status), flags: 0, bytes: &bytes, spans: &spans)
            for (name, value) in headers {
                let flags = ASCII.equalsCI(name, "x-request-id") ? Self.neverIndexed : 0
                Self.appendNV(name, value, flags: flags, bytes: &bytes, spans: &spans)
            }
            return bytes.withUnsafeMutableBufferPointer { buf -> Int32 in
                guard let base = buf.baseAddress else { return NGHTTP2_ERR_INVALID_ARGUMENT.rawValue }
                for s in spans { nva.append(s.nv(base)) }
                return submit(streamId, nva, nva.count, body: body)
            }
        }
        if rv != 0 { throw HTTP2SessionError(code: rv) }
    }

    /// An upstream's head: the header list points straight into the parsed
    /// head's bytes (names already lower-cased, hop-by-hop fields marked), the
    /// request id's own bytes and static names, so no field is copied before
    /// nghttp2 copies it into its own frame. `requestId` replaces the
    /// upstream's X-Request-Id.
    func submitUpstreamResponse(
        _ streamId: Int32, head: UpstreamResponseHead, requestId: String, body: (any HTTP2DataSource)?
    ) throws(HTTP2SessionError) {
        try submitUpstreamHead(streamId, head: head, requestId: requestId, interim: false, body: body)
    }

    /// An upstream's interim (1xx) head: a HEADERS frame that neither
    /// answers nor ends the stream (nghttp2 checks the status is 1xx).
    func submitInterimHead(_ streamId: Int32, head: UpstreamResponseHead) throws(HTTP2SessionError) {
        try submitUpstreamHead(streamId, head: head, requestId: nil, interim: true, body: nil)
    }

    /// `requestId`: replaces the upstream's (nil: the head carries none).
    private func submitUpstreamHead(
        _ streamId: Int32, head: UpstreamResponseHead, requestId: String?, interim: Bool, body: (any HTTP2DataSource)?
    ) throws(HTTP2SessionError) {
        assertOutsideCallbacks()
        var id = requestId ?? ""  // `withUTF8` may make a bridged string contiguous: a copy to do it on
        let rv = Self.withStatusBytes(head.status) { status -> Int32 in
            id.withUTF8 { idBytes -> Int32 in
                head.bytes.withUnsafeBufferPointer { upstream -> Int32 in
                    // The list on the stack (nghttp2 copies it before it returns).
                    withUnsafeTemporaryAllocation(of: nghttp2_nv.self, capacity: head.fields.count + 2) { nva -> Int32 in
                        guard let nvBase = nva.baseAddress, let sb = status.baseAddress else {
                            return NGHTTP2_ERR_INVALID_ARGUMENT.rawValue
                        }
                        // :status first (pseudo-headers precede fields), then the upstream's, then the id.
                        nvBase.initialize(
                            to: nghttp2_nv(
                                name: Self.nameBytes(Self.statusName), value: UnsafeMutablePointer(mutating: sb),
                                namelen: Self.statusName.utf8CodeUnitCount, valuelen: status.count, flags: 0))
                        var n = 1
                        if let ub = upstream.baseAddress {
                            let upstreamBase = UnsafeMutablePointer(mutating: ub)
                            for f in head.fields where f.forward {
                                (nvBase + n).initialize(
                                    to: nghttp2_nv(
                                        name: upstreamBase + f.nameStart, value: upstreamBase + f.valueStart,
                                        namelen: f.nameLength, valuelen: f.valueLength, flags: 0))
                                n += 1
                            }
                        }
                        if requestId != nil {
                            // An empty id has no base address: nghttp2 reads no byte of a zero-length value.
                            let idValue = idBytes.baseAddress.map { UnsafeMutablePointer(mutating: $0) } ?? Self.nameBytes(Self.statusName)
                            (nvBase + n).initialize(
                                to: nghttp2_nv(
                                    name: Self.nameBytes(Self.requestIdName), value: idValue,
                                    namelen: Self.requestIdName.utf8CodeUnitCount, valuelen: idBytes.count, flags: Self.neverIndexed))
                            n += 1
                        }
                        if interim {
                            let rv = nghttp2_submit_headers(raw, UInt8(NGHTTP2_FLAG_NONE.rawValue), streamId, nil, nvBase, n, nil)
                            return rv < 0 ? rv : 0
                        }
                        return submit(streamId, nvBase, n, body: body)
                    }
                }
            }
        }
        if rv != 0 { throw HTTP2SessionError(code: rv) }
    }

    private static let statusName: StaticString = ":status"
    private static let requestIdName: StaticString = "x-request-id"

    /// A literal's bytes for a header list: they live as long as the program,
    /// and nghttp2 only reads (and copies) what the list points at.
    @inline(__always)
    private static func nameBytes(_ name: StaticString) -> UnsafeMutablePointer<UInt8> {
        UnsafeMutablePointer(mutating: name.utf8Start)
    }

    /// `status` as the decimal digits of `:status`, without a `String` for
    /// the three-digit codes every response has.
    private static func withStatusBytes<R>(_ status: Int, _ body: (UnsafeBufferPointer<UInt8>) -> R) -> R {
        guard (100...999).contains(status) else {
            var text = String(status)
            return text.withUTF8(body)
        }
        let zero = UInt8(ascii: "0")
        var digits = (zero &+ UInt8(status / 100), zero &+ UInt8(status / 10 % 10), zero &+ UInt8(status % 10))
        return withUnsafeBytes(of: &digits) { raw in
            body(UnsafeBufferPointer(start: raw.baseAddress?.assumingMemoryBound(to: UInt8.self), count: 3))
        }
    }

    /// A value new with every message (a request id, a trust signature)
    /// would only churn the HPACK dynamic table, pushing out the fields that
    /// do repeat (server, content-type, the forwarding fields): it is sent
    /// never-indexed, on responses and on requests to h2 upstreams.
    private static let neverIndexed = UInt8(NGHTTP2_NV_FLAG_NO_INDEX.rawValue)

    /// Bytes in the HPACK encoder's dynamic table (tests: what was indexed).
    var encoderTableSize: Int { nghttp2_session_get_hd_deflate_dynamic_table_size(raw) }

    /// nghttp2 copies the list and the provider before it returns.
    private func submit(
        _ streamId: Int32, _ nva: UnsafePointer<nghttp2_nv>, _ count: Int, body: (any HTTP2DataSource)?
    ) -> Int32 {
        guard let body else { return nghttp2_submit_response(raw, streamId, nva, count, nil) }
        // A stream nghttp2 already closed has no slot and keeps no source: nothing will read it.
        let slot = slot(of: streamId)
        var provider = nghttp2_data_provider(
            source: nghttp2_data_source(ptr: slot.flatMap(Self.token)), read_callback: Self.readCallback)
        let rv = nghttp2_submit_response(raw, streamId, nva, count, &provider)
        if rv == 0, let slot { slots[slot].source = body }
        return rv
    }

    /// A request on a client session, its header list as `head` holds it.
    /// No `body`: the HEADERS end the stream. Returns the stream's id.
    func submitRequest(_ head: UpstreamH2Head, body: (any HTTP2DataSource)?) throws(HTTP2SessionError) -> Int32 {
        assertOutsideCallbacks()
        // nghttp2 opens the stream only when its HEADERS go out, so the slot is
        // handed over with the request (its id is known once submit returns).
        let slot = allocSlot(0)
        let token = Self.token(slot)
        let id = withNVScratch { _, _, nva -> Int32 in
            head.bytes.withUnsafeBufferPointer { buf -> Int32 in
                guard let b = buf.baseAddress else { return NGHTTP2_ERR_INVALID_ARGUMENT.rawValue }
                let base = UnsafeMutablePointer(mutating: b)
                head.forEachSpan { s, never in  // pseudo-headers first
                    nva.append(
                        nghttp2_nv(
                            name: base + s.nameStart, value: base + s.valueStart, namelen: s.nameLength,
                            valuelen: s.valueLength, flags: never ? Self.neverIndexed : 0))
                }
                // nghttp2 copies the list (and the provider) before it returns.
                guard body != nil else { return nghttp2_submit_request(raw, nil, nva, nva.count, nil, token) }
                var provider = nghttp2_data_provider(source: nghttp2_data_source(ptr: token), read_callback: Self.readCallback)
                return nghttp2_submit_request(raw, nil, nva, nva.count, &provider, token)
            }
        }
        guard id > 0 else {
            freeSlot(slot)
            throw HTTP2SessionError(code: id)
        }
        slots[slot].id = id
        slots[slot].source = body
        return id
    }

    /// Trailers for `streamId`, sent after its source's last byte (the source
    /// must not have ended yet; the owner resumes it to deliver the end).
    func setTrailers(_ streamId: Int32, _ fields: HTTPHeaders) {
        guard !fields.isEmpty, let slot = slot(of: streamId) else { return }
        slots[slot].trailers = fields
    }

    private func submitDueTrailers() {
        let due = trailersDue
        trailersDue.removeAll(keepingCapacity: true)
        for id in due {
            guard let slot = slot(of: id), let fields = slots[slot].trailers else { continue }
            slots[slot].trailers = nil
            _ = withNVScratch { bytes, spans, nva -> Int32 in
                for (name, value) in fields {
                    Self.appendNV(name, value, flags: 0, bytes: &bytes, spans: &spans)
                }
                return bytes.withUnsafeMutableBufferPointer { buf -> Int32 in
                    guard let base = buf.baseAddress else { return NGHTTP2_ERR_INVALID_ARGUMENT.rawValue }
                    for s in spans { nva.append(s.nv(base)) }
                    return nghttp2_submit_trailer(raw, id, nva, nva.count)
                }
            }
        }
    }

    /// A PING whose ACK (`pingAcked`) shows the peer alive.
    func ping() {
        assertOutsideCallbacks()
        _ = nghttp2_submit_ping(raw, UInt8(NGHTTP2_FLAG_NONE.rawValue), nil)
    }

    /// A deferred stream's source has bytes (or its end) again: true when
    /// nghttp2 was waiting for it, so there is output to drain.
    func resume(_ streamId: Int32) -> Bool {
        assertOutsideCallbacks()
        guard let slot = slot(of: streamId), slots.undefer(slot) else { return false }
        _ = nghttp2_session_resume_data(raw, streamId)
        return true
    }

    /// Client side: the connection's window opens as response bytes arrive
    /// (one stream held back must not stall the others), the stream's only
    /// as its client takes them (`consumeStream`).
    func consumeConnection(bytes: Int) {
        assertOutsideCallbacks()
        guard bytes > 0 else { return }
        _ = nghttp2_session_consume_connection(raw, bytes)
    }

    func consumeStream(_ streamId: Int32, bytes: Int) {
        assertOutsideCallbacks()
        guard bytes > 0 else { return }
        _ = nghttp2_session_consume_stream(raw, streamId, bytes)
    }

    /// `bytes` of the stream's body were taken: open the stream's and the
    /// connection's windows (the connection's also when the stream is gone).
    func consume(_ streamId: Int32, bytes: Int) {
        assertOutsideCallbacks()
        guard bytes > 0 else { return }
        _ = nghttp2_session_consume(raw, streamId, bytes)
    }

    func reset(_ streamId: Int32, errorCode: UInt32) {
        assertOutsideCallbacks()
        if !isClient, nghttp2_session_find_stream(raw, streamId) != nil { resetsAccounted.insert(streamId) }
        _ = nghttp2_submit_rst_stream(raw, UInt8(NGHTTP2_FLAG_NONE.rawValue), streamId, errorCode)
    }

    /// Graceful: GOAWAY(NO_ERROR) naming the last stream processed; open
    /// streams finish.
    func goAway() {
        assertOutsideCallbacks()
        let last = nghttp2_session_get_last_proc_stream_id(raw)
        _ = nghttp2_submit_goaway(raw, UInt8(NGHTTP2_FLAG_NONE.rawValue), last, NGHTTP2_NO_ERROR.rawValue, nil, 0)
    }

    /// GOAWAY with `errorCode`; nghttp2 wants nothing more once it is sent.
    func terminate(errorCode: UInt32) {
        assertOutsideCallbacks()
        _ = nghttp2_session_terminate_session(raw, errorCode)
    }

    @inline(__always)
    private func assertOutsideCallbacks() {
        assert(!insideNghttp2, "nghttp2 re-entered from a callback")
    }

    // MARK: stream slots

    /// A slot's number as nghttp2 keeps it (never nil: numbers start at 1).
    private static func token(_ slot: Int) -> UnsafeMutableRawPointer? {
        UnsafeMutableRawPointer(bitPattern: slot &+ 1)
    }

    /// The slot `token` names, if it still holds stream `id`.
    @inline(__always)
    private func slot(_ token: UnsafeMutableRawPointer?, _ id: Int32) -> Int? {
        guard let token else { return nil }
        return live(Int(bitPattern: token) &- 1, id)
    }

    @inline(__always)
    private func live(_ slot: Int, _ id: Int32) -> Int? { slots.live(slot, id) }

    /// The open stream's slot (nghttp2 finds the stream; closed streams have none).
    private func slot(of id: Int32) -> Int? {
        if let slot = slot(nghttp2_session_get_stream_user_data(raw, id), id) { return slot }
        // A client's request is a stream to nghttp2 only once its HEADERS are
        // out; until then (trailers set, a body resumed right after submit)
        // its slot is found by its id. Rare, and over at most the open streams.
        guard isClient, id > 0 else { return nil }
        return slots.states.firstIndex { $0.id == id }
    }

    private func allocSlot(_ id: Int32) -> Int { slots.alloc(id) }

    private func freeSlot(_ slot: Int) { slots.release(slot) }

    // MARK: header lists

    private struct NVSpan {
        var nameStart: Int
        var nameLen: Int
        var valueStart: Int
        var valueLen: Int
        var flags: UInt8

        func nv(_ base: UnsafeMutablePointer<UInt8>) -> nghttp2_nv {
            nghttp2_nv(name: base + nameStart, value: base + valueStart, namelen: nameLen, valuelen: valueLen, flags: flags)
        }
    }
    private var nvBytes: [UInt8] = []
    private var nvSpans: [NVSpan] = []
    private var nvArray: [nghttp2_nv] = []

    /// Lends the scratch arrays, emptied. They are moved out of the properties
    /// (no copy, no per-byte exclusivity checks on class storage) and handed
    /// back after, so their capacity serves the next response. The header
    /// list's pointers are only valid inside `body`.
    private func withNVScratch(_ body: (inout [UInt8], inout [NVSpan], inout [nghttp2_nv]) -> Int32) -> Int32 {
        var bytes: [UInt8] = []
        var spans: [NVSpan] = []
        var nva: [nghttp2_nv] = []
        swap(&bytes, &nvBytes)
        swap(&spans, &nvSpans)
        swap(&nva, &nvArray)
        bytes.removeAll(keepingCapacity: true)
        spans.removeAll(keepingCapacity: true)
        nva.removeAll(keepingCapacity: true)
        defer {
            nva.removeAll(keepingCapacity: true)
            swap(&bytes, &nvBytes)
            swap(&spans, &nvSpans)
            swap(&nva, &nvArray)
        }
        return body(&bytes, &spans, &nva)
    }

    private static func appendNV(
        _ name: String, _ value: String, flags: UInt8, bytes: inout [UInt8], spans: inout [NVSpan]
    ) {
        let ns = bytes.count
        // One bulk copy, then lower-case in place (not a checked append per byte).
        bytes.append(contentsOf: name.utf8)
        let vs = bytes.count
        bytes.withUnsafeMutableBufferPointer { b in
            for i in ns..<vs { b[i] = ASCII.lower(b[i]) }
        }
        bytes.append(contentsOf: value.utf8)
        spans.append(NVSpan(nameStart: ns, nameLen: vs - ns, valueStart: vs, valueLen: bytes.count - vs, flags: flags))
    }

    // MARK: nghttp2 callbacks (record only)

    fileprivate func cbBeginFrame(_ hd: UnsafePointer<nghttp2_frame_hd>) -> Int32 {
        switch UInt32(hd.pointee.type) {
        case NGHTTP2_HEADERS.rawValue: blockWireBytes = hd.pointee.length
        case NGHTTP2_CONTINUATION.rawValue: blockWireBytes += hd.pointee.length
        default: break
        }
        return 0
    }

    fileprivate func cbBeginHeaders(_ frame: UnsafePointer<nghttp2_frame>) -> Int32 {
        guard frame.pointee.hd.type == UInt8(NGHTTP2_HEADERS.rawValue) else { return 0 }
        let id = frame.pointee.hd.stream_id
        let cat = frame.pointee.headers.cat
        let isHead: Bool
        let slot: Int?
        if isClient {
            slot = self.slot(of: id)
            // A final head after a 1xx arrives as HCAT_HEADERS: a head until one was final.
            isHead = cat == headCategory || (cat == NGHTTP2_HCAT_HEADERS && slot.map { !slots[$0].finalHeadSeen } == true)
        } else if cat == headCategory {
            // A request opens the stream's slot. Setting stream_user_data from
            // this callback is what nghttp2 documents it for (it calls no callback).
            isHead = true
            let s = allocSlot(id)
            if nghttp2_session_set_stream_user_data(raw, id, Self.token(s)) != 0 {
                freeSlot(s)  // cannot happen (nghttp2 just opened the stream); nothing would free it
                slot = nil
            } else {
                slot = s
            }
        } else {
            isHead = false
            slot = self.slot(of: id)
        }
        rx.beginBlock(id, isHead: isHead, slot: slot)
        return 0
    }

    fileprivate func cbHeader(
        _ frame: UnsafePointer<nghttp2_frame>, _ name: UnsafeBufferPointer<UInt8>, _ value: UnsafeBufferPointer<UInt8>
    ) -> Int32 {
        let id = frame.pointee.hd.stream_id
        // One exclusive access to `block` per field, whatever the field touches.
        guard block.add(id, name, value, limit: settings.maxHeaderListBytes, client: isClient) else {
            // A head reset this way gets no answer (it would have been a 431):
            // the stream's close tells its owner.
            if !block.isHead {
                events.append(.trailersTooLarge(id))
                // Its reset is charged as this event, not again as the peer's.
                if !isClient { resetsAccounted.insert(id) }
            }
            return NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE.rawValue
        }
        return 0
    }

    /// `bytes` as a `String`: `cached` when it has exactly these bytes (a
    /// retain), else a new one, kept in `cached` for the next request. The
    /// same string `String(decoding:as:)` would make: a repaired one's bytes
    /// differ from the raw ones, so it is never matched.
    private static func string(_ bytes: UnsafeBufferPointer<UInt8>, reusing cached: inout String) -> String {
        let same = cached.utf8.withContiguousStorageIfAvailable { equals(bytes, $0) } ?? false
        if !same { cached = String(decoding: bytes, as: UTF8.self) }
        return cached
    }

    @inline(__always)
    private static func equals(_ a: UnsafeBufferPointer<UInt8>, _ b: UnsafeBufferPointer<UInt8>) -> Bool {
        guard a.count == b.count else { return false }
        guard let pa = a.baseAddress, let pb = b.baseAddress else { return true }  // both empty
        return memcmp(pa, pb, a.count) == 0
    }

    @inline(__always)
    private static func equals(_ a: UnsafeBufferPointer<UInt8>, _ literal: StaticString) -> Bool {
        equals(a, UnsafeBufferPointer(start: literal.utf8Start, count: literal.utf8CodeUnitCount))
    }

    /// Common request field names as literals (no allocation, no UTF-8
    /// check, no reference counting; nghttp2 hands names over lower-case),
    /// with the `HeaderBlock.recent` slot of those whose values repeat (else -1).
    private static func knownName(_ name: UnsafeBufferPointer<UInt8>) -> (name: String, repeated: Int)? {
        switch name.count {
        case 2: if equals(name, "te") { return ("te", -1) }
        case 6:
            if equals(name, "accept") { return ("accept", 1) }
            if equals(name, "origin") { return ("origin", -1) }
        case 10: if equals(name, "user-agent") { return ("user-agent", 0) }
        case 12:
            if equals(name, "content-type") { return ("content-type", -1) }
            if equals(name, "x-request-id") { return ("x-request-id", -1) }
        case 13:
            if equals(name, "authorization") { return ("authorization", -1) }
            if equals(name, "cache-control") { return ("cache-control", -1) }
        case 14: if equals(name, "content-length") { return ("content-length", -1) }
        case 15:
            if equals(name, "accept-encoding") { return ("accept-encoding", 2) }
            if equals(name, "accept-language") { return ("accept-language", 3) }
            if equals(name, "x-forwarded-for") { return ("x-forwarded-for", -1) }
        default: break
        }
        return nil
    }

    private static func knownMethod(_ value: UnsafeBufferPointer<UInt8>) -> String? {
        switch value.count {
        case 3:
            if equals(value, "GET") { return "GET" }
            if equals(value, "PUT") { return "PUT" }
        case 4:
            if equals(value, "POST") { return "POST" }
            if equals(value, "HEAD") { return "HEAD" }
        case 5: if equals(value, "PATCH") { return "PATCH" }
        case 6: if equals(value, "DELETE") { return "DELETE" }
        case 7:
            if equals(value, "OPTIONS") { return "OPTIONS" }
            if equals(value, "CONNECT") { return "CONNECT" }
        default: break
        }
        return nil
    }

    fileprivate func cbFrameRecv(_ frame: UnsafePointer<nghttp2_frame>) -> Int32 {
        let hd = frame.pointee.hd
        let id = hd.stream_id
        let endStream = hd.flags & UInt8(NGHTTP2_FLAG_END_STREAM.rawValue) != 0
        switch UInt32(hd.type) {
        case NGHTTP2_HEADERS.rawValue:
            if !rx.headersReceived(id, endStream: endStream, client: isClient) {
                // No block of this stream in progress: only its end, if it is open.
                if endStream, slot(of: id) != nil { events.append(.end(id)) }
            }
        case NGHTTP2_DATA.rawValue:
            if endStream {
                events.append(.end(id))
            } else if hd.length <= frame.pointee.data.padlen {
                // No data, padding only or nothing at all (`length` counts the
                // padding and its length byte): budgeted as empty.
                events.append(.emptyDataReceived(id))
            }
        case NGHTTP2_SETTINGS.rawValue:
            if hd.flags & UInt8(NGHTTP2_FLAG_ACK.rawValue) == 0 { events.append(.settingsReceived) }
        case NGHTTP2_RST_STREAM.rawValue:
            // Only an open stream: nghttp2 reports a reset of one long closed
            // too, and no close follows to take its id out again.
            if !isClient, nghttp2_session_find_stream(raw, id) != nil { resetsAccounted.insert(id) }
            events.append(.resetReceived(id))
        case NGHTTP2_PING.rawValue:
            if hd.flags & UInt8(NGHTTP2_FLAG_ACK.rawValue) == 0 {
                events.append(.pingReceived)
            } else {
                events.append(.pingAcked)
            }
        case NGHTTP2_GOAWAY.rawValue:
            events.append(
                .goAwayReceived(lastStreamId: frame.pointee.goaway.last_stream_id, errorCode: frame.pointee.goaway.error_code))
        default:
            break
        }
        return 0
    }

    /// A DATA chunk is passed on as a view of the fed buffer when it is at
    /// least this fraction of the buffer's capacity, else copied.
    static let viewFraction = 8

    fileprivate func cbDataChunk(_ streamId: Int32, _ data: UnsafePointer<UInt8>, _ len: Int) -> Int32 {
        let p = UnsafeRawPointer(data)
        var chunk: ByteBuffer
        // A view keeps the whole fed buffer alive while the chunk waits (for
        // the gate, a free upstream, an upstream slow to take it): a chunk
        // small beside it is copied, so a client sending a byte of body per
        // read cannot make each window byte hold a 64 KiB buffer.
        if let inbound, p >= inbound.base, p + len <= inbound.base + inbound.count,
            len >= inbound.buffer.capacity / Self.viewFraction,
            let slice = inbound.buffer.getSlice(at: inbound.buffer.readerIndex + (p - inbound.base), length: len)
        {
            chunk = slice  // zero copy: a view of the fed buffer
        } else {
            chunk = allocator.buffer(capacity: len)
            chunk.writeBytes(UnsafeRawBufferPointer(start: p, count: len))
        }
        events.append(.data(streamId, chunk))
        return 0
    }

    fileprivate func cbStreamClose(_ streamId: Int32, errorCode: UInt32) -> Int32 {
        if !isClient {
            // Empty in normal traffic (only resets are recorded): no hashing then.
            let accounted = !resetsAccounted.isEmpty && resetsAccounted.remove(streamId) != nil
            if errorCode != NGHTTP2_NO_ERROR.rawValue, !accounted { events.append(.resetForPeerError(streamId)) }
        }
        // stream_user_data is still readable here (nghttp2 documents it so).
        rx.streamClosed(streamId, slot: slot(of: streamId), errorCode: errorCode)
        return 0
    }

    fileprivate func cbRead(
        _ streamId: Int32, _ token: UnsafeMutableRawPointer?, _ buffer: UnsafeMutableRawBufferPointer,
        _ flags: UnsafeMutablePointer<UInt32>
    ) -> Int {
        // Never missing: nghttp2 reads only open streams, whose slot (and source) is kept until they close.
        guard let slot = slot(token, streamId), let source = slots[slot].source else {
            return Int(NGHTTP2_ERR_TEMPORAL_CALLBACK_FAILURE.rawValue)
        }
        switch source.readData(into: buffer) {
        case .deferred:
            slots[slot].deferred = true
            return Int(NGHTTP2_ERR_DEFERRED.rawValue)
        case .bytes(let n, let end, let drained):
            if end {
                flags.pointee |= NGHTTP2_DATA_FLAG_EOF.rawValue
                if slots[slot].trailers != nil {
                    // END_STREAM goes on the trailers, submitted once mem_send returns.
                    flags.pointee |= NGHTTP2_DATA_FLAG_NO_END_STREAM.rawValue
                    trailersDue.append(streamId)
                }
            }
            if drained { events.append(.drained(streamId)) }
            return n
        }
    }

    fileprivate static let readCallback: nghttp2_data_source_read_callback = { _, streamId, buf, length, flags, source, userData in
        guard let session = h2Session(userData), let buf, let flags else {
            return Int(NGHTTP2_ERR_CALLBACK_FAILURE.rawValue)
        }
        return session.cbRead(streamId, source?.pointee.ptr, UnsafeMutableRawBufferPointer(start: buf, count: length), flags)
    }

    private static func installCallbacks(_ cbs: OpaquePointer) {
        nghttp2_session_callbacks_set_on_begin_frame_callback(cbs) { _, hd, userData in
            guard let session = h2Session(userData), let hd else { return 0 }
            return session.cbBeginFrame(hd)
        }
        nghttp2_session_callbacks_set_on_begin_headers_callback(cbs) { _, frame, userData in
            guard let session = h2Session(userData), let frame else { return 0 }
            return session.cbBeginHeaders(frame)
        }
        nghttp2_session_callbacks_set_on_header_callback(cbs) { _, frame, name, namelen, value, valuelen, _, userData in
            guard let session = h2Session(userData), let frame, let name, let value else { return 0 }
            return session.cbHeader(
                frame, UnsafeBufferPointer(start: name, count: namelen), UnsafeBufferPointer(start: value, count: valuelen))
        }
        nghttp2_session_callbacks_set_on_frame_recv_callback(cbs) { _, frame, userData in
            guard let session = h2Session(userData), let frame else { return 0 }
            return session.cbFrameRecv(frame)
        }
        nghttp2_session_callbacks_set_on_data_chunk_recv_callback(cbs) { _, _, streamId, data, len, userData in
            guard let session = h2Session(userData), let data else { return 0 }
            return session.cbDataChunk(streamId, data, len)
        }
        nghttp2_session_callbacks_set_on_stream_close_callback(cbs) { _, streamId, errorCode, userData in
            guard let session = h2Session(userData) else { return 0 }
            return session.cbStreamClose(streamId, errorCode: errorCode)
        }
    }
}

/// The session's `user_data`: an unretained pointer to the `HTTP2Session`, which deletes the nghttp2 session in `deinit`.
private func h2Session(_ userData: UnsafeMutableRawPointer?) -> HTTP2Session? {
    guard let userData else { return nil }
    return Unmanaged<HTTP2Session>.fromOpaque(userData).takeUnretainedValue()
}
