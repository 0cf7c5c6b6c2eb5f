import DeviceClient
import Foundation

/// A stand-in device the Python test server understands: the attestation is
/// H(attestClientData) itself, an assertion is counter (4 bytes BE) followed by
/// H(assertClientData). It proves the HTTP side builds the right clientData
/// without needing DeviceSim or a gateway.
final class FakeDevice: AppAttestDevice {
    let keyId: [UInt8]

    init() {
        keyId = SHA256Digest.hash(Array(UUID().uuidString.utf8))
    }

    func attestation(clientDataHash: [UInt8]) throws -> [UInt8] { clientDataHash }

    func assertion(clientDataHash: [UInt8], counter: UInt32) throws -> [UInt8] {
        [UInt8(counter >> 24), UInt8((counter >> 16) & 0xff), UInt8((counter >> 8) & 0xff), UInt8(counter & 0xff)]
            + clientDataHash
    }
}

struct FakeDeviceFactory: AppAttestDeviceFactory {
    func makeDevice() throws -> AppAttestDevice { FakeDevice() }
}
