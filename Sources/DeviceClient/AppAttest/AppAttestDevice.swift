/// What the device tool needs from an App Attest key: the adapter point between
/// the HTTP side and DeviceSim (or any other implementation).
public protocol AppAttestDevice: AnyObject, Sendable {
    /// H(65-byte public point), 32 bytes.
    var keyId: [UInt8] { get }
    /// The CBOR attestation object for `clientDataHash`.
    func attestation(clientDataHash: [UInt8]) throws -> [UInt8]
    /// The CBOR assertion object `{signature, authenticatorData}` with `counter`.
    func assertion(clientDataHash: [UInt8], counter: UInt32) throws -> [UInt8]
}

/// Makes fresh devices (keys) for the load generator's setup phase.
public protocol AppAttestDeviceFactory: Sendable {
    func makeDevice() throws -> AppAttestDevice
}
