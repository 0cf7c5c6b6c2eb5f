import AssertGateTestSupport
import Foundation
import Testing

extension Integration {
    /// 200 MiB through the gateway both ways must stream: the peak RSS of this
    /// process (gateway + upstream + test) may grow only by a bounded amount.
    @Suite(.serialized) struct StreamingBodyTests {
        static let size = 200 << 20
        /// Measured growth is ~0.1–3 MiB; buffering the body would need ≥ 200 MiB.
        static let maxGrowthKiB = 16 << 10

        private func sparseFile() throws -> URL {
            let url = URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent("ag-upload-\(getpid()).bin")
            _ = FileManager.default.createFile(atPath: url.path, contents: nil)
            let fh = try FileHandle(forWritingTo: url)
            try fh.truncate(atOffset: UInt64(Self.size))
            try fh.close()
            return url
        }

        @Test(arguments: ["--http2-prior-knowledge", "--http1.1"])
        func upload200MiB(_ proto: String) async throws {
            let h = try await Harness.start()
            let file = try sparseFile()
            defer { try? FileManager.default.removeItem(at: file) }
            Memory.resetPeak()
            let before = Memory.rssKiB
            let r = try await Run.tool(
                "curl", ["-sS", proto, "-X", "POST", "-T", file.path, "\(h.base)/upload"], timeout: 300)
            let growth = Memory.peakKiB - before
            print("[\(proto)] peak RSS growth \(growth) KiB (before \(before) KiB)")
            #expect(r.status == 0, "\(r.stderr)")
            #expect(r.stdout == "{\"received_bytes\":\(Self.size)}\n")
            // curl sends Expect: 100-continue over h1; the gateway answers it and never forwards it.
            #expect(h.upstream.requests.first?.headers["expect"] == [])
            #expect(growth < Self.maxGrowthKiB, "peak RSS grew by \(growth) KiB")
            try await h.stop()
        }

        @Test(arguments: ["--http2-prior-knowledge", "--http1.1"])
        func uploadOverLimitGets413(_ proto: String) async throws {
            let h = try await Harness.start { $0.limits.maxRequestBodyBytes = 1 << 20 }
            let file = try sparseFile()
            defer { try? FileManager.default.removeItem(at: file) }
            let r = try await Run.tool(
                "curl", ["-sS", proto, "-X", "POST", "-T", file.path, "-w", "\n%{http_code}", "\(h.base)/upload"],
                timeout: 120)
            #expect(r.stdout.hasSuffix("\n413"), "\(r.stdout) \(r.stderr)")
            #expect(r.stdout.contains("\"reason\":\"body-too-large\""))
            try await h.stop()
        }

        @Test(arguments: ["--http2-prior-knowledge", "--http1.1"])
        func download200MiB(_ proto: String) async throws {
            let h = try await Harness.start()
            Memory.resetPeak()
            let before = Memory.rssKiB
            let r = try await Run.tool(
                "curl", ["-sS", proto, "-o", "/dev/null", "-w", "%{http_code} %{size_download}",
                         "\(h.base)/download?bytes=\(Self.size)"], timeout: 300)
            let growth = Memory.peakKiB - before
            print("[\(proto)] peak RSS growth \(growth) KiB (before \(before) KiB)")
            #expect(r.status == 0, "\(r.stderr)")
            #expect(r.stdout == "200 \(Self.size)")
            #expect(growth < Self.maxGrowthKiB, "peak RSS grew by \(growth) KiB")
            try await h.stop()
        }
    
        @Test func stalledHTTP2ClientPausesTheUpstream() async throws {
            let h = try await Harness.start()
            let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
                .appendingPathComponent("Adversarial/h2_slow_reader.py").path
            Memory.resetPeak()
            let before = Memory.rssKiB
            // The upstream could push 200 MiB in well under the 2 s the client stalls.
            let r = try await Run.tool("python3", [script, String(h.port), "/download?bytes=\(Self.size)", "2"])
            let growth = Memory.peakKiB - before
            print("[stalled h2] peak RSS growth \(growth) KiB")
            #expect(r.status == 0, "\(r.stdout) \(r.stderr)")
            #expect(r.stdout.hasPrefix("received "))
            #expect(growth < Self.maxGrowthKiB, "peak RSS grew by \(growth) KiB")
            try await h.stop()
        }
    
        @Test(arguments: ["--http2-prior-knowledge", "--http1.1"])
        func slowClientPausesTheUpstream(_ proto: String) async throws {
            let h = try await Harness.start()
            Memory.resetPeak()
            let before = Memory.rssKiB
            let r = try await Run.tool("curl", [
                "-sS", proto, "--limit-rate", "256k", "--max-time", "2", "-o", "/dev/null",
                "\(h.base)/download?bytes=\(Self.size)",
            ])
            let growth = Memory.peakKiB - before
            print("[slow \(proto)] peak RSS growth \(growth) KiB")
            #expect(r.status == 28)  // curl's own --max-time: the download was still running
            #expect(growth < Self.maxGrowthKiB, "peak RSS grew by \(growth) KiB")
            try await h.stop()
        }
    }
}
