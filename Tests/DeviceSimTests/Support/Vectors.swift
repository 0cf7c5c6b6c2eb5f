import Foundation

/// Locates the real-device vectors: `$ASSERTGATE_VECTORS`, else the
/// repository's `Tests/Vectors`. Absent vectors are an error.
enum Vectors {
    struct Missing: Error, CustomStringConvertible {
        let path: String
        var description: String {
            "App Attest vectors not found at \(path): set ASSERTGATE_VECTORS to a vectors directory (the repository has Tests/Vectors)"
        }
    }

    static func directory() throws -> String {
        if let override = ProcessInfo.processInfo.environment["ASSERTGATE_VECTORS"], !override.isEmpty {
            return try existing(override)
        }
        // <root>/Tests/DeviceSimTests/Support/Vectors.swift → <root>/Tests/Vectors.
        let packageRoot = URL(fileURLWithPath: #filePath)
            .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        return try existing(packageRoot.appendingPathComponent("Tests/Vectors").path)
    }

    static func read(_ relativePath: String) throws -> [UInt8] {
        let path = try directory() + "/" + relativePath
        guard let data = FileManager.default.contents(atPath: path) else { throw Missing(path: path) }
        return Array(data)
    }

    private static func existing(_ path: String) throws -> String {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory), isDirectory.boolValue else {
            throw Missing(path: path)
        }
        return path
    }

    /// Apple Root CA – G3 (DER), after checking the fingerprint the vectors README gives.
    static func appleRootG3() throws -> [UInt8] {
        let pem = String(decoding: try read("roots/Apple_Root_CA_G3.pem"), as: UTF8.self)
        let body = pem.split(separator: "\n").filter { !$0.hasPrefix("-----") }.joined()
        guard let der = Data(base64Encoded: body) else { throw Missing(path: "roots/Apple_Root_CA_G3.pem (not PEM)") }
        let fingerprint = OpenSSLChecks.sha256(Array(der)).map { String(format: "%02X", $0) }.joined(separator: ":")
        guard fingerprint == "63:34:3A:BF:B8:9A:6A:03:EB:B5:7E:9B:3F:5F:A7:BE:7C:4F:5C:75:6F:30:17:B3:A8:C4:88:C3:65:3E:91:79" else {
            throw Missing(path: "roots/Apple_Root_CA_G3.pem (fingerprint \(fingerprint))")
        }
        return Array(der)
    }
}
