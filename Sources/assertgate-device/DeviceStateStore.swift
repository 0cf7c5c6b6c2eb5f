import DeviceClient
import Foundation

/// What `request` needs between runs; the private key sits beside it as PEM.
struct DeviceState: Codable {
    struct SentRequest: Codable {
        var method: String
        var path: String
        var headers: [[String]]
        var body: String  // b64
    }

    var keyId: String
    var appId: String
    var environment: DeviceEnvironment
    var userId: String?
    /// The last counter used in an assertion; the next one is counter + 1.
    var counter: UInt32
    /// For `--replay`: the previous request exactly as sent.
    var lastRequest: SentRequest?
}

struct DeviceStateStore {
    let directory: String

    var keyPath: String { directory + "/device.key.pem" }
    var statePath: String { directory + "/state.json" }

    enum StoreError: Error, CustomStringConvertible {
        case noDevice(String)
        var description: String {
            switch self {
            case .noDevice(let dir): "no attested device in \(dir); run `assertgate-device attest` first"
            }
        }
    }

    func save(device: SimDeviceAdapter, state: DeviceState) throws {
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        try device.save(to: keyPath)
        try save(state)
    }

    func save(_ state: DeviceState) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        try encoder.encode(state).write(to: URL(fileURLWithPath: statePath), options: .atomic)
    }

    func load() throws -> DeviceState {
        guard FileManager.default.fileExists(atPath: statePath) else { throw StoreError.noDevice(directory) }
        return try JSONDecoder().decode(DeviceState.self, from: Data(contentsOf: URL(fileURLWithPath: statePath)))
    }
}
