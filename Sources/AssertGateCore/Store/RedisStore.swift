import AssertGateRedis
import NIOCore
import Verifier

/// `Store` on Redis, schema of docs/redis.md: one server, or a cluster
/// (every script touches the keys of one `{keyId}` slot; what spans slots is
/// done in steps, see `registerInCluster`). One instance per event loop,
/// wrapping that loop's client; futures complete on it. Build them all at
/// once with `RedisStoreGroup`.
public final class RedisStore: Store {
    public let redis: any RedisExecutor
    public var eventLoop: EventLoop { redis.eventLoop }

    /// The scripts a client must load for this store (see `init(redis:)`).
    public static var scripts: [RedisScript] { RedisStoreScripts.all }

    /// `redis` should have been created with `RedisStore.scripts` (they are
    /// loaded on connect; a missing one costs a NOSCRIPT round trip once).
    public init(redis: any RedisExecutor) {
        self.redis = redis
        self.standalone = redis as? RedisClient
        self.cluster = redis as? RedisClusterClient
        self.repairing = .makeBoxSendingValue([], as: Set<String>.self, eventLoop: redis.eventLoop)
    }

    /// `redis` by its concrete type, for the commit path (a direct call,
    /// specialised, instead of a generic one through the protocol).
    private let standalone: RedisClient?
    private let cluster: RedisClusterClient?
    /// Users whose key counts are being repaired (see `parseClusterCommit`).
    private let repairing: NIOLoopBoundBox<Set<String>>

    /// A store with its own client(s) on `eventLoop`, connecting immediately:
    /// a cluster client when `configuration.clusterSeeds` is not empty.
    public convenience init(configuration: RedisClientConfiguration, eventLoop: EventLoop) {
        if configuration.clusterSeeds.isEmpty {
            self.init(redis: RedisClient(configuration: configuration, eventLoop: eventLoop, scripts: RedisStoreScripts.all))
        } else {
            self.init(redis: RedisClusterClient(
                configuration: configuration, seeds: configuration.clusterSeeds, eventLoop: eventLoop,
                scripts: RedisStoreScripts.all))
        }
    }

    public func shutdown() -> EventLoopFuture<Void> {
        redis.shutdown()
    }

    // MARK: keys

    private static func tag(_ keyId: [UInt8]) throws -> String {
        guard keyId.count == 32 else { throw StoreError.invalidArgument("keyId must be 32 bytes") }
        return Base64.encodeURL(keyId)
    }

    private static func keyHash(_ k: String) -> String { "ag:{\(k)}:key" }
    private static func challengeKey(_ k: String, _ c: String) -> String { "ag:{\(k)}:ch:\(c)" }
    private static func userSet(_ uid: String) -> String { "ag:u:{\(uid)}" }

    /// The slot of every key tagged `{k}` (0 on a single server, where it is not used).
    private func slot(_ k: String) -> UInt16 {
        redis.isCluster ? RedisHashSlot.slot(ofTag: k) : 0
    }

    private func failed<T>(_ error: Error) -> EventLoopFuture<T> {
        eventLoop.makeFailedFuture(error)
    }

    // MARK: Store

    public func issueChallenge(keyId: [UInt8], purpose: ChallengePurpose, challenge: String, ttl: TimeAmount)
        -> EventLoopFuture<Void>
    {
        let k: String
        do { k = try Self.tag(keyId) } catch { return failed(error) }
        guard ChallengeCodec.isWellFormed(challenge) else {
            return failed(StoreError.invalidArgument("challenge must be 43 characters of b64url"))
        }
        let ms = max(1, ttl.nanoseconds / 1_000_000)
        return redis.send(
            RESPCommand("SET", .string(Self.challengeKey(k, challenge)), .string(purpose.rawValue), "PX", .integer(ms)),
            slot: slot(k)
        ).flatMapThrowing { reply in
            guard case .status = reply else { throw Self.unexpected(reply, "SET") }
        }
    }

    public func attestChallengeIsLive(keyId: [UInt8], challenge: String) -> EventLoopFuture<Bool> {
        let k: String
        do { k = try Self.tag(keyId) } catch { return failed(error) }
        guard ChallengeCodec.isWellFormed(challenge) else { return eventLoop.makeSucceededFuture(false) }
        return redis.send(RESPCommand("GET", .string(Self.challengeKey(k, challenge))), slot: slot(k)).flatMapThrowing {
            reply in
            switch reply {
            case .bulk(let bytes): return bytes.elementsEqual(ChallengePurpose.attest.rawValue.utf8)
            case .null: return false
            default: throw Self.unexpected(reply, "GET")
            }
        }
    }

