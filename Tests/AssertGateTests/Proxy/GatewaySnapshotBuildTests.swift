import Testing

@testable import AssertGateCore

/// `GatewaySnapshot.build`: the one place a configuration's runtime pieces are made.
@Suite struct GatewaySnapshotBuildTests {
    /// A CA certificate that loads (any will do for building a client context).
    static let caFile = PackagePaths.root + "/Tests/Vectors/roots/Apple_Root_CA_G3.pem"

    private func config(anchors: [String] = [], ca: String? = nil) -> GatewayConfig {
        var c = GatewayConfig(
            listeners: [], apps: [AppConfig(appId: "ABCDE12345.com.example.app")],
            upstreams: ["u": UpstreamConfig(endpoints: [UpstreamEndpoint(host: "127.0.0.1", port: 1, tls: true)])],
            routes: [])
        c.attestation.trustAnchors = anchors
        c.upstreams["u"]?.tls = ca.map { ClientTLSConfig(caFile: $0) }
        return c
    }

    @Test func everyFileThatFailsIsNamedAndNothingIsBuilt() {
        let c = config(anchors: ["/nonexistent/anchor.pem"], ca: "/nonexistent/ca.pem")
        #expect {
            _ = try GatewaySnapshot.build(config: c)
        } throws: { error in
            guard let error = error as? GatewaySnapshot.BuildError else { return false }
            return error.failures.count == 2 && error.description.contains("attestation.trustAnchors")
                && error.description.contains("upstreams.u.tls")
        }
    }

    @Test func aBuiltSnapshotHasItsEnforcementContextAndItsUpstreamTLS() throws {
        let s = try GatewaySnapshot.build(config: config(ca: Self.caFile))
        #expect(s.enforcement != nil)
        #expect(s.upstreamTLS["u"] != nil)
        #expect(s.enforcement?.refreshesReceipts == false, "no fraudMetric, no refresher")
    }

    @Test func aRebuildKeepsUnchangedUpstreamTLSAndThePreviousReceiptRefresh() throws {
        let c = config(ca: Self.caFile)
        let running = GatewaySnapshot(
            config: c, enforcement: try EnforcementContext(config: c, refreshesReceipts: true),
            upstreamTLS: try UpstreamTLSContexts(config: c))
        let next = try GatewaySnapshot.build(config: c, previous: running)
        #expect(next.upstreamTLS["u"]?.generation == running.upstreamTLS["u"]?.generation, "same settings, same files")
        #expect(next.enforcement?.refreshesReceipts == true, "a reload cannot start or stop the refresher")

        let fresh = try GatewaySnapshot.build(config: c)
        #expect(fresh.upstreamTLS["u"]?.generation != running.upstreamTLS["u"]?.generation)
        #expect(fresh.enforcement?.refreshesReceipts == false)
    }
}
