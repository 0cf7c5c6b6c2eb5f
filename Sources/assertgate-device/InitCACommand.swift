import ArgumentParser
import Foundation

/// `assertgate-device init-ca`: creates the test CAs (when absent) before the
/// gateway starts, and prints the two PEM paths the gateway's
/// `attestation.trustAnchors` / `receiptTrustAnchors` must name.
struct InitCACommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "init-ca",
        abstract: "Create the test attestation and receipt CAs and print their root certificate paths.")

    @OptionGroup var options: GatewayOptions

    func run() throws {
        let cas = try DeviceCAs.loadOrCreate(directory: options.caDirectory)
        print("trustAnchors: \(cas.attestationRootPath)")
        print("receiptTrustAnchors: \(cas.receiptRootPath)")
    }
}