    public func registerKey(_ key: NewKeyRecord, attestChallenge: String) -> EventLoopFuture<RegisterResult> {
        let k: String
        do { k = try Self.tag(key.keyId) } catch { return failed(error) }
        guard ChallengeCodec.isWellFormed(attestChallenge) else {
            return eventLoop.makeSucceededFuture(.rejected(.unknownChallenge))
        }
        var fields: [RESPArgument] = [
            "pk", .bytes(key.publicKey), "cnt", "0", "env", .string(key.environment.rawValue),
            "app", .string(key.appId), "created", .integer(key.createdAt), "rev", "0",
        ]
        let uid = key.userId.flatMap { $0.isEmpty ? nil : $0 }
        if let uid { fields += ["uid", .string(uid)] }
        if let v = key.receipt { fields += ["rcpt", .bytes(v)] }
        if let v = key.riskMetric { fields += ["risk", .integer(Int64(v))] }
        if let v = key.riskMetricAt { fields += ["risk_at", .integer(v)] }
        if let v = key.receiptNotBefore { fields += ["nb", .integer(v)] }
        if let v = key.receiptExpiry { fields += ["exp", .integer(v)] }
        if let v = key.bundleVersion { fields += ["bv", .string(v)] }
        if let v = key.launchCategory { fields += ["cat", .integer(Int64(v))] }
        if let v = key.keyPolicy { fields += ["kp", .string(v.rawValue)] }
        if redis.isCluster {
            return registerInCluster(key, k: k, uid: uid, attestChallenge: attestChallenge, fields: fields)
        }
        var keys = [Self.keyHash(k), Self.challengeKey(k, attestChallenge)]
        if let uid { keys.append(Self.userSet(uid)) }
        if key.refreshAt != nil { keys.append(Self.refreshBucket(key.keyId)) }
        let args: [RESPArgument] = [.string(k), key.refreshAt.map { .integer($0) } ?? .string("")] + fields
        return redis.evalSHA(RedisStoreScripts.register, keys: keys, arguments: args).flatMapThrowing { reply in
            try Self.parseRegister(reply)
        }
    }

    static func parseRegister(_ reply: RESPValue) throws -> RegisterResult {
        guard case .array(let a) = reply, a.count == 2, let status = a[0].string, let n = a[1].int64 else {
            throw Self.unexpected(reply, "register")
        }
        if status == "ok" { return .registered(userKeyCount: Int(n)) }
        guard let reason = ReasonToken(rawValue: status) else { throw Self.unexpected(reply, "register") }
        return .rejected(reason)
    }

    /// On a cluster the key's record, its user's key set and the refresh
    /// schedule live on different slots, so registration takes steps, each
    /// atomic on its node:
    /// 1. the keyId joins the user's set (`SADD`, idempotent);
    /// 2. the register script (challenge consumed, record created without
    ///    `ukc`). A refusal or failure leaves the keyId in the set without
    ///    a record: nothing counts it (step 3 counts records), and a retry
    ///    of the same key reuses it. Nothing is ever taken out of the set,
    ///    so a concurrent registration of the same key cannot lose its entry;
    /// 3. the set is read AFTER the record exists, the members whose record
    ///    carries this userId are counted (revoked ones included, as on one
    ///    server), and each of them gets that count as `ukc` (it only rises:
    ///    the registration that finishes last has seen every record, so
    ///    concurrent ones converge). A failure here leaves older counts in
    ///    place until the user's next registration, and the new key without
    ///    `ukc` (its first commit repairs that); the key IS registered;
    /// 4. the key joins the refresh schedule (a failure here is left to the
    ///    backfill walk at the next start).
    /// The commit script reads `ukc` from the key's own record: one round
    /// trip per assertion on a cluster too.
    private func registerInCluster(
        _ key: NewKeyRecord, k: String, uid: String?, attestChallenge: String, fields: [RESPArgument]
    ) -> EventLoopFuture<RegisterResult> {
        let keys = [Self.keyHash(k), Self.challengeKey(k, attestChallenge)]
        let schedule: @Sendable () -> EventLoopFuture<Void> = {
            guard let at = key.refreshAt else { return self.eventLoop.makeSucceededVoidFuture() }
            return self.scheduleReceiptRefresh(keyId: key.keyId, at: at).recover { _ in }
        }
        guard let uid else {
            return redis.evalSHA(RedisStoreScripts.register, keys: keys, arguments: [.string(k), ""] + fields)
                .flatMapThrowing { try Self.parseRegister($0) }
                .flatMap { result in
                    guard case .registered = result else { return self.eventLoop.makeSucceededFuture(result) }
                    return schedule().map { result }
                }
        }
        let set = Self.userSet(uid)
        return redis.send(key: set, RESPCommand("SADD", .string(set), .string(k)))
            .flatMapThrowing { reply in
                guard case .integer = reply else { throw Self.unexpected(reply, "SADD") }
            }
            .flatMap {
                // No `ukc` yet: step 3 writes it. Should step 3 fail, the
                // key's first commit finds none and repairs the count
                // (`parseClusterCommit`); a `ukc` of 1 here would have
                // stayed 1 until the user's next registration.
                self.redis.evalSHA(RedisStoreScripts.register, keys: keys, arguments: [.string(k), ""] + fields)
            }
            .flatMapThrowing { try Self.parseRegister($0) }
            .flatMap { result in
                guard case .registered = result else { return self.eventLoop.makeSucceededFuture(result) }
                return self.spreadUserKeyCount(set: set, uid: uid, newKey: k).recover { _ in 1 }.flatMap { count in
                    schedule().map { .registered(userKeyCount: count) }
                }
            }
    }

