import Foundation
import Yams

/// The veehaitch/devicecheck-appattest multi-document YAML files.
struct DeviceCheckDocument {
    let file: String
    let fields: [String: Any]

    var type: String { fields["type"] as? String ?? "" }
    func string(_ key: String) -> String? { fields[key] as? String }
    var properties: [String: Any] { fields["properties"] as? [String: Any] ?? [:] }

    static let files = [
        "ios-14.2", "ios-14.3-beta-2", "ios-14.3-beta-3", "ios-14.3", "ios-14.4-beta-1",
        "ios-14.4-beta-2", "ios-14.4",
    ]

    static func load(_ file: String) throws -> [DeviceCheckDocument] {
        let text = try Vectors.text("devicecheck-appattest/\(file).yaml")
        return try Yams.load_all(yaml: text).compactMap { doc in
            (doc as? [String: Any]).map { DeviceCheckDocument(file: file, fields: $0) }
        }
    }

    static let appId = "6MURL8TA57.de.vincent-haupert.apple-appattest-poc"
    static let clientData = "wurzelpfropf"
}
