import AssertGateRedis
import Verifier

/// The Lua scripts of `RedisStore`. Each decision is one script so it is
/// atomic on the server. On a cluster every script touches the keys of one
/// slot only; `commit` and `register` with a user set or a schedule bucket
/// in KEYS are for a single server, where they keep the user's count exact
/// in one step.
/// Redis replies never contain Lua `false` inside arrays (it would truncate
/// them), so absent values are sent as ''.
enum RedisStoreScripts {
    /// KEYS[1] = ag:{K}:key, KEYS[2] = ag:{K}:ch:<c> (optional); ARGV[1] = counter.
    /// → {code, revoked 0/1, uid, userKeyCount, risk, risk_at}, or {1} for an
    /// unknown key. Codes (`commitReasons`): 0 ok, 1 unknown-key, 2 revoked-key,
    /// 3 unknown-challenge, 4 counter-replay. Integers keep the hot reply small.
    /// On one server the user's key count is the set's size; on a cluster the
    /// set lives on another slot, so the count comes from the record's `ukc`
    /// (kept by `RedisStore.registerInCluster`; -1 when a record from a
    /// single server has none yet, which the store then repairs).
    static let commit = commitScript(userKeyCount: "redis.call('SCARD', 'ag:u:{' .. uid .. '}')")
    static let clusterCommit = commitScript(userKeyCount: "tonumber(s[6]) or -1")

    private static func commitScript(userKeyCount: String) -> RedisScript {
        RedisScript(
            """
            local s = redis.call('HMGET', KEYS[1], 'cnt', 'rev', 'uid', 'risk', 'risk_at', 'ukc')
            if not s[1] then return {1} end
            local uid = s[3] or ''
            local n = 0
            if uid ~= '' then n = \(userKeyCount) end
            local rev = 0
            local r = 0
            if s[2] == '1' then
              rev = 1
              r = 2
            else
              if KEYS[2] then
                if redis.call('GET', KEYS[2]) == 'assert' then
                  redis.call('DEL', KEYS[2])
                else
                  r = 3
                end
              end
              if r == 0 then
                if tonumber(ARGV[1]) > tonumber(s[1]) then
                  redis.call('HSET', KEYS[1], 'cnt', ARGV[1])
                else
                  r = 4
                end
              end
            end
            return {r, rev, uid, n, s[4] or '', s[5] or ''}
            """)
    }

    static let commitReasons: [ReasonToken?] = [nil, .unknownKey, .revokedKey, .unknownChallenge, .counterReplay]

    /// KEYS[1] = ag:{K}:key, KEYS[2] = ag:{K}:ch:<c>, then ag:u:{uid} (optional),
    /// then ag:rr:<n> (only with a refresh time); ARGV[1] = K, ARGV[2] =
    /// refresh time or '', ARGV[3..] = field/value pairs. → {'ok'|reason, userKeyCount}.
    static let register = RedisScript(
        """
        if redis.call('EXISTS', KEYS[1]) == 1 then return {'key-exists', 0} end
        if redis.call('GET', KEYS[2]) ~= 'attest' then return {'unknown-challenge', 0} end
        redis.call('DEL', KEYS[2])
        redis.call('HSET', KEYS[1], unpack(ARGV, 3))
        local last = #KEYS
        if ARGV[2] ~= '' then
          redis.call('ZADD', KEYS[last], ARGV[2], ARGV[1])
          last = last - 1
        end
        local n = 0
        if last >= 3 then
          redis.call('SADD', KEYS[3], ARGV[1])
          n = redis.call('SCARD', KEYS[3])
        end
        return {'ok', n}
        """)

    /// KEYS[1] = ag:{K}:key. → the record fields (HMGET order of `recordFields`) or nil.
    static let revoke = RedisScript(
        """
        if redis.call('EXISTS', KEYS[1]) == 0 then return false end
        redis.call('HSET', KEYS[1], 'rev', '1')
        return redis.call('HMGET', KEYS[1], \(recordFieldList))
        """)

    /// Bulk revoke of a user's keys, one key per call (each on its own slot).
    /// KEYS[1] = ag:{K}:key; ARGV[1] = uid. Revokes only a record that
    /// exists and belongs to that user (a cluster's user set can name a key
    /// whose registration failed). → the record fields, or nil.
    static let revokeOfUser = RedisScript(
        """
        if redis.call('HGET', KEYS[1], 'uid') ~= ARGV[1] then return false end
        redis.call('HSET', KEYS[1], 'rev', '1')
        return redis.call('HMGET', KEYS[1], \(recordFieldList))
        """)

    /// KEYS[1] = ag:{K}:key; ARGV = receipt, risk ('' = none), at, nb, exp
    /// ('' = none: the field is removed). → 1, or 0 if unknown.
    static let receipt = RedisScript(
        """
        if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
        redis.call('HSET', KEYS[1], 'rcpt', ARGV[1])
        if ARGV[2] ~= '' then redis.call('HSET', KEYS[1], 'risk', ARGV[2], 'risk_at', ARGV[3]) end
        if ARGV[4] and ARGV[4] ~= '' then redis.call('HSET', KEYS[1], 'nb', ARGV[4]) else redis.call('HDEL', KEYS[1], 'nb') end
        if ARGV[5] and ARGV[5] ~= '' then redis.call('HSET', KEYS[1], 'exp', ARGV[5]) else redis.call('HDEL', KEYS[1], 'exp') end
        return 1
        """)

    /// KEYS[1] = ag:rr:<n>; ARGV = now, lease-until, limit. → the members
    /// (keyIds, b64url) due at `now`, earliest first, each re-scored to
    /// lease-until in the same step.
    static let claimRefreshes = RedisScript(
        """
        local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[3]))
        for _, m in ipairs(due) do redis.call('ZADD', KEYS[1], ARGV[2], m) end
        return due
        """)

    /// Cluster registration, step 3. KEYS[1] = ag:{K}:key; ARGV[1] = count.
    /// `ukc` only rises, so concurrent registrations of one user converge on
    /// the largest count; a key that does not exist is not created. → 1, or 0.
    static let raiseUserKeyCount = RedisScript(
        """
        if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
        if tonumber(ARGV[1]) > (tonumber(redis.call('HGET', KEYS[1], 'ukc')) or 0) then
          redis.call('HSET', KEYS[1], 'ukc', ARGV[1])
        end
        return 1
        """)

    /// The admin record's fields: `bv` bundle version, `cat` launch category
    /// (decimal), `kp` key policy, `lc` the category bytes of records written
    /// before `cat` existed (read as a fallback).
    static let recordFieldNames = [
        "pk", "cnt", "env", "app", "uid", "created", "rev", "risk", "risk_at", "bv", "cat", "kp", "lc",
    ]
    static let recordFields: [RESPArgument] = recordFieldNames.map { .string($0) }
    private static let recordFieldList = recordFieldNames.map { "'\($0)'" }.joined(separator: ", ")

    static let all: [RedisScript] = [
        commit, clusterCommit, register, revoke, revokeOfUser, receipt, claimRefreshes, raiseUserKeyCount,
    ] + [rampUp] + deviceCheck
}