    /// Users with more keys than this get an approximate count (the set's
    /// size) written to the new key only: the exact count costs a round trip
    /// per key of the user, on every registration.
    static let maxUserKeysCounted = 256

    /// Step 3 of `registerInCluster` (`newKey`: the key just registered), or
    /// the repair of a user's counts (`newKey` nil: every member gets the
    /// count, approximate or not, so the repair happens once). → the count.
    private func spreadUserKeyCount(set: String, uid: String, newKey k: String?) -> EventLoopFuture<Int> {
        allMembers(set).flatMap { members in
            guard members.count <= Self.maxUserKeysCounted else {
                return self.raiseUserKeyCount(of: k.map { [$0] } ?? members, to: members.count)
            }
            let owners = members.map { m in
                self.redis.send(key: Self.keyHash(m), RESPCommand("HGET", .string(Self.keyHash(m)), "uid"))
                    .map { $0.string == uid ? m : nil }
            }
            return EventLoopFuture.whenAllSucceed(owners, on: self.eventLoop).flatMap { found in
                let keys = found.compactMap { $0 }
                return self.raiseUserKeyCount(of: keys, to: keys.count)
            }
        }
    }

    private func raiseUserKeyCount(of keys: [String], to n: Int) -> EventLoopFuture<Int> {
        // One key failing keeps its older count; the others still rise.
        let redis = self.redis
        return Self.batched(
            keys, into: n, on: eventLoop,
            { m in
                redis.evalSHA(RedisStoreScripts.raiseUserKeyCount, keys: [Self.keyHash(m)], arguments: [.integer(Int64(n))])
                    .map { _ in }.recover { _ in }
            }, combine: { n, _ in n })
    }

    /// At most this many commands of one call over a user's keys are in
    /// flight at once.
    static let maxInFlightPerCall = 256

    /// `operation` over `items`, `maxInFlightPerCall` at a time. The
    /// connections are the ones live requests share: thousands of commands
    /// at once (revoking a user with 100,000 keys) made one slow reply's
    /// timeout fail every request queued behind them.
    /// Each batch's results are folded into `initial` by `combine`.
    static func batched<E: Sendable, T: Sendable, R: Sendable>(
        _ items: [E], into initial: R, on loop: EventLoop, _ operation: @escaping @Sendable (E) -> EventLoopFuture<T>,
        combine: @escaping @Sendable (R, [T]) -> R
    ) -> EventLoopFuture<R> {
        @Sendable func run(from start: Int, _ done: R) -> EventLoopFuture<R> {
            guard start < items.count else { return loop.makeSucceededFuture(done) }
            let end = min(items.count, start + maxInFlightPerCall)
            let batch = items[start..<end].map(operation)
            return EventLoopFuture.whenAllSucceed(batch, on: loop).flatMap { run(from: end, combine(done, $0)) }
        }
        return run(from: 0, initial)
    }

