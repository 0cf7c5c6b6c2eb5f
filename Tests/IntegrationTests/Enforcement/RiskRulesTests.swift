import AssertGateCore
import AssertGateTestSupport
import DeviceSim
import Foundation
import NIOHTTP1
import Testing
import Verifier

extension Integration {
    /// risk.md §1–§2 through the whole gateway, real Redis and the recording
    /// upstream: every rule key passing, rejecting in enforce, forwarded as
    /// `trust=invalid` in monitor and as a flag; the missing-signal column;
    /// route values replacing app values; assertion extensions winning over
    /// the attestation's; the always-on environment and App ID re-check
    /// across a reload.
    @Suite(.serialized) struct RiskRulesTests {
        /// Each rule key with the value its routes require (or flag).
        static let rules: [(key: String, value: String, reason: String)] = [
            ("environments", "[production]", "environment-not-allowed"),
            ("launchCategories", "[app-store]", "launch-category-not-allowed"),
            ("minAppVersion", "\"2.10\"", "app-version-too-old"),
            ("keyPolicy", "macos-full-security", "key-policy-not-allowed"),
            ("maxUserKeys", "1", "too-many-keys"),
            ("maxRiskMetric", "5", "risk-too-high"),
        ]

        /// `/r/<key>/e/` require+enforce, `/m/` require+monitor, `/f/` flag+enforce.
        static var ruleRoutes: [String] {
            rules.flatMap { r in
                [
                    "{match: {prefix: /r/\(r.key)/e/}, upstream: legacy, mode: enforce, rules: {require: {\(r.key): \(r.value)}}}",
                    "{match: {prefix: /r/\(r.key)/m/}, upstream: legacy, mode: monitor, rules: {require: {\(r.key): \(r.value)}}}",
                    "{match: {prefix: /r/\(r.key)/f/}, upstream: legacy, mode: enforce, rules: {flag: {\(r.key): \(r.value)}}}",
                ]
            }
        }

        /// A simulated device with its own counter.
        final class App: @unchecked Sendable {
            let device: SimDevice
            var counter: UInt32 = 0
            init(_ device: SimDevice) { self.device = device }
            func next() -> UInt32 {
                counter += 1
                return counter
            }
        }

        struct Profile {
            var environment: AttestationEnvironment = .production
            var category: UInt32? = 4
            var version: String? = "2.10"
            var policy: SimKeyPolicy? = .macosFullSecurity
            var userId: String? = "user-\(UUID().uuidString)"
            var risk: Int? = 3
        }

        static func attest(_ h: EnforcementHarness, _ p: Profile) async throws -> App {
            let app = App(try h.newDevice())
            let extensions = p.category == nil && p.version == nil
                ? nil : DeviceSim.AuthenticatorExtensions.launch(category: p.category, bundleVersion: p.version)
            let r = try await h.attest(
                app.device, userId: p.userId, environment: p.environment,
                options: AttestationOptions(extensions: extensions, aclBlob: p.policy?.aclBlob))
            #expect(r.status == 201, "\(r.body)")
            if let risk = p.risk {
                try h.redis.run([
                    "HSET", "ag:{\(app.device.keyIdBase64URL)}:key", "risk", String(risk),
                    "risk_at", String(Int(Date().timeIntervalSince1970) - 10),
                ])
            }
            return app
        }

        static func get(
            _ h: EnforcementHarness, _ app: App, _ path: String, extensions: DeviceSim.AuthenticatorExtensions? = nil
        ) async throws -> (EnforcementHarness.Response, HTTPRequestHead?) {
            let before = h.upstreamCount
            let r = try await h.send(
                "GET", path,
                headers: h.assertionHeaders(app.device, method: "GET", path: path, counter: app.next(), extensions: extensions))
            return (r, h.upstreamCount > before ? h.lastUpstreamHead : nil)
        }

