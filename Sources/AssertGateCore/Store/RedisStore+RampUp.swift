import AssertGateRedis
import NIOCore

/// Attestation ramp-up on Redis (risk.md §4, docs/redis.md): one key,
/// `ag:ramp:attest`, so one slot on a cluster, shared by every gateway.
extension RedisStore {
    static let rampUpKey = "ag:ramp:attest"

    public func takeAttestChallengeBudget(rate: RateConfig) -> EventLoopFuture<TokenBucket.TakeResult> {
        guard rate.perSecond > 0, rate.perSecond.isFinite else {
            return eventLoop.makeFailedFuture(StoreError.invalidArgument("rampUp.perSecond must be positive"))
        }
        return redis.evalSHA(
            RedisStoreScripts.rampUp, keys: [Self.rampUpKey],
            arguments: [.string(String(rate.perSecond)), .integer(Int64(max(1, rate.burst)))]
        ).flatMapThrowing { reply in
            guard case .integer(let waitMicros) = reply else { throw Self.unexpected(reply, "ramp-up") }
            if waitMicros <= 0 { return .allowed }
            return .limited(retryAfterSeconds: Int(max(1, (waitMicros + 999_999) / 1_000_000)))
        }
    }
}