    public func loadKey(keyId: [UInt8]) -> EventLoopFuture<StoredKey?> {
        let k: String
        do { k = try Self.tag(keyId) } catch { return failed(error) }
        return redis.send(
            RESPCommand("HMGET", .string(Self.keyHash(k)), "pk", "app", "env", "bv", "cat", "kp", "lc"), slot: slot(k)
        ).flatMapThrowing { reply in
            guard case .array(let a) = reply, a.count == 7 else { throw Self.unexpected(reply, "HMGET") }
            guard case .bulk(let pk) = a[0] else { return nil }
            guard let app = a[1].string, let envText = a[2].string, let env = AppEnvironment(rawValue: envText) else {
                throw StoreError.unexpectedReply("key record incomplete")
            }
            return StoredKey(
                publicKey: pk, appId: app, environment: env, bundleVersion: a[3].string,
                launchCategory: Self.category(a[4], legacy: a[6]), keyPolicy: a[5].string.flatMap(KeyPolicy.init))
        }
    }

    public func commitAssertion(keyId: [UInt8], counter: UInt32, challenge: String?) -> EventLoopFuture<CommitResult> {
        let promise = eventLoop.makePromise(of: CommitResult.self)
        commitAssertion(keyId: keyId, counter: counter, challenge: challenge) { promise.completeWith($0) }
        return promise.futureResult
    }

    public func commitAssertion(
        keyId: [UInt8], counter: UInt32, challenge: String?,
        completion: @escaping @Sendable (Result<CommitResult, any Error>) -> Void
    ) {
        guard keyId.count == 32 else {
            let error = StoreError.invalidArgument("keyId must be 32 bytes")
            if eventLoop.inEventLoop { completion(.failure(error)) } else { eventLoop.execute { completion(.failure(error)) } }
            return
        }
        // The hot path: a precomputed head, then the key name(s) and counter.
        let isCluster = redis.isCluster
        let heads = isCluster ? Self.clusterCommitHeads : Self.commitHeads
        var w = RESPCommandWriter(head: challenge == nil ? heads.0 : heads.1, capacity: 256)
        w.bulkKey(prefix: "ag:{", tagBytes: keyId, suffix: "}:key")
        if let challenge {
            // A challenge that cannot have been issued is looked up under a name
            // that cannot exist, so the script still applies its order
            // (unknown-key, revoked-key before unknown-challenge).
            w.bulkKey(prefix: "ag:{", tagBytes: keyId, suffix: "}:ch:", tail: ChallengeCodec.isWellFormed(challenge) ? challenge : "!")
        }
        w.bulk(Int64(counter))
        let command = RESPCommand(writer: w)
        if let standalone {
            standalone.evalSHA(
                RedisStoreScripts.commit, command: command, slot: 0, { try RedisStore.parseCommit($0) },
                completion: completion)
        } else if let cluster {
            cluster.evalSHA(
                RedisStoreScripts.clusterCommit, command: command, slot: RedisHashSlot.slot(ofBase64URLOf: keyId),
                // Capturing `self` alone: the closure needs no context allocation.
                { [self] reply in try parseClusterCommit(reply) }, completion: completion)
        } else {
            redis.evalSHA(
                isCluster ? RedisStoreScripts.clusterCommit : RedisStoreScripts.commit, command: command,
                slot: isCluster ? RedisHashSlot.slot(ofBase64URLOf: keyId) : 0,
                { reply in isCluster ? try self.parseClusterCommit(reply) : try RedisStore.parseCommit(reply) },
                completion: completion)
        }
    }

    /// A record without `ukc` (attested on a single server before the move to
    /// a cluster) answers 1 for now, and its user's keys get their count in
    /// the background (step 3 of `registerInCluster`), once at a time per user
    /// on this worker: the next commits see the real count.
    private func parseClusterCommit(_ reply: RESPValue) throws -> CommitResult {
        var result = try Self.parseCommit(reply)
        guard let state = result.state, state.userKeyCount < 0 else { return result }
        result.state?.userKeyCount = 1
        if let uid = state.userId, repairing.value.insert(uid).inserted {
            spreadUserKeyCount(set: Self.userSet(uid), uid: uid, newKey: nil).whenComplete { _ in
                self.repairing.value.remove(uid)
            }
        }
        return result
    }

    /// `EVALSHA <commit sha> 1|2` encoded once, per script.
    private static let commitHeads = heads(RedisStoreScripts.commit)
    private static let clusterCommitHeads = heads(RedisStoreScripts.clusterCommit)
    private static func heads(_ script: RedisScript) -> ([UInt8], [UInt8]) {
        (RESPCommandWriter.encodedHead(arrayCount: 5, ["EVALSHA", script.sha1, "1"]),
         RESPCommandWriter.encodedHead(arrayCount: 6, ["EVALSHA", script.sha1, "2"]))
    }

