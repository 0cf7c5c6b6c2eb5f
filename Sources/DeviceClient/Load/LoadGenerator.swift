import Foundation
import Histogram
import NIOCore

/// HTTP/2 load: C connections x S concurrent streams, every request with a
/// fresh assertion.
///
/// Counters are committed by the gateway in the order requests arrive, so two
/// requests of one key in flight together could commit out of order and the
/// lower one would be a counter-replay. Hence one device key per stream slot
/// (C x S keys, attested once in a setup phase), each with at most one request
/// in flight and a counter that only grows.
public final class LoadGenerator: Sendable {
    public let options: LoadOptions
    private let group: EventLoopGroup
    private let factory: AppAttestDeviceFactory?

    public enum SetupError: Error, CustomStringConvertible {
        case noDeviceFactory
        case attestationRefused(status: Int, body: String)

        public var description: String {
            switch self {
            case .noDeviceFactory: "assertions requested but no device implementation is wired"
            case .attestationRefused(let status, let body): "setup: attestation refused with \(status): \(body)"
            }
        }
    }

    public init(options: LoadOptions, group: EventLoopGroup, deviceFactory: AppAttestDeviceFactory?) {
        self.options = options
        self.group = group
        self.factory = deviceFactory
    }

    /// Setup (connections, keys), warm-up, measured run; then closes everything.
    public func run(progress: @Sendable (String) -> Void = { _ in }) async throws -> LoadReport {
        let clients = (0..<options.connections).map { _ in
            HTTP2Client(target: options.target, eventLoop: group.next(), configuration: options.http2)
        }
        do {
            for client in clients { _ = try await client.connection().get() }
            var devices: [[AppAttestDevice]] = Array(repeating: [], count: clients.count)
            if !options.passthrough {
                progress("attesting \(options.connections * options.streams) device keys")
                devices = try await attestDevices(clients: clients)
            }
            let report = try await measure(clients: clients, devices: devices)
            for client in clients { try? await client.shutdown().get() }
            return report
        } catch {
            for client in clients { try? await client.shutdown().get() }
            throw error
        }
    }

    // MARK: Setup

    private func attestDevices(clients: [HTTP2Client]) async throws -> [[AppAttestDevice]] {
        guard let factory else { throw SetupError.noDeviceFactory }
        let total = options.connections * options.streams
        let limit = max(1, options.attestConcurrency)
        let options = self.options
        var result: [[AppAttestDevice?]] = Array(
            repeating: Array(repeating: nil, count: options.streams), count: options.connections)
        try await withThrowingTaskGroup(of: (Int, AppAttestDevice).self) { tasks in
            var next = 0
            func add() {
                let index = next
                next += 1
                let client = clients[index / options.streams]
                tasks.addTask {
                    let device = try factory.makeDevice()
                    let api = GatewayAPI(requester: client, authority: options.target.authority, prefix: options.prefix)
                    try await Self.attestWithBackoff(api: api, device: device, userId: options.userId)
                    return (index, device)
                }
            }
            while next < min(limit, total) { add() }
            while let (index, device) = try await tasks.next() {
                result[index / options.streams][index % options.streams] = device
                if next < total { add() }
            }
        }
        return result.map { $0.compactMap { $0 } }
    }

    /// The challenge route is rate-limited per peer: wait and retry on 429.
    private static func attestWithBackoff(api: GatewayAPI, device: AppAttestDevice, userId: String?) async throws {
        var attempts = 0
        while true {
            attempts += 1
            do {
                let response = try await api.attest(device: device, userId: userId)
                if response.status == 201 { return }
                if response.status == 429, attempts < 50 {
                    try await Task.sleep(for: .seconds(retryAfter(response.header("retry-after"))))
                    continue
                }
                throw SetupError.attestationRefused(status: response.status, body: response.bodyText)
            } catch GatewayAPI.APIError.unexpectedStatus(_, 429, _) where attempts < 50 {
                try await Task.sleep(for: .seconds(1))
            }
        }
    }

