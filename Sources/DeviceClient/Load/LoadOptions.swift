/// What `assertgate-device load` runs.
public struct LoadOptions: Sendable {
    public var target: GatewayURL
    public var prefix = "/assertgate/v1"
    public var method = "GET"
    public var path = "/"
    public var body: [UInt8] = []
    public var connections = 1
    /// Concurrent streams per connection; with assertions, one device key each.
    public var streams = 1
    /// Measured seconds (after the warm-up); used when `requests` is nil.
    public var duration: Double = 10
    /// Measured requests in total (after the warm-up), instead of a duration.
    public var requests: Int?
    public var warmup: Double = 0
    /// Send no assertion headers (measures the same route in passthrough mode).
    public var passthrough = false
    /// Attestations in flight at once during setup.
    public var attestConcurrency = 8
    public var userId: String?
    /// Total requests per second across all connections (paced per stream
    /// slot); nil = as fast as responses come back (closed loop).
    public var rate: Double?
    /// With `rate`: sign every slot's assertions before the run instead of
    /// just before each request, so the measured window holds no client
    /// ECDSA work competing with the gateway for the machine's cores.
    public var presign = false
    /// Keep every measured request's send time and latency (`LoadReport.samples`).
    public var recordSamples = false
    /// A process (the gateway) whose CPU time over the measured window is reported.
    public var cpuPid: Int32?
    /// A fresh DeviceCheck device token on every request (nil: none).
    public var deviceTokens: LoadDeviceTokens?
    public var http2 = HTTP2ClientConfiguration()

    public init(target: GatewayURL) {
        self.target = target
    }
}

/// Device tokens for `deviceCheck` routes: the gateway spends a token on its
/// first use, so a load of N requests needs N tokens; each request gets its
/// own, made just before it is sent.
public struct LoadDeviceTokens: Sendable {
    /// The request header that carries the token.
    public var header: String
    /// The token for a stream slot's n-th request (n from 1; warm-up included).
    public var make: @Sendable (_ slot: LoadSlot, _ n: Int) throws -> String

    public init(header: String = "AssertGate-Device-Token", make: @escaping @Sendable (_ slot: LoadSlot, _ n: Int) throws -> String) {
        self.header = header
        self.make = make
    }
}

/// A stream slot: its connection and its place on it.
public struct LoadSlot: Sendable, Hashable {
    public var connection: Int
    public var stream: Int

    public init(connection: Int, stream: Int) {
        self.connection = connection
        self.stream = stream
    }
}
