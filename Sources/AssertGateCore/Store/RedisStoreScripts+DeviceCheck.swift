import AssertGateRedis

/// The scripts of the DeviceCheck bit-update queue (docs/redis.md): each
/// touches the queue's three keys, under one hash tag, so one slot.
extension RedisStoreScripts {
    /// KEYS = ag:{dbq}:due, ag:{dbq}:upd, ag:{dbq}:att; ARGV = id, payload,
    /// due (ms), the most the queue may hold. An id already queued is left as
    /// it is. → 1 added, 0 present, -1 full (nothing stored).
    static let enqueueBitUpdate = RedisScript(
        """
        if redis.call('HEXISTS', KEYS[2], ARGV[1]) == 1 then return 0 end
        if redis.call('HLEN', KEYS[2]) >= tonumber(ARGV[4]) then return -1 end
        redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
        redis.call('HSET', KEYS[3], ARGV[1], 0)
        redis.call('ZADD', KEYS[1], ARGV[3], ARGV[1])
        return 1
        """)

    /// KEYS as `enqueueBitUpdate`; ARGV = now, lease-until, limit (ms).
    /// → {id, payload, attempts, …} for the updates due at `now`, earliest
    /// first, each re-scored to lease-until and its attempts raised. An id
    /// without a payload (cannot happen through these scripts) leaves.
    static let claimBitUpdates = RedisScript(
        """
        local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[3]))
        local out = {}
        for _, id in ipairs(ids) do
          local p = redis.call('HGET', KEYS[2], id)
          if p then
            redis.call('ZADD', KEYS[1], ARGV[2], id)
            out[#out + 1] = id
            out[#out + 1] = p
            out[#out + 1] = redis.call('HINCRBY', KEYS[3], id, 1)
          else
            redis.call('ZREM', KEYS[1], id)
            redis.call('HDEL', KEYS[3], id)
          end
        end
        return out
        """)

    /// KEYS as `enqueueBitUpdate`; ARGV[1] = id. Forgets the update, token included.
    static let ackBitUpdate = RedisScript(
        """
        redis.call('ZREM', KEYS[1], ARGV[1])
        redis.call('HDEL', KEYS[2], ARGV[1])
        redis.call('HDEL', KEYS[3], ARGV[1])
        return 1
        """)

    /// KEYS = ag:{dbq}:due, ag:{dbq}:att; ARGV = id, attempts of the claim,
    /// due (ms). The attempts count fences the claim: a later claim raised
    /// it, and then this one no longer holds the update. → 1, or 0.
    static let retryBitUpdate = RedisScript(
        """
        if redis.call('HGET', KEYS[2], ARGV[1]) ~= ARGV[2] then return 0 end
        if not redis.call('ZSCORE', KEYS[1], ARGV[1]) then return 0 end
        redis.call('ZADD', KEYS[1], ARGV[3], ARGV[1])
        return 1
        """)

    static let deviceCheck: [RedisScript] = [enqueueBitUpdate, claimBitUpdates, ackBitUpdate, retryBitUpdate]
}
