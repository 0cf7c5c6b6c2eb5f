import NIOCore

/// gRPC's `grpc-timeout` request field (gRPC over HTTP/2, "Requests"): at
/// most 8 ASCII digits and one unit, `H` `M` `S` `m` `u` `n`. It caps how long
/// the gateway waits for the upstream's answer, so a client that has given
/// up does not hold an upstream stream past its deadline.
enum GRPCTimeout {
    /// nil when absent or malformed (then the route's `responseTimeout` alone applies).
    static func parse(_ value: String?) -> TimeAmount? {
        guard let value else { return nil }
        let bytes = Array(value.utf8)
        guard (2...9).contains(bytes.count), let unit = bytes.last else { return nil }
        var n: Int64 = 0
        for b in bytes.dropLast() {
            guard b >= UInt8(ascii: "0"), b <= UInt8(ascii: "9") else { return nil }
            n = n * 10 + Int64(b - UInt8(ascii: "0"))
        }
        switch unit {
        case UInt8(ascii: "H"): return .hours(n)
        case UInt8(ascii: "M"): return .minutes(n)
        case UInt8(ascii: "S"): return .seconds(n)
        case UInt8(ascii: "m"): return .milliseconds(n)
        case UInt8(ascii: "u"): return .microseconds(n)
        case UInt8(ascii: "n"): return .nanoseconds(n)
        default: return nil
        }
    }
}
