import AppleMock
import ArgumentParser

/// `assertgate-device device-token`: DeviceCheck device tokens for the Apple
/// mock, as an app gets them from `DCDevice.generateToken()` (base64).
struct DeviceTokenCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "device-token",
        abstract: "Print DeviceCheck device tokens that `apple-mock` accepts, one per line.",
        discussion: """
            Every token of one --device sees the same bits in the mock; each token is different (a random nonce), \
            as Apple's are. The mock refuses tokens made with another --device-secret.
            """)

    @Option(help: "The device the token stands for (1 to 64 bytes).")
    var device: String

    @Option(help: "How many tokens.")
    var count = 1

    @Option(help: "MAC secret shared with apple-mock --device-secret (default: the mock's default).")
    var deviceSecret: String?

    func run() throws {
        guard count >= 1, count <= 10_000 else { throw ValidationError("--count: 1 to 10000") }
        let secret = deviceSecret.map { Array($0.utf8) } ?? MockDeviceToken.defaultSecret
        for _ in 0..<count {
            do {
                print(try MockDeviceToken.make(device: device, secret: secret))
            } catch {
                throw ValidationError("--device: \(error)")
            }
        }
    }
}