        @Test func everyRulePassesRejectsInEnforceIsInvalidInMonitorAndFlags() async throws {
            var options = EnforcementHarness.Options()
            options.extraRoutes = Self.ruleRoutes
            let h = try await EnforcementHarness.start(options)
            let good = try await Self.attest(h, Profile())
            // One device per rule, failing exactly that rule.
            var failing: [String: App] = [:]
            failing["environments"] = try await Self.attest(h, Profile(environment: .development))
            failing["launchCategories"] = try await Self.attest(h, Profile(category: 2))
            failing["minAppVersion"] = try await Self.attest(h, Profile(version: "2.9"))
            failing["keyPolicy"] = try await Self.attest(h, Profile(policy: .other))
            let shared = "shared-\(UUID().uuidString)"
            _ = try await Self.attest(h, Profile(userId: shared))
            failing["maxUserKeys"] = try await Self.attest(h, Profile(userId: shared))
            failing["maxRiskMetric"] = try await Self.attest(h, Profile(risk: 6))

            for rule in Self.rules {
                let bad = try #require(failing[rule.key])
                // Passing: forwarded verified, no flags.
                let (ok, okHead) = try await Self.get(h, good, "/r/\(rule.key)/e/x")
                #expect(ok.status == 200, "\(rule.key): \(ok.body)")
                #expect(okHead?.headers.first(name: "x-assertgate-trust") == "verified", "\(rule.key)")
                #expect(okHead?.headers["x-assertgate-flags"].isEmpty == true, "\(rule.key)")
                // The failing device passes every other rule's route.
                for other in Self.rules where other.key != rule.key {
                    let (r, _) = try await Self.get(h, bad, "/r/\(other.key)/e/x")
                    #expect(r.status == 200, "\(rule.key) device on \(other.key): \(r.body)")
                }

                // enforce + require: 403 with the reason, problem+json, nothing upstream.
                let (rejected, rejectedHead) = try await Self.get(h, bad, "/r/\(rule.key)/e/x")
                #expect(rejected.status == 403, "\(rule.key): \(rejected.body)")
                #expect(rejected.reason == rule.reason, "\(rule.key)")
                #expect(rejected.headers["content-type"] == "application/problem+json", "\(rule.key)")
                #expect(rejectedHead == nil, "\(rule.key) reached the upstream")

                // monitor + require: trust=invalid with the reason, no identity headers.
                let (monitored, mHead) = try await Self.get(h, bad, "/r/\(rule.key)/m/x")
                #expect(monitored.status == 200, "\(rule.key)")
                let m = try #require(mHead, "\(rule.key)")
                #expect(m.headers.first(name: "x-assertgate-trust") == "invalid", "\(rule.key)")
                #expect(m.headers.first(name: "x-assertgate-reason") == rule.reason, "\(rule.key)")
                #expect(m.headers["x-assertgate-key-id"].isEmpty && m.headers["x-assertgate-user"].isEmpty, "\(rule.key)")
                #expect(m.headers["x-assertgate-flags"].isEmpty, "\(rule.key)")

                // flag: verified, identity headers, the reason in Flags, signed.
                let (flagged, fHead) = try await Self.get(h, bad, "/r/\(rule.key)/f/x")
                #expect(flagged.status == 200, "\(rule.key): \(flagged.body)")
                let f = try #require(fHead, "\(rule.key)")
                #expect(f.headers.first(name: "x-assertgate-trust") == "verified", "\(rule.key)")
                #expect(f.headers.first(name: "x-assertgate-flags") == rule.reason, "\(rule.key)")
                #expect(f.headers.first(name: "x-assertgate-key-id") == bad.device.keyIdBase64URL, "\(rule.key)")
                #expect(try await IndependentSignatureCheck.verify(f, secret: EnforcementHarness.signingSecret))
            }

            // The signals reach the upstream as headers (risk.md §2).
            let (_, head) = try await Self.get(h, good, "/enforce/signals")
            #expect(head?.headers.first(name: "x-assertgate-app-version") == "2.10")
            #expect(head?.headers.first(name: "x-assertgate-launch-category") == "app-store")
            #expect(head?.headers.first(name: "x-assertgate-key-policy") == "macos-full-security")
            #expect(head?.headers.first(name: "x-assertgate-env") == "production")

            // assertgate_rule_results_total: each rule rejected once in enforce and
            // once in monitor, flagged once (every rule route's upstream is `legacy`).
            let metrics = try await h.send("GET", "/metrics", http1: true, base: h.adminBase).body
            for rule in Self.rules {
                #expect(metrics.contains(#"assertgate_rule_results_total{route="legacy",rule="\#(rule.key)",result="reject"} 2"#), "\(rule.key)")
                #expect(metrics.contains(#"assertgate_rule_results_total{route="legacy",rule="\#(rule.key)",result="flag"} 1"#), "\(rule.key)")
                #expect(metrics.contains(#"assertgate_rule_results_total{route="legacy",rule="\#(rule.key)",result="pass"}"#), "\(rule.key)")
            }

            // Every series the Grafana dashboard queries is one this live /metrics exports.
            var root = URL(fileURLWithPath: #filePath)
            for _ in 0..<4 { root.deleteLastPathComponent() }
            let dashboard = try Data(contentsOf: root.appendingPathComponent("deploy/grafana/assertgate-risk.json"))
            let json = try #require(try JSONSerialization.jsonObject(with: dashboard) as? [String: Any])
            let panels = try #require(json["panels"] as? [[String: Any]])
            let exprs = panels.flatMap { ($0["targets"] as? [[String: Any]] ?? []).compactMap { $0["expr"] as? String } }
            #expect(exprs.count >= 8)
            let exported = Set(metrics.split(separator: "\n").filter { $0.hasPrefix("# TYPE ") }
                .compactMap { $0.split(separator: " ").dropFirst(2).first.map(String.init) })
            for expr in exprs {
                var rest = Substring(expr)
                while let start = rest.range(of: "assertgate_") {
                    let name = String(rest[start.lowerBound...].prefix { $0.isLetter || $0.isNumber || $0 == "_" })
                    #expect(exported.contains(name), "dashboard queries \(name), not in /metrics")
                    rest = rest[start.upperBound...]
                }
            }
            try await h.stop()
        }

        @Test func missingSignalsFollowTheTable() async throws {
            var options = EnforcementHarness.Options()
            options.extraRoutes = Self.ruleRoutes + [
                "{match: {prefix: /cat-or-missing/}, upstream: legacy, mode: enforce, rules: {require: {launchCategories: [app-store, missing]}}}"
            ]
            let h = try await EnforcementHarness.start(options)
            // iOS 26 and older: no extensions, no key policy; no userId, no refreshed receipt.
            let bare = try await Self.attest(
                h, Profile(category: nil, version: nil, policy: nil, userId: nil, risk: nil))
            let expected: [String: Int] = [
                "environments": 200, "launchCategories": 403, "minAppVersion": 200, "keyPolicy": 403,
                "maxUserKeys": 200, "maxRiskMetric": 200,
            ]
            for rule in Self.rules {
                let (r, head) = try await Self.get(h, bare, "/r/\(rule.key)/e/x")
                #expect(r.status == expected[rule.key], "\(rule.key): \(r.body)")
                if r.status == 403 { #expect(r.reason == rule.reason) }
                if r.status == 200 {
                    #expect(head?.headers["x-assertgate-launch-category"].isEmpty == true)
                    #expect(head?.headers["x-assertgate-key-policy"].isEmpty == true)
                    #expect(head?.headers["x-assertgate-app-version"].isEmpty == true)
                }
            }
            let (allowed, _) = try await Self.get(h, bare, "/cat-or-missing/x")
            #expect(allowed.status == 200, "\(allowed.body)")
            let metrics = try await h.send("GET", "/metrics", http1: true, base: h.adminBase).body
            #expect(metrics.contains(
                #"assertgate_verified_requests_total{route="legacy",environment="production",launch_category="missing"} 5"#),
                "\(metrics)")
            try await h.stop()
        }

        @Test func routeValuesReplaceAppValuesPerKey() async throws {
            var options = EnforcementHarness.Options()
            options.appRules = #"{require: {minAppVersion: "3", launchCategories: [app-store]}, flag: {maxUserKeys: 5}}"#
            options.extraRoutes = [
                #"{match: {prefix: /override/}, upstream: legacy, mode: enforce, rules: {require: {minAppVersion: "2"}, flag: {minAppVersion: "2.6"}}}"#
            ]
            let h = try await EnforcementHarness.start(options)
            let app = try await Self.attest(h, Profile(version: "2.5"))
            // The app's rules on a route without its own: minAppVersion 3.
            let (plain, _) = try await Self.get(h, app, "/enforce/x")
            #expect(plain.status == 403)
            #expect(plain.reason == "app-version-too-old")
            // The route's minAppVersion replaces the app's; the app's launchCategories still apply.
            let (overridden, head) = try await Self.get(h, app, "/override/x")
            #expect(overridden.status == 200, "\(overridden.body)")
            // §6.20: the route's flag.minAppVersion applies next to the require block.
            #expect(head?.headers.first(name: "x-assertgate-flags") == "app-version-too-old")
            let testflight = try await Self.attest(h, Profile(category: 2, version: "2.7"))
            let (wrongCategory, _) = try await Self.get(h, testflight, "/override/x")
            #expect(wrongCategory.status == 403)
            #expect(wrongCategory.reason == "launch-category-not-allowed")
            try await h.stop()
        }

        @Test func assertionExtensionsWinOverTheAttestations() async throws {
            var options = EnforcementHarness.Options()
            options.extraRoutes = [
                #"{match: {prefix: /store-only/}, upstream: legacy, mode: enforce, rules: {require: {launchCategories: [app-store], minAppVersion: "2"}}}"#
            ]
            let h = try await EnforcementHarness.start(options)
            // Attested as a TestFlight build 1.0, the category as a CBOR integer (once a failure of the whole attestation).
            let app = App(try h.newDevice())
            let attested = try await h.attest(
                app.device, environment: .production,
                options: AttestationOptions(extensions: .launch(category: 2, asInteger: true, bundleVersion: "1.0")))
            #expect(attested.status == 201, "\(attested.body)")
            let record = "ag:{\(app.device.keyIdBase64URL)}:key"
            #expect(try h.redis.run(["HGET", record, "cat"]).string == "2")

            let (old, _) = try await Self.get(h, app, "/store-only/x")
            #expect(old.status == 403)
            #expect(old.reason == "launch-category-not-allowed")

            // "An app update": the running app is the App Store build 2.1.
            let update = DeviceSim.AuthenticatorExtensions.launch(category: 4, bundleVersion: "2.1")
            let (updated, head) = try await Self.get(h, app, "/store-only/x", extensions: update)
            #expect(updated.status == 200, "\(updated.body)")
            #expect(head?.headers.first(name: "x-assertgate-app-version") == "2.1")
            #expect(head?.headers.first(name: "x-assertgate-launch-category") == "app-store")

            // The integer form in the assertion too.
            let integer = DeviceSim.AuthenticatorExtensions.launch(category: 4, asInteger: true, bundleVersion: "2.2")
            #expect(try await Self.get(h, app, "/store-only/x", extensions: integer).0.status == 200)

            // A malformed category in the assertion is absent (§6.1): the attestation's
            // TestFlight applies, and the malformed value is counted, never a failure by itself.
            let malformed = DeviceSim.AuthenticatorExtensions(bundleVersion: "2.1", validationCategory: [4, 0])
            let (fallback, _) = try await Self.get(h, app, "/store-only/x", extensions: malformed)
            #expect(fallback.status == 403)
            #expect(fallback.reason == "launch-category-not-allowed")
            let (plain, plainHead) = try await Self.get(h, app, "/enforce/x", extensions: malformed)
            #expect(plain.status == 200)
            #expect(plainHead?.headers.first(name: "x-assertgate-launch-category") == "testflight")
            #expect(plainHead?.headers.first(name: "x-assertgate-app-version") == "2.1")
            // A number Apple has not named is written in decimal, and shares one metric label.
            let (unnamed, unnamedHead) = try await Self.get(
                h, app, "/enforce/x", extensions: .launch(category: 99, bundleVersion: "2.1"))
            #expect(unnamed.status == 200)
            #expect(unnamedHead?.headers.first(name: "x-assertgate-launch-category") == "99")
            let metrics = try await h.send("GET", "/metrics", http1: true, base: h.adminBase).body
            #expect(metrics.contains(#"assertgate_malformed_extensions_total{key="apple_validation_category_01"} 2"#), "\(metrics)")
            for (category, n) in [("app-store", 2), ("testflight", 1), ("other", 1)] {
                #expect(metrics.contains(
                    #"assertgate_verified_requests_total{route="legacy",environment="production",launch_category="\#(category)"} \#(n)"#),
                    "\(category): \(metrics)")
            }

            // §6.14: the key record keeps the attestation's signals.
            let auth = [("Authorization", "Bearer \(EnforcementHarness.adminToken)")]
            let rec = try await h.send("GET", "/keys/\(app.device.keyIdBase64URL)", headers: auth, http1: true, base: h.adminBase)
            #expect(rec.json["appVersion"] as? String == "1.0")
            #expect(rec.json["launchCategory"] as? Int == 2)
            try await h.stop()
        }