    static func parseCommit(_ reply: RESPValue) throws -> CommitResult {
        guard case .array(let a) = reply, case .integer(let code) = a.first, code >= 0,
            code < RedisStoreScripts.commitReasons.count
        else { throw unexpected(reply, "commit") }
        let rejection = RedisStoreScripts.commitReasons[Int(code)]
        if rejection == .unknownKey {
            return CommitResult(rejection: .unknownKey, state: nil)
        }
        guard a.count == 6, case .integer(let rev) = a[1], case .bulk(let uid) = a[2], case .integer(let n) = a[3],
            case .bulk(let risk) = a[4], case .bulk(let riskAt) = a[5]
        else { throw unexpected(reply, "commit") }
        let state = KeyState(
            revoked: rev == 1, userId: uid.isEmpty ? nil : String(decoding: uid, as: UTF8.self), userKeyCount: Int(n),
            riskMetric: risk.isEmpty ? nil : Int(String(decoding: risk, as: UTF8.self)),
            riskMetricAt: riskAt.isEmpty ? nil : Int64(String(decoding: riskAt, as: UTF8.self)))
        return CommitResult(rejection: rejection, state: state)
    }

    public func revokeKey(keyId: [UInt8]) -> EventLoopFuture<KeyRecord?> {
        let k: String
        do { k = try Self.tag(keyId) } catch { return failed(error) }
        return redis.evalSHA(RedisStoreScripts.revoke, keys: [Self.keyHash(k)], arguments: []).flatMapThrowing {
            reply in try Self.parseRecord(keyId: keyId, reply)
        }
    }

    public func keyRecord(keyId: [UInt8]) -> EventLoopFuture<KeyRecord?> {
        let k: String
        do { k = try Self.tag(keyId) } catch { return failed(error) }
        return redis.send(RESPCommand(["HMGET", .string(Self.keyHash(k))] + RedisStoreScripts.recordFields), slot: slot(k))
            .flatMapThrowing { reply in try Self.parseRecord(keyId: keyId, reply) }
    }

    /// Fields in `RedisStoreScripts.recordFields` order.
    static func parseRecord(keyId: [UInt8], _ reply: RESPValue) throws -> KeyRecord? {
        if reply.isNull { return nil }
        guard case .array(let a) = reply, a.count == RedisStoreScripts.recordFields.count else {
            throw unexpected(reply, "record")
        }
        guard case .bulk(let pk) = a[0] else { return nil }
        guard let cnt = a[1].int64, let counter = UInt32(exactly: cnt), let envText = a[2].string,
            let env = AppEnvironment(rawValue: envText), let app = a[3].string, let created = a[5].int64
        else { throw StoreError.unexpectedReply("key record incomplete") }
        let uid = a[4].string
        return KeyRecord(
            keyId: keyId, appId: app, environment: env, counter: counter, publicKey: pk,
            userId: (uid?.isEmpty ?? true) ? nil : uid, createdAt: created, revoked: a[6].string == "1",
            riskMetric: a[7].int64.map { Int($0) }, riskMetricAt: a[8].int64, appVersion: a[9].string,
            launchCategory: category(a[10], legacy: a[12]), keyPolicy: a[11].string.flatMap(KeyPolicy.init))
    }

    /// `cat` (decimal), else the 4 little-endian bytes of a record written
    /// before it existed (`lc`); anything else is no category.
    static func category(_ cat: RESPValue, legacy lc: RESPValue) -> UInt32? {
        if let n = cat.int64 { return UInt32(exactly: n) }
        if case .bulk(let b) = lc { return LaunchCategory.decode(.bytes(b)) }
        return nil
    }

    // MARK: users (admin)

    /// The user's keyIds (b64url) from the user's own slot, sorted. On a
    /// cluster the set may name a key whose registration failed: callers
    /// keep only records that carry this userId.
    private func userMembers(_ userId: String) -> EventLoopFuture<[String]> {
        allMembers(Self.userSet(userId)).map { $0.sorted() }
    }

    /// Every member of `set`, by `SSCAN`: each reply carries about
    /// `sscanCount` members, so a user with any number of keys stays within
    /// the client's reply limits (one `SMEMBERS` reply of a big set was
    /// refused, and closed the connection with every command on it).
    /// Members a rehash returns twice are counted once.
    private func allMembers(_ set: String) -> EventLoopFuture<[String]> {
        sscan(set, cursor: "0", found: [])
    }

