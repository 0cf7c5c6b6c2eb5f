import Foundation

enum TemporaryDirectory {
    /// A fresh directory under the system temp dir (left for the OS to clean).
    static func make() throws -> String {
        let path = NSTemporaryDirectory() + "devicesim-tests-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }
}
