import GatewayTLS
import NIOCore

/// A request waiting for an upstream connection (HTTP/1.1) or a stream slot
/// (HTTP/2), in either kind of endpoint pool.
struct UpstreamWaiter {
    var delegate: UpstreamExchangeDelegate
    var deadline: NIODeadline
    var client: String?
    /// The upstream's, or this request's own (its route's `limits.responseTimeout`, `grpc-timeout`).
    var responseTimeout: TimeAmount

    /// Waits until its response timeout, at most the upstream's: past it the
    /// request is answered anyway (a route that waits an hour for a stream's
    /// next message does not wait an hour for a connection).
    init(delegate: UpstreamExchangeDelegate, now: NIODeadline, client: String?, responseTimeout: TimeAmount, upstreamTimeout: TimeAmount) {
        self.delegate = delegate
        self.deadline = now + min(responseTimeout, upstreamTimeout)
        self.client = client
        self.responseTimeout = responseTimeout
    }
}

extension UpstreamTLS {
    /// `offered` when it replaces `current` on a TLS endpoint (a reload made
    /// newer settings): connections verified under the old ones take no more requests.
    static func replacing(_ current: UpstreamTLS?, with offered: UpstreamTLS?, on endpoint: UpstreamEndpoint) -> UpstreamTLS? {
        guard endpoint.tls, let offered, offered.generation > (current?.generation ?? 0) else { return nil }
        return offered
    }
}

extension UpstreamWaiter {
    /// Its request no longer waits (its client left, or it was answered).
    var departed: Bool { !delegate.awaitsLease }
}

extension CircularBuffer where Element == UpstreamWaiter {
    /// Sweep: waiters past their deadline leave the queue, in order, and are
    /// told `queueTimeout` (after the queue is consistent again); departed
    /// ones just leave (so a client that queues requests and resets them
    /// holds nothing for longer than a sweep).
    mutating func failExpired(now: NIODeadline) {
        guard contains(where: { $0.deadline <= now || $0.departed }) else { return }
        var expired: [UpstreamWaiter] = []
        var kept = CircularBuffer<UpstreamWaiter>(initialCapacity: count)
        for w in self where !w.departed {
            if w.deadline <= now { expired.append(w) } else { kept.append(w) }
        }
        self = kept
        for w in expired { w.delegate.upstreamLeaseFailed(.queueTimeout) }
    }
}

extension UpstreamError {
    /// What a failed connect (TCP, or TCP and TLS together within `connectTimeout`) was.
    init(connectFailure error: Error) {
        if case ChannelError.connectTimeout = error {
            self = .connectTimeout
        } else if let failed = error as? TLSClientHandshakeError, failed.timedOut {
            self = .connectTimeout
        } else {
            self = .connectFailed
        }
    }
}
