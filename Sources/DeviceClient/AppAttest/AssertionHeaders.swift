/// Builds the three AssertGate request headers for one request.
public struct AssertionSigner: Sendable {
    public var keyIdHeader = "AssertGate-Key-Id"
    public var assertionHeader = "AssertGate-Assertion"
    public var challengeHeader = "AssertGate-Challenge"

    public init() {}

    /// The headers for `method path` with `body`, signed by `device` with `counter`.
    public func headers(
        device: AppAttestDevice, counter: UInt32, method: String, path: String,
        challenge: String?, bodyHash: AssertGateClientData.BodyHash
    ) throws -> [(name: String, value: String)] {
        let clientData = AssertGateClientData.assert(method: method, path: path, challenge: challenge, bodyHash: bodyHash)
        let assertion = try device.assertion(clientDataHash: SHA256Digest.hash(clientData), counter: counter)
        var headers: [(name: String, value: String)] = [
            (keyIdHeader, Base64Text.standard(device.keyId)),
            (assertionHeader, Base64Text.standard(assertion)),
        ]
        if let challenge { headers.append((challengeHeader, challenge)) }
        return headers
    }
}
