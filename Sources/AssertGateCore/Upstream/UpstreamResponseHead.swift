/// An upstream's HTTP/1.1 response head as parsed bytes: the head block with
/// header names lower-cased in place, and where each field lies in it. The
/// downstream turns it into an HTTP/2 header list pointing into `bytes`, or
/// into `HTTPHeaders` for an HTTP/1.1 client, without a `String` per field.
struct UpstreamResponseHead {
    struct Field {
        var nameStart: Int
        var nameLength: Int
        var valueStart: Int
        var valueLength: Int
        /// False for hop-by-hop fields (RFC 9110 §7.6.1), those a `Connection`
        /// field lists, and `X-Request-Id` (the gateway sets its own).
        var forward: Bool
    }

    var status: Int
    var bytes: [UInt8]
    var fields: [Field]
    /// An HTTP/2 upstream ended the stream with this head (no body, no
    /// trailers: gRPC's trailers-only answer). An HTTP/2 client must get it
    /// the same way, END_STREAM on the HEADERS: gRPC clients refuse an
    /// empty DATA frame where trailers belong.
    var endsStream = false

    /// The forwarded fields as (name, value) byte slices of `bytes`.
    func forEachForwarded(_ body: (ArraySlice<UInt8>, ArraySlice<UInt8>) -> Void) {
        for f in fields where f.forward {
            body(
                bytes[f.nameStart..<f.nameStart + f.nameLength],
                bytes[f.valueStart..<f.valueStart + f.valueLength])
        }
    }
}