    private func sscan(_ set: String, cursor: String, found: Set<String>) -> EventLoopFuture<[String]> {
        redis.send(key: set, RESPCommand("SSCAN", .string(set), .string(cursor), "COUNT", .integer(Self.sscanCount)))
            .flatMap { reply in
                guard case .array(let parts) = reply, parts.count == 2, let next = parts[0].string,
                    case .array(let members) = parts[1]
                else { return self.failed(Self.unexpected(reply, "SSCAN")) }
                var found = found
                for m in members { if let text = m.string { found.insert(text) } }
                if next == "0" { return self.eventLoop.makeSucceededFuture(Array(found)) }
                return self.sscan(set, cursor: next, found: found)
            }
    }

    /// Well under the client's 16,384 elements a reply (`RESPLimits`).
    static let sscanCount: Int64 = 512

    private static func keyId(member: String) -> [UInt8]? {
        guard let id = try? Base64.decode(member, maxLength: 64), id.count == 32 else { return nil }
        return id
    }

    public func userKeys(userId: String) -> EventLoopFuture<[KeyRecord]?> {
        userMembers(userId).flatMap { members in
            let reads = members.prefix(maxUserKeysListed).compactMap { m -> EventLoopFuture<KeyRecord?>? in
                guard let id = Self.keyId(member: m) else { return nil }
                return self.keyRecord(keyId: id).map { $0?.userId == userId ? $0 : nil }
            }
            return EventLoopFuture.whenAllSucceed(reads, on: self.eventLoop).map { found in
                let records = found.compactMap { $0 }
                return records.isEmpty ? nil : records
            }
        }
    }

    public func revokeUser(userId: String) -> EventLoopFuture<[KeyRecord]?> {
        let redis = self.redis
        return userMembers(userId).flatMap { members in
            // Every key is revoked; the answer lists at most `maxUserKeysListed`.
            let keys = members.compactMap { m in Self.keyId(member: m).map { (member: m, id: $0) } }
            return Self.batched(
                keys, into: [KeyRecord](), on: self.eventLoop,
                { key in
                    redis.evalSHA(
                        RedisStoreScripts.revokeOfUser, keys: [Self.keyHash(key.member)], arguments: [.string(userId)]
                    ).flatMapThrowing { reply in try Self.parseRecord(keyId: key.id, reply) }
                },
                combine: { listed, batch in
                    listed.count >= maxUserKeysListed ? listed : listed + batch.compactMap { $0 }.prefix(maxUserKeysListed - listed.count)
                }
            ).map { records in records.isEmpty ? nil : records }
        }
    }

    public func storeReceipt(
        keyId: [UInt8], receipt: [UInt8], riskMetric: Int?, at: Int64, notBefore: Int64?, expiry: Int64?
    ) -> EventLoopFuture<Bool> {
        let k: String
        do { k = try Self.tag(keyId) } catch { return failed(error) }
        func optional(_ v: Int64?) -> RESPArgument { v.map { .integer($0) } ?? .string("") }
        return redis.evalSHA(
            RedisStoreScripts.receipt, keys: [Self.keyHash(k)],
            arguments: [.bytes(receipt), optional(riskMetric.map { Int64($0) }), .integer(at), optional(notBefore), optional(expiry)]
        ).flatMapThrowing { reply in
            guard case .integer(let n) = reply else { throw Self.unexpected(reply, "receipt") }
            return n == 1
        }
    }

    // MARK: receipt refresh schedule

    /// `ag:rr:<n>`: the schedule is split over a few sorted sets (by the
    /// keyId's first byte) so that on Redis Cluster it spreads over shards.
    static let refreshBuckets = 8
    static func refreshBucket(_ keyId: [UInt8]) -> String {
        "ag:rr:\(Int(keyId[0]) % refreshBuckets)"
    }

    public func scheduleReceiptRefresh(keyId: [UInt8], at: Int64) -> EventLoopFuture<Void> {
        let k: String
        do { k = try Self.tag(keyId) } catch { return failed(error) }
        let bucket = Self.refreshBucket(keyId)
        return redis.send(key: bucket, RESPCommand("ZADD", .string(bucket), .integer(at), .string(k))).flatMapThrowing { reply in
            guard case .integer = reply else { throw Self.unexpected(reply, "ZADD") }
        }
    }

