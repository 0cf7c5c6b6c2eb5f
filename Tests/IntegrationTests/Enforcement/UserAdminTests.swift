import AssertGateCore
import AssertGateTestSupport
import DeviceSim
import Foundation
import Testing
import Verifier

extension Integration {
    /// risk.md §2 admin: `GET /users/{userId}/keys` and `POST
    /// /users/{userId}/revoke` with the bearer token, on one Redis server and
    /// on the three-master cluster (a user's key set on its own slot).
    @Suite(.serialized) struct UserAdminTests {
        @Test(arguments: [false, true])
        func listAndRevokeEveryKeyOfAUser(cluster: Bool) async throws {
            var options = EnforcementHarness.Options()
            options.redisCluster = cluster
            let h = try await EnforcementHarness.start(options)
            let user = "ann b/é"
            let encoded = "ann%20b%2F%C3%A9"
            var devices: [SimDevice] = []
            for version in ["1.0", "2.0"] {
                let d = try h.newDevice()
                let r = try await h.attest(
                    d, userId: user, environment: .production,
                    options: AttestationOptions(
                        extensions: .launch(category: 4, bundleVersion: version),
                        aclBlob: SimKeyPolicy.macosFullSecurity.aclBlob))
                #expect(r.status == 201, "\(r.body)")
                devices.append(d)
            }
            let bob = try h.newDevice()
            #expect(try await h.attest(bob, userId: "bob").status == 201)
            let auth = [("Authorization", "Bearer \(EnforcementHarness.adminToken)")]

            // Without the token: 401.
            let anonymous = try await h.send("GET", "/users/\(encoded)/keys", http1: true, base: h.adminBase)
            #expect(anonymous.status == 401)
            #expect(anonymous.reason == "unauthorized")

            let listed = try await h.send("GET", "/users/\(encoded)/keys", headers: auth, http1: true, base: h.adminBase)
            #expect(listed.status == 200, "\(listed.body)")
            #expect(listed.json["userId"] as? String == user)
            let keys = try #require(listed.json["keys"] as? [[String: Any]])
            #expect(Set(keys.compactMap { $0["keyId"] as? String }) == Set(devices.map(\.keyIdBase64URL)))
            #expect(Set(keys.compactMap { $0["appVersion"] as? String }) == ["1.0", "2.0"])
            #expect(keys.allSatisfy { $0["launchCategory"] as? Int == 4 && $0["keyPolicy"] as? String == "macos-full-security" })
            #expect(keys.allSatisfy { $0["revoked"] as? Bool == false && $0["userId"] as? String == user })

            let unknown = try await h.send("GET", "/users/nobody/keys", headers: auth, http1: true, base: h.adminBase)
            #expect(unknown.status == 404)
            #expect(unknown.reason == "unknown-user")
            #expect(unknown.headers["content-type"] == "application/problem+json")
            let wrongMethod = try await h.send("GET", "/users/\(encoded)/revoke", headers: auth, http1: true, base: h.adminBase)
            #expect(wrongMethod.status == 405)

            let revoked = try await h.send("POST", "/users/\(encoded)/revoke", headers: auth, http1: true, base: h.adminBase)
            #expect(revoked.status == 200, "\(revoked.body)")
            let after = try #require(revoked.json["keys"] as? [[String: Any]])
            #expect(after.count == 2)
            #expect(after.allSatisfy { $0["revoked"] as? Bool == true })
            for d in devices {
                let r = try await h.send(
                    "GET", "/enforce/x", headers: h.assertionHeaders(d, method: "GET", path: "/enforce/x", counter: 1))
                #expect(r.status == 403)
                #expect(r.reason == "revoked-key")
            }
            // Another user's key is untouched.
            let b = try await h.send(
                "GET", "/enforce/x", headers: h.assertionHeaders(bob, method: "GET", path: "/enforce/x", counter: 1))
            #expect(b.status == 200, "\(b.body)")
            let unknownRevoke = try await h.send("POST", "/users/nobody/revoke", headers: auth, http1: true, base: h.adminBase)
            #expect(unknownRevoke.status == 404)
            try await h.stop()
        }
    }
}