    private static func retryAfter(_ value: String?) -> Double {
        guard let value, let seconds = Double(value), seconds > 0 else { return 1 }
        return min(seconds, 10)
    }

    // MARK: Measured run

    private func measure(clients: [HTTP2Client], devices: [[AppAttestDevice]]) async throws -> LoadReport {
        let quotas = Self.split(options.requests, into: clients.count)
        let options = self.options
        // Signed ahead on each connection's loop, in parallel, before the clock starts.
        var presigned: [[[LoadWorker.Headers]]] = Array(repeating: [], count: clients.count)
        if options.presign, let rate = options.rate {
            let jobs = clients.enumerated().map { index, client in
                client.eventLoop.submit {
                    try LoadWorker.presign(
                        devices: devices[index], options: options, rate: rate, quota: quotas[index])
                }
            }
            for (index, job) in jobs.enumerated() { presigned[index] = try await job.get() }
        }
        let signedAhead = presigned
        let start = NIODeadline.now()
        let measureFrom = start + .nanoseconds(Int64(options.warmup * 1e9))
        let stopAt: NIODeadline? = options.requests == nil
            ? measureFrom + .nanoseconds(Int64(options.duration * 1e9)) : nil
        // The target's CPU at the start of the measured window (after setup and warm-up).
        let cpuAtStart: EventLoopFuture<Double?>? = options.cpuPid.map { pid in
            clients[0].eventLoop.scheduleTask(deadline: measureFrom) { ProcessCPU.seconds(pid: pid) }.futureResult
        }
        let futures = clients.enumerated().map { index, client in
            client.eventLoop.flatSubmit {
                LoadWorker(
                    client: client, index: index, options: options, devices: devices[index],
                    presigned: signedAhead[index], measureFrom: measureFrom, stopAt: stopAt, quota: quotas[index]
                ).start()
            }
        }
        var histogram = Histogram<UInt64>(highestTrackableValue: LoadWorker.maxLatencyMicros, numberOfSignificantValueDigits: .three)
        var requests = 0
        var successes = 0
        var failures: [String: Int] = [:]
        var lastEnd = measureFrom
        var samples: [LatencySample] = []
        for future in futures {
            let r = try await future.get()
            histogram.add(r.histogram)
            requests += r.requests
            successes += r.successes
            failures.merge(r.failures, uniquingKeysWith: +)
            lastEnd = max(lastEnd, r.lastCompletion)
            samples.append(contentsOf: r.samples)
        }
        let elapsed = Double((lastEnd - measureFrom).nanoseconds) / 1e9
        var report = LoadReport(
            options: options, keys: devices.reduce(0) { $0 + $1.count }, requests: requests, successes: successes,
            failures: failures, elapsedSeconds: elapsed, histogram: histogram)
        report.samples = samples
        report.measuredFromMonotonicNanos = measureFrom.uptimeNanoseconds
        if let pid = options.cpuPid, let startFuture = cpuAtStart, let startCPU = try await startFuture.get(),
            let endCPU = ProcessCPU.seconds(pid: pid)
        {
            report.targetCPUSeconds = endCPU - startCPU
        }
        return report
    }

    static func split(_ total: Int?, into parts: Int) -> [Int?] {
        guard let total else { return Array(repeating: nil, count: parts) }
        return (0..<parts).map { total / parts + ($0 < total % parts ? 1 : 0) }
    }
}

/// One connection's share of the load, confined to its event loop.
final class LoadWorker {
    static let maxLatencyMicros: UInt64 = 120_000_000

    struct Result: Sendable {
        var histogram: Histogram<UInt64>
        var requests = 0
        var successes = 0
        var failures: [String: Int] = [:]
        var lastCompletion: NIODeadline
        var samples: [LatencySample] = []
    }

    typealias Headers = [(name: String, value: String)]