    public func cancelReceiptRefresh(keyId: [UInt8]) -> EventLoopFuture<Void> {
        let k: String
        do { k = try Self.tag(keyId) } catch { return failed(error) }
        let bucket = Self.refreshBucket(keyId)
        return redis.send(key: bucket, RESPCommand("ZREM", .string(bucket), .string(k))).flatMapThrowing { reply in
            guard case .integer = reply else { throw Self.unexpected(reply, "ZREM") }
        }
    }

    public func claimDueReceiptRefreshes(now: Int64, lease: Int64, limit: Int) -> EventLoopFuture<[[UInt8]]> {
        let perBucket = max(1, (limit + Self.refreshBuckets - 1) / Self.refreshBuckets)
        let claims = (0..<Self.refreshBuckets).map { n in
            redis.evalSHA(
                RedisStoreScripts.claimRefreshes, keys: ["ag:rr:\(n)"],
                arguments: [.integer(now), .integer(now + lease), .integer(Int64(perBucket))]
            ).flatMapThrowing { reply -> [[UInt8]] in
                guard case .array(let members) = reply else { throw Self.unexpected(reply, "claim") }
                var ids: [[UInt8]] = []
                for m in members {
                    if let text = m.string, let id = try? Base64.decode(text, maxLength: 64), id.count == 32 {
                        ids.append(id)
                    } else if case .bulk(let junk) = m {
                        // Not a keyId: it could never be refreshed, so it leaves the schedule.
                        _ = self.redis.send(key: "ag:rr:\(n)", RESPCommand("ZREM", .string("ag:rr:\(n)"), .bytes(junk)))
                    }
                }
                return ids
            }
        }
        // Everything claimed is returned (up to `limit` rounded up to the
        // buckets): a claimed key left out would wait for its lease to pass.
        // One bucket failing does not lose what the others claimed.
        return EventLoopFuture.whenAllComplete(claims, on: eventLoop).flatMapThrowing { results in
            var ids: [[UInt8]] = []
            var failure: (any Error)?
            for r in results {
                switch r {
                case .success(let part): ids += part
                case .failure(let e): failure = failure ?? e
                }
            }
            if ids.isEmpty, let failure { throw failure }
            return ids
        }
    }

    /// The cursor is `<master host:port> <SCAN cursor>`: the walk visits the
    /// masters one after the other in address order. A master that is gone
    /// when the walk comes back (a failover) is replaced by the next one in
    /// that order, so a map change can make the walk repeat keys (harmless:
    /// `ZADD NX`) or miss some on the failed node's successor, which the next
    /// start's walk catches.
    public func scheduleUnscheduledKeys(cursor: String?, at: Int64, spread: Int64, count: Int)
        -> EventLoopFuture<(cursor: String?, added: Int)>
    {
        redis.masters().flatMap { clients -> EventLoopFuture<(cursor: String?, added: Int)> in
            let masters = clients.map { RedisNodeAddress(host: $0.configuration.url.host, port: $0.configuration.url.port) }
            var node = 0
            var scan = "0"
            if let cursor, let space = cursor.lastIndex(of: " "),
                let address = RedisNodeAddress.parseAnnounced(cursor[..<space], defaultHost: "")
            {
                if let i = masters.firstIndex(of: address) {
                    node = i
                    scan = String(cursor[cursor.index(after: space)...])
                } else if let i = masters.firstIndex(where: { ($0.host, $0.port) > (address.host, address.port) }) {
                    node = i
                } else {
                    return self.eventLoop.makeSucceededFuture((nil, 0))
                }
            }
            let (i, here) = (node, masters[node])
            return clients[i].send(
                "SCAN", .string(scan), "MATCH", "ag:{*}:key", "COUNT", .integer(Int64(max(1, count)))
            ).flatMap { reply -> EventLoopFuture<(cursor: String?, added: Int)> in
                guard case .array(let parts) = reply, parts.count == 2, let next = parts[0].string,
                    case .array(let names) = parts[1]
                else { return self.failed(Self.unexpected(reply, "SCAN")) }
                let nextCursor: String? =
                    next != "0" ? "\(here) \(next)" : i + 1 < masters.count ? "\(masters[i + 1]) 0" : nil
                // ZADD NX: a key already on the schedule keeps its time.
                let adds = names.compactMap { name -> EventLoopFuture<Int>? in
                    guard let text = name.string, text.hasPrefix("ag:{"), text.hasSuffix("}:key") else { return nil }
                    let k = String(text.dropFirst(4).dropLast(5))
                    guard let keyId = try? Base64.decode(k, maxLength: 64), keyId.count == 32 else { return nil }
                    let when = at + (spread > 0 ? Int64.random(in: 0..<spread) : 0)
                    let bucket = Self.refreshBucket(keyId)
                    return self.redis.send(key: bucket, RESPCommand("ZADD", .string(bucket), "NX", .integer(when), .string(k)))
                        .map { Int($0.int64 ?? 0) }
                }
                return EventLoopFuture.whenAllSucceed(adds, on: self.eventLoop).map { (nextCursor, $0.reduce(0, +)) }
            }
        }
    }

