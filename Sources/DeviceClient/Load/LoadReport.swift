import Histogram

/// One measured request: when it was sent (µs after the measured window
/// opened), its latency (µs) and its connection.
public struct LatencySample: Sendable {
    public var sentMicros: Int64
    public var latencyMicros: UInt64
    public var connection: Int
}

/// The outcome of one load run; `--json` prints it as is (without `samples`).
public struct LoadReport: Codable, Sendable {
    public struct Latency: Codable, Sendable {
        public var p50: Double
        public var p90: Double
        public var p99: Double
        public var p999: Double
        public var max: Double
        public var mean: Double
    }

    public var connections: Int
    public var streamsPerConnection: Int
    public var keys: Int
    public var passthrough: Bool
    public var requests: Int
    public var successes: Int
    /// "<status> <reason>" (reason from the problem+json body when present) or "error: …".
    public var failures: [String: Int]
    public var elapsedSeconds: Double
    public var requestsPerSecond: Double
    /// Milliseconds.
    public var latencyMs: Latency
    /// CPU seconds the `--cpu-pid` process used during the measured window.
    public var targetCPUSeconds: Double?
    /// Every measured request, in completion order per connection, when
    /// `LoadOptions.recordSamples` is set.
    public var samples: [LatencySample] = []
    /// CLOCK_MONOTONIC nanoseconds at which the measured window opened
    /// (to line `samples` up with traces such as `perf record -k CLOCK_MONOTONIC`).
    public var measuredFromMonotonicNanos: UInt64 = 0

    private enum CodingKeys: String, CodingKey {
        case connections, streamsPerConnection, keys, passthrough, requests, successes, failures, elapsedSeconds
        case requestsPerSecond, latencyMs, targetCPUSeconds
    }

    init(options: LoadOptions, keys: Int, requests: Int, successes: Int, failures: [String: Int],
         elapsedSeconds: Double, histogram: Histogram<UInt64>) {
        self.connections = options.connections
        self.streamsPerConnection = options.streams
        self.keys = keys
        self.passthrough = options.passthrough
        self.requests = requests
        self.successes = successes
        self.failures = failures
        self.elapsedSeconds = elapsedSeconds
        self.requestsPerSecond = elapsedSeconds > 0 ? Double(requests) / elapsedSeconds : 0
        // The histogram holds microseconds.
        func ms(_ us: UInt64) -> Double { Double(us) / 1000 }
        let empty = histogram.totalCount == 0
        self.latencyMs = Latency(
            p50: empty ? 0 : ms(histogram.valueAtPercentile(50)),
            p90: empty ? 0 : ms(histogram.valueAtPercentile(90)),
            p99: empty ? 0 : ms(histogram.valueAtPercentile(99)),
            p999: empty ? 0 : ms(histogram.valueAtPercentile(99.9)),
            max: empty ? 0 : ms(histogram.max),
            mean: empty ? 0 : histogram.mean / 1000)
    }

    public var text: String {
        func f(_ v: Double) -> String {
            let scaled = (v * 1000).rounded() / 1000
            return String(scaled)
        }
        var lines = [
            "connections \(connections) x streams \(streamsPerConnection)"
                + (passthrough ? " (passthrough, no assertions)" : ", \(keys) device keys"),
            "requests    \(requests) in \(f(elapsedSeconds)) s = \(f(requestsPerSecond)) req/s",
            "successes   \(successes)",
        ]
        if failures.isEmpty {
            lines.append("failures    0")
        } else {
            lines.append("failures    \(failures.values.reduce(0, +))")
            for (key, count) in failures.sorted(by: { $0.key < $1.key }) { lines.append("  \(key): \(count)") }
        }
        lines.append(
            "latency ms  p50 \(f(latencyMs.p50))  p90 \(f(latencyMs.p90))  p99 \(f(latencyMs.p99))  "
                + "p99.9 \(f(latencyMs.p999))  max \(f(latencyMs.max))  mean \(f(latencyMs.mean))")
        return lines.joined(separator: "\n")
    }
}