    private final class Slot {
        let device: AppAttestDevice?
        let stream: Int
        var counter: UInt32 = 0
        /// Requests sent by this slot (warm-up included).
        var sent = 0
        /// With a rate: when this slot's next request is due.
        var due: NIODeadline?
        /// Assertion headers for counters 1, 2, … signed before the run.
        let presigned: [Headers]
        init(device: AppAttestDevice?, stream: Int, presigned: [Headers]) {
            self.device = device
            self.stream = stream
            self.presigned = presigned
        }
    }

    /// Each slot's headers for as many requests as `rate` can ask of it over
    /// the warm-up and the measured window (or its share of the quota), with
    /// a margin; a slot that runs out signs the rest inline.
    static func presign(devices: [AppAttestDevice], options: LoadOptions, rate: Double, quota: Int?) throws
        -> [[Headers]]
    {
        guard !devices.isEmpty else { return [] }
        let slots = Double(max(1, options.connections * options.streams))
        let perSlotPerSecond = rate / slots
        let measured = quota.map { Double($0) / Double(devices.count) } ?? options.duration * perSlotPerSecond
        let count = Int((options.warmup * perSlotPerSecond + measured) * 1.05) + 4
        let signer = AssertionSigner()
        let bodyHash = AssertGateClientData.BodyHash.body(options.body)
        return try devices.map { device in
            try (1...max(1, count)).map { counter in
                try signer.headers(
                    device: device, counter: UInt32(counter), method: options.method, path: options.path,
                    challenge: nil, bodyHash: bodyHash)
            }
        }
    }

    private let client: HTTP2Client
    /// This connection's place among all of them (for pacing phases).
    private let index: Int
    private let options: LoadOptions
    private let slots: [Slot]
    private let measureFrom: NIODeadline
    private let stopAt: NIODeadline?
    private var quota: Int?
    private var running = 0
    private var result: Result
    private let done: EventLoopPromise<Result>
    private let signer = AssertionSigner()
    private let bodyHash: AssertGateClientData.BodyHash

    init(client: HTTP2Client, index: Int, options: LoadOptions, devices: [AppAttestDevice], presigned: [[Headers]],
         measureFrom: NIODeadline, stopAt: NIODeadline?, quota: Int?) {
        self.client = client
        self.index = index
        self.options = options
        self.slots = options.passthrough
            ? (0..<options.streams).map { Slot(device: nil, stream: $0, presigned: []) }
            : devices.enumerated().map { i, device in
                Slot(device: device, stream: i, presigned: i < presigned.count ? presigned[i] : [])
            }
        self.measureFrom = measureFrom
        self.stopAt = stopAt
        self.quota = quota
        self.result = Result(
            histogram: Histogram(highestTrackableValue: Self.maxLatencyMicros, numberOfSignificantValueDigits: .three),
            lastCompletion: measureFrom)
        self.done = client.eventLoop.makePromise()
        self.bodyHash = .body(options.body)
    }

    func start() -> EventLoopFuture<Result> {
        running = slots.count
        if slots.isEmpty || quota == 0 {
            done.succeed(result)
            return done.futureResult
        }
        if let interval = slotInterval {
            // Spread the first requests of ALL slots (every connection's)
            // evenly over one interval: slot i of connection k gets phase
            // i·C + k of C·S. The same phases on every connection would send
            // C requests at once, a burst the gateway then queues.
            let start = NIODeadline.now()
            let connections = Int64(max(1, options.connections))
            let total = Int64(slots.count) * connections
            for (i, slot) in slots.enumerated() {
                let phase = Int64(i) * connections + Int64(index)
                slot.due = start + .nanoseconds(interval.nanoseconds * phase / total)
            }
        }
        for slot in slots { next(slot) }
        return done.futureResult
    }

    /// Time between two requests of one slot when a total rate is asked for.
    private var slotInterval: TimeAmount? {
        guard let rate = options.rate, rate > 0 else { return nil }
        let totalSlots = Double(max(1, options.connections * options.streams))
        return .nanoseconds(Int64(totalSlots / rate * 1e9))
    }

