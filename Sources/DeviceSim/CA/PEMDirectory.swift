import Foundation

/// Reads and writes the PEM files a persisted CA or device consists of.
/// Private keys are written 0600.
enum PEMDirectory {
    static func write(_ text: String, to path: String, secret: Bool) throws {
        let attributes: [FileAttributeKey: Any] = [.posixPermissions: secret ? 0o600 : 0o644]
        let directory = (path as NSString).deletingLastPathComponent
        do {
            if !directory.isEmpty {
                try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            }
        } catch {
            throw DeviceSimError.io(path: directory, reason: "cannot create directory: \(error)")
        }
        if FileManager.default.fileExists(atPath: path) {
            do { try FileManager.default.removeItem(atPath: path) } catch {
                throw DeviceSimError.io(path: path, reason: "cannot replace: \(error)")
            }
        }
        guard FileManager.default.createFile(atPath: path, contents: Data(text.utf8), attributes: attributes) else {
            throw DeviceSimError.io(path: path, reason: "cannot write")
        }
    }

    static func read(_ path: String) throws -> String {
        guard let data = FileManager.default.contents(atPath: path) else {
            throw DeviceSimError.io(path: path, reason: "cannot read")
        }
        return String(decoding: data, as: UTF8.self)
    }

    static func join(_ directory: String, _ name: String) -> String {
        (directory as NSString).appendingPathComponent(name)
    }
}