        @Test func environmentAndAppIdAreRecheckedAfterAReload() async throws {
            let h = try await EnforcementHarness.start()
            let dev = try await Self.attest(h, Profile(environment: .development))
            let prod = try await Self.attest(h, Profile(environment: .production))
            #expect(try await Self.get(h, dev, "/enforce/x").0.status == 200)

            // `development` removed from the app: the stored development key is refused, no restart.
            try await h.reload {
                $0.replacingOccurrences(
                    of: "appId: \(EnforcementHarness.appId), environments: [development, production]",
                    with: "appId: \(EnforcementHarness.appId), environments: [production]")
            }
            let (refused, _) = try await Self.get(h, dev, "/enforce/x")
            #expect(refused.status == 403)
            #expect(refused.reason == "environment-not-allowed")
            #expect(refused.headers["content-type"] == "application/problem+json")
            let (monitored, head) = try await Self.get(h, dev, "/monitor/x")
            #expect(monitored.status == 200)
            #expect(head?.headers.first(name: "x-assertgate-trust") == "invalid")
            #expect(head?.headers.first(name: "x-assertgate-reason") == "environment-not-allowed")
            #expect(try await Self.get(h, prod, "/enforce/x").0.status == 200)

            // The app removed altogether: its keys are refused as app-id-mismatch.
            try await h.reload {
                $0.replacingOccurrences(of: "appId: \(EnforcementHarness.appId),", with: "appId: ABCDE12345.com.example.gone,")
            }
            let (gone, _) = try await Self.get(h, prod, "/enforce/x")
            #expect(gone.status == 403)
            #expect(gone.reason == "app-id-mismatch")
            let metrics = try await h.send("GET", "/metrics", http1: true, base: h.adminBase).body
            #expect(metrics.contains(#"assertgate_rule_results_total{route="legacy",rule="environments",result="reject"} 3"#))
            try await h.stop()
        }

