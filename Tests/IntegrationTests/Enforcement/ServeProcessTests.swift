import AssertGateTestSupport
import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

extension Integration {
    /// The `assertgate serve` binary as an operator runs it: SIGHUP reloads
    /// (an invalid file keeps the running configuration), SIGTERM turns
    /// /readyz 503, drains the in-flight request and exits 0.
    @Suite(.serialized) struct ServeProcessTests {
        @Test func sighupReloadsAndSigtermDrainsThenExitsZero() async throws {
            let binary = try #require(BuiltProduct.path("assertgate"), "assertgate is not built next to the tests")
            let upstream = try await TestUpstream()
            let dir = NSTemporaryDirectory() + "assertgate-serve-\(UUID().uuidString)"
            try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
            defer { try? FileManager.default.removeItem(atPath: dir) }
            // Port 0 for both: the process binds them itself and logs what it
            // got, so no port chosen here can be taken before it binds.
            func config(mode: String) -> String {
                """
                listeners: [{address: 127.0.0.1:0}]
                admin: {address: 127.0.0.1:0}
                apps: [{appId: ABCDE12345.com.example.app, environments: [development]}]
                store: {memory: {}}
                upstreams: {legacy: {endpoints: [http://127.0.0.1:\(upstream.port)]}}
                routes:
                  - {match: {prefix: /slow}, upstream: legacy, mode: passthrough}
                  - {match: {prefix: /open/}, upstream: legacy, mode: \(mode)}
                logging: {level: info, format: json}

                """
            }
            let configPath = dir + "/gw.yaml"
            try config(mode: "passthrough").write(toFile: configPath, atomically: true, encoding: .utf8)

            let process = Process()
            process.executableURL = URL(fileURLWithPath: binary)
            process.arguments = ["serve", "--config", configPath, "--workers", "1", "--drain-seconds", "10"]
            let logPath = dir + "/gw.log"
            _ = FileManager.default.createFile(atPath: logPath, contents: nil)
            let log = try FileHandle(forWritingTo: URL(fileURLWithPath: logPath))
            process.standardError = log
            process.standardOutput = log
            let exited = AsyncStream.makeStream(of: Int32.self)
            process.terminationHandler = { exited.continuation.yield($0.terminationStatus) }
            try process.run()
            defer { if process.isRunning { kill(process.processIdentifier, SIGKILL) } }

            // Waiting for an external process to listen, bounded by a deadline.
            var bound: (port: Int, admin: Int)?
            #expect(try await poll {
                bound = Self.servingPorts(logPath)
                return bound != nil
            })
            let (port, adminPort) = try #require(bound)
            let base = "http://127.0.0.1:\(port)"
            #expect(try await Run.tool("curl", ["-sf", "http://127.0.0.1:\(adminPort)/healthz"]).status == 0)

            func trust() async throws -> String {
                _ = try await Run.tool("curl", ["-sS", "--http2-prior-knowledge", "\(base)/open/x"])
                return upstream.requests.last?.headers.first(name: "x-assertgate-trust") ?? ""
            }
            #expect(try await trust() == "none")

            // SIGHUP with a valid change: the route becomes monitor.
            try config(mode: "monitor").write(toFile: configPath, atomically: true, encoding: .utf8)
            kill(process.processIdentifier, SIGHUP)
            #expect(try await poll { try await trust() == "missing" })

            // SIGHUP with a broken file: logged, the running configuration stays.
            try "routes: [oops".write(toFile: configPath, atomically: true, encoding: .utf8)
            kill(process.processIdentifier, SIGHUP)
            #expect(try await poll {
                (try? String(contentsOfFile: logPath, encoding: .utf8))?.contains("reload refused") == true
            })
            #expect(try await trust() == "missing")

            // SIGTERM while a slow request is in flight: /readyz turns 503 at
            // once (a load balancer stops sending), the request completes,
            // then the process exits 0.
            let readyz = "http://127.0.0.1:\(adminPort)/readyz"
            #expect(try await Run.tool("curl", ["-s", "-o", "/dev/null", "-w", "%{http_code}", readyz]).stdout == "200")
            let before = upstream.requests.count
            async let slow = Run.tool("curl", ["-sS", "--http2-prior-knowledge", "-w", "\n%{http_code}", "\(base)/slow?ms=3000"])
            // And one over HTTP/1.1 whose answer is not begun yet: it must say
            // `Connection: close`, so the client sends nothing more on it.
            async let slow1 = Run.tool("curl", ["-sS", "--http1.1", "-D", "-", "-o", "/dev/null", "\(base)/slow?ms=3000"])
            try await upstream.waitForRequests(before + 2)
            kill(process.processIdentifier, SIGTERM)
            var drainingAnswer = ""
            #expect(try await poll {
                drainingAnswer = try await Run.tool("curl", ["-s", "-w", "\n%{http_code}", readyz]).stdout
                return drainingAnswer.hasSuffix("\n503")
            }, "\(drainingAnswer)")
            #expect(drainingAnswer.contains(#""reason":"gateway-busy""#), "\(drainingAnswer)")
            #expect(upstream.requests.count == before + 2)
            let answered = try await slow
            #expect(answered.stdout.hasSuffix("\n200"), "\(answered.stdout) \(answered.stderr)")
            let answered1 = try await slow1
            let head1 = answered1.stdout.lowercased()
            #expect(head1.hasPrefix("http/1.1 200") && head1.contains("\r\nconnection: close\r\n"), "\(answered1.stdout) \(answered1.stderr)")
            var status: Int32 = -1
            for await s in exited.stream {
                status = s
                break
            }
            #expect(status == 0)
            let refused = try await Run.tool("curl", ["-sS", "--http2-prior-knowledge", "\(base)/open/x"])
            #expect(refused.status != 0)
            try await upstream.stop()
        }

        /// The data and admin ports from the `assertgate serving` line of a JSON log.
        private static func servingPorts(_ logPath: String) -> (port: Int, admin: Int)? {
            guard let text = try? String(contentsOfFile: logPath, encoding: .utf8) else { return nil }
            for line in text.split(separator: "\n") where line.contains("assertgate serving") {
                guard let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any],
                    let ports = object["ports"] as? String, let admin = (object["admin"] as? String).flatMap({ Int($0) }),
                    let port = Int(ports.trimmingCharacters(in: CharacterSet(charactersIn: "[]")))
                else { return nil }
                return (port, admin)
            }
            return nil
        }

        /// Polls a condition on an external process with a 10 s deadline.
        private func poll(_ condition: () async throws -> Bool) async throws -> Bool {
            let deadline = Date().addingTimeInterval(10)
            while Date() < deadline {
                if try await condition() { return true }
                try await Task.sleep(for: .milliseconds(50))
            }
            return false
        }
    }
}
