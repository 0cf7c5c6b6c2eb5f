import AssertGateRedis

/// Attestation ramp-up (risk.md §4, docs/redis.md): one key, so one slot.
extension RedisStoreScripts {
    /// `TokenBucket` on the server: KEYS[1] = ag:ramp:attest, a hash of
    /// `tokens` and `at` (µs of Redis server time, so gateways with skewed
    /// clocks share one budget). ARGV = perSecond, burst: the rate in force,
    /// so a reload applies from the next take (tokens kept, capped at the
    /// new burst). → 0 when a challenge may be issued (one token taken),
    /// else the µs until one may (≥ 1). The key expires once full again.
    static let rampUp = RedisScript(
        """
        local t = redis.call('TIME')
        local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
        local rate = tonumber(ARGV[1])
        local burst = tonumber(ARGV[2])
        local s = redis.call('HMGET', KEYS[1], 'tokens', 'at')
        local tokens = tonumber(s[1]) or burst
        local at = tonumber(s[2]) or now
        if now > at then
          tokens = tokens + (now - at) * rate / 1000000
          at = now
        end
        if tokens > burst then tokens = burst end
        local wait = 0
        if tokens >= 1 then
          tokens = tokens - 1
        else
          wait = math.ceil((1 - tokens) * 1000000 / rate)
        end
        redis.call('HSET', KEYS[1], 'tokens', string.format('%.17g', tokens), 'at', string.format('%.0f', at))
        redis.call('PEXPIRE', KEYS[1], math.min(math.ceil((burst - tokens) * 1000 / rate) + 1000, 1000000000000))
        return wait
        """)
}
