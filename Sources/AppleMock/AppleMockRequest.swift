import NIOCore

/// One request as the mock saw it, for tests to assert on. Of a DeviceCheck
/// call it keeps neither the JWT nor the device token, only what they were
/// found to be; of a receipt refresh it keeps both (tests check them).
public struct AppleMockRequest: Sendable, Equatable {
    public var method: String
    public var path: String
    public var endpoint: AppleMockEndpoint?
    /// Whether an `Authorization` header came at all.
    public var hadAuthorization: Bool
    /// The device a valid mock token named (DeviceCheck calls).
    public var device: String?
    /// `transaction_id` and `timestamp` of a DeviceCheck body.
    public var transactionId: String?
    public var timestampMillis: Int64?
    /// `bit0` / `bit1` of an update body.
    public var bit0: Bool?
    public var bit1: Bool?
    /// The body of an attestationData request (a receipt); empty for
    /// DeviceCheck calls, whose bodies carry device tokens.
    public var body: [UInt8] = []
    /// The `Authorization` header of an attestationData request.
    public var authorization: String?
    /// The status answered (nil: stalled or closed).
    public var status: Int?
    /// The connection it came on (1 for the first one accepted).
    public var connection: Int
    /// When it arrived (before any latency the mock was told to add).
    public var receivedAt: NIODeadline = .now()
}
