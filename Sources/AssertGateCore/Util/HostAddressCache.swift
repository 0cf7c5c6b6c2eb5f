import Dispatch
import Logging
import NIOConcurrencyHelpers
import NIOCore
import NIOPosix

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#elseif canImport(Darwin)
import Darwin
#endif

/// The addresses of the hosts the gateway connects to (upstreams, Apple's
/// hosts), kept between connections. Without it every new connection ran
/// `getaddrinfo`, and NIO runs those one after another per event loop, so
/// one slow lookup delayed every connect of that worker, and a resolver
/// that was down failed connections to hosts whose addresses had not
/// changed. As nghttpx (`dns-cache-timeout`, 10 s) and nginx do:
///
/// - an answer is used for `freshFor`; concurrent connects to one host
///   share one lookup;
/// - when a later lookup fails, the last answer is used for up to
///   `staleFor` after it was made, and the host is not asked again for
///   `retryAfterFailure` (a resolver that times out would otherwise hold
///   every connect for its timeout);
/// - a host with no answer at all fails each connect with the resolver's error.
///
/// IP literals never reach the cache.
final class HostAddressCache: Sendable {
    struct Addresses: Sendable, Equatable {
        var v4: [SocketAddress]
        var v6: [SocketAddress]
    }

    typealias Lookup = @Sendable (_ host: String, _ port: Int) throws -> Addresses

    /// The process's cache: every connection of every worker shares it.
    static let shared = HostAddressCache()
    static let defaultFreshFor = TimeAmount.seconds(10)
    static let defaultStaleFor = TimeAmount.minutes(10)
    static let retryAfterFailure = TimeAmount.seconds(5)
    /// Hosts come from the configuration; the bound only matters across many
    /// reloads that each name new hosts.
    static let maxEntries = 512

    private struct Key: Hashable {
        var host: String
        var port: Int
    }

    private struct Entry {
        var answer: Addresses?
        var answeredAt: NIODeadline
        var failedAt: NIODeadline?
        /// Non-empty while a lookup runs: the connects waiting for it.
        var waiters: [EventLoopPromise<Addresses>] = []
        var lookingUp = false
    }

    private enum Step {
        case answer(Addresses)
        case wait
        case lookUp
    }

    private let entries = NIOLockedValueBox<[Key: Entry]>([:])
    private let lookupCount = NIOLockedValueBox(0)
    private let lookup: Lookup
    private let clock: @Sendable () -> NIODeadline
    private let freshFor: TimeAmount
    private let staleFor: TimeAmount
    private let logger = Logger(label: "assertgate.dns")

    init(
        freshFor: TimeAmount = defaultFreshFor, staleFor: TimeAmount = defaultStaleFor,
        clock: @escaping @Sendable () -> NIODeadline = { .now() },
        lookup: @escaping Lookup = HostAddressCache.systemLookup
    ) {
        self.freshFor = freshFor
        self.staleFor = staleFor
        self.clock = clock
        self.lookup = lookup
    }

    /// Lookups started so far (tests: a cached answer starts none).
    var lookups: Int { lookupCount.withLockedValue { $0 } }

    /// A resolver for one `ClientBootstrap` connect.
    func resolver(on loop: EventLoop) -> any Resolver & Sendable {
        CachedResolver(cache: self, loop: loop)
    }

    func addresses(host: String, port: Int, on loop: EventLoop) -> EventLoopFuture<Addresses> {
        if let literal = try? SocketAddress(ipAddress: host, port: port) {
            let answer = literal.protocol == .inet6 ? Addresses(v4: [], v6: [literal]) : Addresses(v4: [literal], v6: [])
            return loop.makeSucceededFuture(answer)
        }
        let key = Key(host: host, port: port)
        let now = clock()
        let promise = loop.makePromise(of: Addresses.self)
        let step = entries.withLockedValue { map -> Step in
            if var entry = map[key] {
                if let answer = entry.answer {
                    if now - entry.answeredAt < freshFor { return .answer(answer) }
                    if let failed = entry.failedAt, now - failed < Self.retryAfterFailure,
                        now - entry.answeredAt < staleFor
                    {
                        return .answer(answer)
                    }
                }
                entry.waiters.append(promise)
                let running = entry.lookingUp
                entry.lookingUp = true
                map[key] = entry
                return running ? .wait : .lookUp
            }
            if map.count >= Self.maxEntries,
                let oldest = map.filter({ !$0.value.lookingUp }).min(by: { $0.value.answeredAt < $1.value.answeredAt })
            {
                map[oldest.key] = nil
            }
            map[key] = Entry(answer: nil, answeredAt: now, waiters: [promise], lookingUp: true)
            return .lookUp
        }
        switch step {
        case .answer(let answer):
            promise.succeed(answer)
        case .wait:
            break
        case .lookUp:
            lookupCount.withLockedValue { $0 += 1 }
            let lookup = self.lookup
            DispatchQueue.global().async {
                let result = Result { try lookup(host, port) }
                self.finish(key, result)
            }
        }
        return promise.futureResult
    }

