import DeviceClient
import DeviceSim
import Foundation

/// The adapter point between the HTTP side (`DeviceClient`) and DeviceSim.
final class SimDeviceAdapter: AppAttestDevice {
    let device: SimDevice
    let appId: String
    let environment: AttestationEnvironment
    /// Signals and key policy written into attestations.
    let attestationOptions: AttestationOptions
    /// The extension map appended to every assertion (nil = none).
    let assertionExtensions: AuthenticatorExtensions?

    init(
        device: SimDevice, appId: String, environment: AttestationEnvironment,
        attestationOptions: AttestationOptions = AttestationOptions(), assertionExtensions: AuthenticatorExtensions? = nil
    ) {
        self.device = device
        self.appId = appId
        self.environment = environment
        self.attestationOptions = attestationOptions
        self.assertionExtensions = assertionExtensions
    }

    var keyId: [UInt8] { device.keyId }

    func attestation(clientDataHash: [UInt8]) throws -> [UInt8] {
        try device.attest(
            clientDataHash: clientDataHash, appId: appId, environment: environment,
            at: Int64(Date().timeIntervalSince1970), options: attestationOptions)
    }

    func assertion(clientDataHash: [UInt8], counter: UInt32) throws -> [UInt8] {
        try device.assert(clientDataHash: clientDataHash, appId: appId, counter: counter, extensions: assertionExtensions)
    }

    func save(to path: String) throws {
        try device.save(to: path)
    }
}

/// The test attestation CA and receipt CA, kept in one directory so the
/// gateway can be pointed at their roots (`trustAnchors`, `receiptTrustAnchors`).
struct DeviceCAs: Sendable {
    let ca: TestCA
    let receiptCA: ReceiptCA
    let directory: String

    var attestationRootPath: String { directory + "/root.cert.pem" }
    var receiptRootPath: String { directory + "/receipt-root.cert.pem" }

    static func loadOrCreate(directory: String) throws -> DeviceCAs {
        let fm = FileManager.default
        if fm.fileExists(atPath: directory + "/root.cert.pem"), fm.fileExists(atPath: directory + "/receipt-root.cert.pem") {
            return DeviceCAs(
                ca: try TestCA.load(directory: directory), receiptCA: try ReceiptCA.load(directory: directory),
                directory: directory)
        }
        try fm.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let cas = DeviceCAs(ca: try TestCA(), receiptCA: try ReceiptCA(), directory: directory)
        try cas.ca.save(to: directory)
        try cas.receiptCA.save(to: directory)
        FileHandle.standardError.write(Data("created test CAs in \(directory)\n".utf8))
        return cas
    }

    func makeDevice(
        appId: String, environment: DeviceEnvironment, attestationOptions: AttestationOptions = AttestationOptions()
    ) throws -> SimDeviceAdapter {
        SimDeviceAdapter(
            device: try SimDevice(ca: ca, receiptCA: receiptCA), appId: appId, environment: environment.simulated,
            attestationOptions: attestationOptions)
    }

    func loadDevice(
        path: String, appId: String, environment: DeviceEnvironment, assertionExtensions: AuthenticatorExtensions? = nil
    ) throws -> SimDeviceAdapter {
        SimDeviceAdapter(
            device: try SimDevice.load(path: path, ca: ca, receiptCA: receiptCA), appId: appId,
            environment: environment.simulated, assertionExtensions: assertionExtensions)
    }

    func factory(appId: String, environment: DeviceEnvironment) -> AppAttestDeviceFactory {
        SimDeviceFactory(cas: self, appId: appId, environment: environment)
    }
}

struct SimDeviceFactory: AppAttestDeviceFactory {
    let cas: DeviceCAs
    let appId: String
    let environment: DeviceEnvironment

    func makeDevice() throws -> AppAttestDevice {
        try cas.makeDevice(appId: appId, environment: environment)
    }
}

extension DeviceEnvironment {
    var simulated: AttestationEnvironment {
        switch self {
        case .development: .development
        case .production: .production
        }
    }
}
