import AssertGateTestSupport
import Foundation

/// Runs `h2_test_server.py` (python3-h2), or another script of Support/, on a free loopback port.
typealias TestH2Server = PythonScriptServer

extension PythonScriptServer {
    convenience init(script name: String = "h2_test_server.py", arguments: [String] = []) throws {
        let path = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent(name).path
        try self.init(scriptPath: path, arguments: arguments)
    }
}