    /// With a rate every slot keeps its own fixed schedule (due, due +
    /// interval, …): a slot held up past its next due time sends at once and
    /// catches up, but never moves its phase. Re-phasing from the completion
    /// time (as this did) lets one stall line every delayed slot up on the
    /// same instant, and the client sends in bursts from then on.
    private func next(_ slot: Slot) {
        if let due = slot.due, let interval = slotInterval {
            slot.due = due + interval
            if due > NIODeadline.now() {
                let bound = NIOLoopBound(self, eventLoop: client.eventLoop)
                let boundSlot = NIOLoopBound(slot, eventLoop: client.eventLoop)
                client.eventLoop.scheduleTask(deadline: due) { bound.value.send(boundSlot.value, due: due) }
                return
            }
            return send(slot, due: due)
        }
        send(slot, due: nil)
    }

    /// `due`: when a paced request should have left. Its latency counts from
    /// then (correcting for coordinated omission, as wrk2 does): a request the
    /// client could not send because its slot was still waiting on a stalled
    /// response has waited as long as a user of a stalled app would have.
    private func send(_ slot: Slot, due: NIODeadline?) {
        let now = NIODeadline.now()
        let measured = now >= measureFrom
        if measured {
            if let stopAt, now >= stopAt { return finish() }
            if let q = quota {
                if q <= 0 { return finish() }
                quota = q - 1
            }
        }
        var request = HTTPClientRequest(
            method: options.method, path: options.path, authority: options.target.authority, body: options.body)
        if let device = slot.device {
            slot.counter &+= 1
            if Int(slot.counter) <= slot.presigned.count {
                request.headers = slot.presigned[Int(slot.counter) - 1]
            } else {
                do {
                    request.headers = try signer.headers(
                        device: device, counter: slot.counter, method: options.method, path: options.path,
                        challenge: nil, bodyHash: bodyHash)
                } catch {
                    record(measured: measured, started: now, key: "error: assertion: \(error)", success: false)
                    return finish()
                }
            }
        }
        slot.sent += 1
        if let tokens = options.deviceTokens {
            do {
                let token = try tokens.make(LoadSlot(connection: index, stream: slot.stream), slot.sent)
                request.headers.append((name: tokens.header, value: token))
            } catch {
                record(measured: measured, started: now, key: "error: device token: \(error)", success: false)
                return finish()
            }
        }
        let startedAt = due.map { min($0, NIODeadline.now()) } ?? NIODeadline.now()
        let bound = NIOLoopBound(self, eventLoop: client.eventLoop)
        let boundSlot = NIOLoopBound(slot, eventLoop: client.eventLoop)
        client.execute(request).whenComplete { outcome in
            let worker = bound.value
            switch outcome {
            case .success(let response):
                let ok = (200..<300).contains(response.status)
                worker.record(measured: measured, started: startedAt, key: ok ? nil : Self.failureKey(response), success: ok)
            case .failure(let error):
                worker.record(measured: measured, started: startedAt, key: "error: \(error)", success: false)
            }
            worker.next(boundSlot.value)
        }
    }

    private func record(measured: Bool, started: NIODeadline, key: String?, success: Bool) {
        guard measured else { return }
        let end = NIODeadline.now()
        let micros = UInt64(max(0, (end - started).nanoseconds / 1000))
        result.histogram.record(min(micros, Self.maxLatencyMicros))
        if options.recordSamples {
            result.samples.append(LatencySample(
                sentMicros: (started - measureFrom).nanoseconds / 1000, latencyMicros: micros, connection: index))
        }
        result.requests += 1
        if success { result.successes += 1 }
        if let key { result.failures[key, default: 0] += 1 }
        result.lastCompletion = max(result.lastCompletion, end)
    }

    private func finish() {
        running -= 1
        if running == 0 { done.succeed(result) }
    }

    /// "403 counter-replay": the status, with the problem+json reason when present.
    static func failureKey(_ response: HTTPClientResponse) -> String {
        if let object = try? JSONSerialization.jsonObject(with: Data(response.body)) as? [String: Any],
           let reason = object["reason"] as? String
        {
            return "\(response.status) \(reason)"
        }
        return "\(response.status)"
    }
}