    /// `ag:rr:walked`: the time of the last complete walk, expiring with it.
    private static let walkKey = "ag:rr:walked"

    public func lastBackfillWalk(now: Int64) -> EventLoopFuture<Int64?> {
        redis.send(key: Self.walkKey, RESPCommand("GET", .string(Self.walkKey))).flatMapThrowing { reply in
            if reply.isNull { return nil }
            guard let at = reply.int64 else { throw Self.unexpected(reply, "GET") }
            return at
        }
    }

    public func recordBackfillWalk(at: Int64, validFor: Int64) -> EventLoopFuture<Void> {
        redis.send(
            key: Self.walkKey, RESPCommand("SET", .string(Self.walkKey), .integer(at), "EX", .integer(max(1, validFor)))
        ).flatMapThrowing { reply in
            guard case .status = reply else { throw Self.unexpected(reply, "SET") }
        }
    }

    public func receiptRefreshSource(keyId: [UInt8]) -> EventLoopFuture<ReceiptRefreshSource?> {
        let k: String
        do { k = try Self.tag(keyId) } catch { return failed(error) }
        return redis.send(
            RESPCommand("HMGET", .string(Self.keyHash(k)), "rcpt", "pk", "app", "env", "rev", "nb"), slot: slot(k)
        ).flatMapThrowing { reply in
            guard case .array(let a) = reply, a.count == 6 else { throw Self.unexpected(reply, "HMGET") }
            guard case .bulk(let receipt) = a[0], !receipt.isEmpty, case .bulk(let pk) = a[1] else { return nil }
            guard let app = a[2].string, let envText = a[3].string, let env = AppEnvironment(rawValue: envText) else {
                throw StoreError.unexpectedReply("key record incomplete")
            }
            return ReceiptRefreshSource(
                receipt: receipt, publicKey: pk, appId: app, environment: env, revoked: a[4].string == "1",
                notBefore: a[5].int64)
        }
    }

    public func ping() -> EventLoopFuture<Void> {
        redis.ping()
    }

    /// An error reply becomes `serverError` (its text is Redis' own and holds
    /// no request data); any other shape `unexpectedReply`.
    static func unexpected(_ reply: RESPValue, _ what: String) -> StoreError {
        if case .error(let message) = reply { return .serverError("\(what): \(message)") }
        return .unexpectedReply(what)
    }
}

/// One `RedisStore` per event loop of a group: the gateway's workers.
public final class RedisStoreGroup: StoreProvider {
    private let stores: [ObjectIdentifier: RedisStore]
    private let all: [RedisStore]

    /// Starts connecting `configuration.connections` connections on every loop of `group`.
    public init(configuration: RedisClientConfiguration, group: EventLoopGroup) {
        var stores: [ObjectIdentifier: RedisStore] = [:]
        var all: [RedisStore] = []
        for loop in group.makeIterator() {
            let store = RedisStore(configuration: configuration, eventLoop: loop)
            stores[ObjectIdentifier(loop)] = store
            all.append(store)
        }
        precondition(!all.isEmpty, "RedisStoreGroup over an empty EventLoopGroup")
        self.stores = stores
        self.all = all
    }

    public func store(for loop: EventLoop) -> any Store {
        if let s = stores[ObjectIdentifier(loop)] { return s }
        // Not one of ours: any store works, its futures complete on its own loop.
        return all[Int(UInt(bitPattern: ObjectIdentifier(loop).hashValue) % UInt(all.count))]
    }

    public func shutdown() -> EventLoopFuture<Void> {
        EventLoopFuture.andAllComplete(all.map { $0.shutdown() }, on: all[0].eventLoop)
    }
}

extension RedisStore {
    /// SHA-1 of the assertion-commit script (for benchmarks and operators:
    /// `EVALSHA <sha> 1 ag:{K}:key <counter>` is one commit without a challenge).
    public static var commitScriptSHA1: String { RedisStoreScripts.commit.sha1 }
}