        /// assertgate-device writes every signal a rule needs (risk.md §1), in
        /// the attestation and in a request's assertion.
        @Test func deviceToolWritesTheSignals() async throws {
            guard let tool = BuiltProduct.path("assertgate-device") else {
                Issue.record("assertgate-device is not built next to the tests")
                return
            }
            let state = NSTemporaryDirectory() + "assertgate-device-\(UUID().uuidString)"
            defer { try? FileManager.default.removeItem(atPath: state) }
            #expect(try await Run.tool(tool, ["init-ca", "--state", state]).status == 0)
            var options = EnforcementHarness.Options(caDirectory: state + "/ca")
            options.extraRoutes = [
                #"{match: {prefix: /mac/}, upstream: legacy, mode: enforce, rules: {require: {keyPolicy: macos-full-security, launchCategories: [app-store], minAppVersion: "2"}}}"#
            ]
            let h = try await EnforcementHarness.start(options)
            let common = ["--gateway", h.base, "--state", state]
            let attest = try await Run.tool(
                tool,
                ["attest", "--launch-category", "testflight", "--category-as-integer", "--bundle-version", "1.5",
                 "--key-policy", "macos-full-security"] + common)
            #expect(attest.status == 0, "\(attest.stdout) \(attest.stderr)")
            // The attestation's TestFlight 1.5 fails the route's rules.
            let old = try await Run.tool(tool, ["request", "GET", "/mac/a"] + common)
            #expect(old.status == 1)
            #expect(old.stdout.contains("launch-category-not-allowed"), "\(old.stdout)")
            // The running app, per its assertion: App Store 2.0.
            let now = try await Run.tool(
                tool, ["request", "GET", "/mac/b", "--launch-category", "4", "--bundle-version", "2.0"] + common)
            #expect(now.status == 0, "\(now.stdout) \(now.stderr)")
            let head = try #require(h.lastUpstreamHead)
            #expect(head.headers.first(name: "x-assertgate-launch-category") == "app-store")
            #expect(head.headers.first(name: "x-assertgate-app-version") == "2.0")
            #expect(head.headers.first(name: "x-assertgate-key-policy") == "macos-full-security")
            let bad = try await Run.tool(tool, ["request", "GET", "/mac/c", "--launch-category", "appstore"] + common)
            #expect(bad.status != 0)
            #expect(bad.stderr.contains("--launch-category: 'appstore' is not a number or one of"), "\(bad.stderr)")
            try await h.stop()
        }