    private func finish(_ key: Key, _ result: Result<Addresses, any Error>) {
        let now = clock()
        let (waiters, outcome) = entries.withLockedValue { map -> ([EventLoopPromise<Addresses>], Result<Addresses, any Error>) in
            guard var entry = map[key] else { return ([], result) }
            let waiters = entry.waiters
            entry.waiters = []
            entry.lookingUp = false
            var outcome = result
            switch result {
            case .success(let answer):
                entry.answer = answer
                entry.answeredAt = now
                entry.failedAt = nil
            case .failure:
                entry.failedAt = now
                if let stale = entry.answer, now - entry.answeredAt < staleFor { outcome = .success(stale) }
            }
            map[key] = entry
            return (waiters, outcome)
        }
        if case .failure(let error) = result {
            let served = (try? outcome.get()) != nil
            logger.warning(
                served ? "host lookup failed; using the last addresses" : "host lookup failed",
                metadata: ["host": "\(key.host)", "error": "\(error)"])
        }
        for w in waiters { w.completeWith(outcome) }
    }

    /// `getaddrinfo` for TCP, its list read into addresses and freed here.
    @Sendable static func systemLookup(host: String, port: Int) throws -> Addresses {
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        hints.ai_protocol = Int32(IPPROTO_TCP)
        var list: UnsafeMutablePointer<addrinfo>?
        let rc = getaddrinfo(host, String(port), &hints, &list)
        guard rc == 0 else {
            throw HostLookupError(host: host, port: port, reason: String(cString: gai_strerror(rc)))
        }
        defer { if let list { freeaddrinfo(list) } }
        var answer = Addresses(v4: [], v6: [])
        var next = list
        while let info = next {
            if let raw = info.pointee.ai_addr {
                switch info.pointee.ai_family {
                case AF_INET:
                    answer.v4.append(
                        SocketAddress(UnsafeRawPointer(raw).loadUnaligned(as: sockaddr_in.self), host: host))
                case AF_INET6:
                    answer.v6.append(
                        SocketAddress(UnsafeRawPointer(raw).loadUnaligned(as: sockaddr_in6.self), host: host))
                default:
                    break
                }
            }
            next = info.pointee.ai_next
        }
        guard !answer.v4.isEmpty || !answer.v6.isEmpty else {
            throw HostLookupError(host: host, port: port, reason: "no IPv4 or IPv6 address")
        }
        return answer
    }
}

struct HostLookupError: Error, CustomStringConvertible {
    var host: String
    var port: Int
    var reason: String

    var description: String { "cannot resolve \(host): \(reason)" }
}

/// NIO asks for AAAA, then A, per connect; both come from one cache answer.
private final class CachedResolver: Resolver, Sendable {
    let cache: HostAddressCache
    let loop: EventLoop
    private let answer = NIOLockedValueBox<EventLoopFuture<HostAddressCache.Addresses>?>(nil)

    init(cache: HostAddressCache, loop: EventLoop) {
        self.cache = cache
        self.loop = loop
    }

    private func addresses(host: String, port: Int) -> EventLoopFuture<HostAddressCache.Addresses> {
        answer.withLockedValue { kept in
            if let kept { return kept }
            let future = cache.addresses(host: host, port: port, on: loop)
            kept = future
            return future
        }
    }

    func initiateAQuery(host: String, port: Int) -> EventLoopFuture<[SocketAddress]> {
        addresses(host: host, port: port).map(\.v4)
    }

    func initiateAAAAQuery(host: String, port: Int) -> EventLoopFuture<[SocketAddress]> {
        addresses(host: host, port: port).map(\.v6)
    }

    func cancelQueries() {}
}
