import ArgumentParser
import DeviceClient
import DeviceSim
import Foundation
import NIOPosix

struct AttestCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "attest",
        abstract: "Creates a device key, attests it with the gateway and saves it in --state.")

    @OptionGroup var options: GatewayOptions

    @Option(help: "Opaque user id bound to the key (protocol.md §3).")
    var userId: String?

    @OptionGroup(title: "Signals in the attestation") var signals: SignalOptions

    @Option(help: "Key access policy in the credential certificate: macos-full-security or other (default: none).")
    var keyPolicy: SimKeyPolicy?

    func run() async throws {
        let url = try options.gatewayURL()
        let store = DeviceStateStore(directory: options.state)
        let cas = try DeviceCAs.loadOrCreate(directory: options.caDirectory)
        let device = try cas.makeDevice(
            appId: options.appId, environment: options.environment,
            attestationOptions: AttestationOptions(extensions: try signals.extensions(), aclBlob: keyPolicy?.aclBlob))

        let client = HTTP2Client(target: url, eventLoop: MultiThreadedEventLoopGroup.singleton.next())
        defer { _ = client.shutdown() }
        let api = GatewayAPI(requester: client, authority: url.authority, prefix: options.prefix)
        let response = try await api.attest(device: device, userId: userId)
        print(response.bodyText)
        guard response.status == 201 else {
            FileHandle.standardError.write(Data("attestation refused: HTTP \(response.status)\n".utf8))
            throw ExitCode(1)
        }
        try store.save(device: device, state: DeviceState(
            keyId: Base64Text.standard(device.keyId), appId: options.appId,
            environment: options.environment, userId: userId, counter: 0, lastRequest: nil))
        FileHandle.standardError.write(Data(
            "saved key \(Base64Text.url(device.keyId)) in \(options.state); trust anchors: \(cas.attestationRootPath), receipts: \(cas.receiptRootPath)\n".utf8))
    }
}