        @Test func rulesCostNoExtraStoreRoundTrip() async throws {
            var options = EnforcementHarness.Options()
            options.appRules = #"{require: {launchCategories: [app-store, missing], minAppVersion: "1"}, flag: {maxUserKeys: 3, maxRiskMetric: 5}}"#
            options.extraRoutes = [
                "{match: {prefix: /ruled/}, upstream: legacy, mode: enforce, rules: {require: {keyPolicy: macos-full-security}}}"
            ]
            let h = try await EnforcementHarness.start(options)
            let app = try await Self.attest(h, Profile())
            for _ in 0..<4 { #expect(try await Self.get(h, app, "/ruled/warm").0.status == 200) }
            try h.redis.run(["CONFIG", "RESETSTAT"])
            let n = 10
            for _ in 0..<n { #expect(try await Self.get(h, app, "/ruled/x").0.status == 200) }
            // Commands a script runs are counted too (HMGET, HSET, SCARD): what
            // matters is one EVALSHA per request and no command of another kind.
            let stats = try h.redis.run(["INFO", "commandstats"]).string ?? ""
            let commands = stats.split(separator: "\r\n").filter { $0.hasPrefix("cmdstat_") }
                .map { String($0.prefix { $0 != ":" && $0 != "|" }) }
            #expect(stats.contains("cmdstat_evalsha:calls=\(n),"), "\(stats)")
            #expect(Set(commands).isSubset(of: ["cmdstat_evalsha", "cmdstat_hmget", "cmdstat_hset", "cmdstat_scard", "cmdstat_info", "cmdstat_config"]), "\(commands)")
            try await h.stop()
        }
    }
}
