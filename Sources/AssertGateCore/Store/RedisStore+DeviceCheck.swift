import AssertGateRedis
import NIOCore
import Verifier

/// The DeviceCheck primitives on Redis (docs/redis.md): `ag:dt:{H}` per
/// device token hash, and the bit-update queue under the hash tag `{dbq}`.
extension RedisStore {
    static func deviceTokenKey(_ hash: [UInt8]) -> String { "ag:dt:{\(Base64.encodeURL(hash))}" }
    static let bitQueueDue = "ag:{dbq}:due"
    static let bitQueuePayloads = "ag:{dbq}:upd"
    static let bitQueueAttempts = "ag:{dbq}:att"
    private static var bitQueueKeys: [String] { [bitQueueDue, bitQueuePayloads, bitQueueAttempts] }

    public func claimDeviceToken(hash: [UInt8], ttl: TimeAmount) -> EventLoopFuture<Bool> {
        do { try DeviceTokenHash.check(hash) } catch { return eventLoop.makeFailedFuture(error) }
        let key = Self.deviceTokenKey(hash)
        let ms = max(1, ttl.nanoseconds / 1_000_000)
        return redis.send(key: key, RESPCommand("SET", .string(key), "1", "NX", "PX", .integer(ms)))
            .flatMapThrowing { reply in
                if reply.isNull { return false }
                guard case .status = reply else { throw Self.unexpected(reply, "SET NX") }
                return true
            }
    }

    public func enqueueDeviceBitUpdate(_ update: DeviceBitUpdate, maxQueued: Int) -> EventLoopFuture<Bool> {
        do { try update.validate() } catch { return eventLoop.makeFailedFuture(error) }
        return redis.evalSHA(
            RedisStoreScripts.enqueueBitUpdate, keys: Self.bitQueueKeys,
            arguments: [
                .string(update.id), .string(update.payload), .integer(update.enqueuedAt), .integer(Int64(maxQueued)),
            ]
        ).flatMapThrowing { reply in
            guard case .integer(let n) = reply else { throw Self.unexpected(reply, "enqueue") }
            return n >= 0
        }
    }

    public func claimDeviceBitUpdates(nowMillis: Int64, leaseMillis: Int64, limit: Int)
        -> EventLoopFuture<[DeviceBitUpdate]>
    {
        guard limit > 0 else { return eventLoop.makeSucceededFuture([]) }
        return redis.evalSHA(
            RedisStoreScripts.claimBitUpdates, keys: Self.bitQueueKeys,
            arguments: [.integer(nowMillis), .integer(nowMillis + leaseMillis), .integer(Int64(limit))]
        ).flatMapThrowing { reply in
            guard case .array(let flat) = reply, flat.count % 3 == 0 else { throw Self.unexpected(reply, "claim") }
            var updates: [DeviceBitUpdate] = []
            for i in stride(from: 0, to: flat.count, by: 3) {
                guard let id = flat[i].string, let payload = flat[i + 1].string, let attempts = flat[i + 2].int64 else {
                    throw Self.unexpected(reply, "claim")
                }
                if let update = DeviceBitUpdate(id: id, payload: payload, attempts: Int(attempts)) {
                    updates.append(update)
                } else {
                    // Not a payload this version wrote: it could never be
                    // delivered, so it leaves instead of coming back each lease.
                    _ = self.ackDeviceBitUpdate(id: id)
                }
            }
            return updates
        }
    }

    public func ackDeviceBitUpdate(id: String) -> EventLoopFuture<Void> {
        redis.evalSHA(RedisStoreScripts.ackBitUpdate, keys: Self.bitQueueKeys, arguments: [.string(id)])
            .flatMapThrowing { reply in
                guard case .integer = reply else { throw Self.unexpected(reply, "ack") }
            }
    }

    public func retryDeviceBitUpdate(_ update: DeviceBitUpdate, atMillis: Int64) -> EventLoopFuture<Bool> {
        redis.evalSHA(
            RedisStoreScripts.retryBitUpdate, keys: [Self.bitQueueDue, Self.bitQueueAttempts],
            arguments: [.string(update.id), .integer(Int64(update.attempts)), .integer(atMillis)]
        ).flatMapThrowing { reply in
            guard case .integer(let n) = reply else { throw Self.unexpected(reply, "retry") }
            return n == 1
        }
    }

    public func deviceBitQueueDepth() -> EventLoopFuture<Int> {
        redis.send(key: Self.bitQueueDue, RESPCommand("ZCARD", .string(Self.bitQueueDue))).flatMapThrowing { reply in
            guard let n = reply.int64 else { throw Self.unexpected(reply, "ZCARD") }
            return Int(n)
        }
    }
}
