/// One `update_two_bits` call owed to Apple (risk.md §3): queued durably in
/// the store before the response head goes to the client, delivered by a
/// worker at least once. It carries the device token because Apple's call
/// needs it; the store keeps it only until the update is acked.
///
/// `description` never shows the token (it is a credential for the device's
/// bits), so an update can be logged as is.
public struct DeviceBitUpdate: Sendable, Equatable, CustomStringConvertible {
    /// Unique per update (b64url, at most `maxIdLength`): what `ack` and `retry` name.
    public var id: String
    /// The token as the app sent it (base64 of `DCDevice.generateToken()`).
    public var deviceToken: String
    /// The DeviceCheck host that validated the token: the update goes there.
    public var environment: AppEnvironment
    /// The bits to write; nil leaves a bit as it is. At least one is set.
    public var bit0: Bool?
    public var bit1: Bool?
    /// When it was queued (unix milliseconds): `updateRetryFor` counts from here.
    public var enqueuedAt: Int64
    /// Times it was claimed for delivery, this claim included (0 when enqueued).
    public var attempts: Int

    public init(
        deviceToken: String, environment: AppEnvironment, bit0: Bool?, bit1: Bool?, enqueuedAt: Int64,
        id: String = DeviceBitUpdate.newId(), attempts: Int = 0
    ) {
        self.id = id
        self.deviceToken = deviceToken
        self.environment = environment
        self.bit0 = bit0
        self.bit1 = bit1
        self.enqueuedAt = enqueuedAt
        self.attempts = attempts
    }

    public var description: String {
        func bit(_ b: Bool?) -> String { b.map { $0 ? "1" : "0" } ?? "-" }
        return "device bit update \(id) (\(environment.rawValue), bit0=\(bit(bit0)) bit1=\(bit(bit1)), "
            + "enqueued \(enqueuedAt), attempts \(attempts))"
    }

    /// DeviceCheck tokens are a few KB of base64; anything far larger is not one.
    public static let maxTokenLength = 16 * 1024
    public static let maxIdLength = 64

    /// 16 random bytes, b64url.
    public static func newId() -> String {
        String(StoreChallenge.generate().prefix(22))
    }

    /// Refuses what could not be delivered or stored safely (the stored form
    /// is space-separated, so neither the id nor the token may hold one).
    func validate() throws {
        guard !id.isEmpty, id.utf8.count <= Self.maxIdLength, id.utf8.allSatisfy(Self.isB64URL) else {
            throw StoreError.invalidArgument("update id must be 1-\(Self.maxIdLength) characters of b64url")
        }
        guard !deviceToken.isEmpty, deviceToken.utf8.count <= Self.maxTokenLength,
            deviceToken.utf8.allSatisfy(Self.isBase64)
        else {
            throw StoreError.invalidArgument("device token must be 1-\(Self.maxTokenLength) characters of base64")
        }
        guard bit0 != nil || bit1 != nil else { throw StoreError.invalidArgument("a bit update sets bit0, bit1 or both") }
    }

    static func isB64URL(_ c: UInt8) -> Bool {
        (c >= 0x41 && c <= 0x5A) || (c >= 0x61 && c <= 0x7A) || (c >= 0x30 && c <= 0x39) || c == 0x2D || c == 0x5F
    }

    /// Standard or URL alphabet, padding allowed.
    static func isBase64(_ c: UInt8) -> Bool {
        isB64URL(c) || c == 0x2B || c == 0x2F || c == 0x3D
    }

    // MARK: stored form

    /// `1 <environment> <bit0> <bit1> <enqueuedAt> <token>`, bits `0`/`1`/`-`.
    /// The id and attempts are stored beside it (they change apart from it).
    var payload: String {
        func bit(_ b: Bool?) -> String { b.map { $0 ? "1" : "0" } ?? "-" }
        return "1 \(environment.rawValue) \(bit(bit0)) \(bit(bit1)) \(enqueuedAt) \(deviceToken)"
    }

    /// The inverse of `payload`; nil for anything this version did not write.
    init?(id: String, payload: String, attempts: Int) {
        let parts = payload.split(separator: " ", omittingEmptySubsequences: false)
        guard parts.count == 6, parts[0] == "1", let environment = AppEnvironment(rawValue: String(parts[1])),
            let at = Int64(parts[4]), !parts[5].isEmpty
        else { return nil }
        func bit(_ s: Substring) -> Bool?? {
            switch s {
            case "1": return .some(true)
            case "0": return .some(false)
            case "-": return .some(nil)
            default: return nil
            }
        }
        guard let b0 = bit(parts[2]), let b1 = bit(parts[3]) else { return nil }
        self.init(
            deviceToken: String(parts[5]), environment: environment, bit0: b0, bit1: b1, enqueuedAt: at, id: id,
            attempts: attempts)
    }
}
