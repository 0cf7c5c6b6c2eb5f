import Foundation
import NIOCore
import Testing

@testable import AssertGateCore

/// The settings against misbehaving clients: defaults, values, and what a
/// wrong value says.
@Suite struct HardeningConfigTests {
    private static func yaml(limits: String = "", upstream: String = "") -> String {
        """
        listeners: [{address: 127.0.0.1:8080}]
        apps: [{appId: ABCDE12345.com.example.app}]
        store: {memory: {}}
        upstreams: {api: {endpoints: [http://127.0.0.1:9001]\(upstream)}}
        routes: [{match: {prefix: /}, upstream: api, mode: passthrough}]
        \(limits.isEmpty ? "" : "limits: {\(limits)}")

        """
    }



    @Test func defaultsStopTheSlowClientsOfIssue14() throws {
        let c = try ConfigText.load(Self.yaml())
        #expect(c.limits.requestBodyTimeout == .seconds(10))
        #expect(c.limits.minRequestBodyRate == 1024)
        #expect(c.limits.streamWriteTimeout == .seconds(30))
        #expect(c.limits.minResponseRate == 1024)
        #expect(c.limits.maxBufferedBodyBytes == nil)
        #expect(c.limits.maxQueuedResponseBytes == nil)
        #expect(c.limits.effectiveMaxQueuedResponseBytes == c.limits.effectiveMaxBufferedBodyBytes)
        let budget = c.limits.effectiveMaxBufferedBodyBytes
        #expect(budget >= 16 << 20 && budget <= 512 << 20)
        #expect(c.limits.underscoresInHeaders == .drop)
        #expect(c.limits.maxConnections == nil && c.limits.maxConnectionsPerAddress == nil)
        #expect(c.limits.effectiveMaxConnections >= 64)
        #expect(ConfigSummary.render(c).contains("(half the descriptor limit), maxConnectionsPerAddress none"))
        let api = try #require(c.upstreams["api"])
        #expect(api.maxConnectionsPerClient == nil)
        #expect(api.effectiveMaxConnectionsPerClient == 32)
    }

    @Test func valuesAreRead() throws {
        let c = try ConfigText.load(
            Self.yaml(
                limits: "requestBodyTimeout: 3s, minRequestBodyRate: 0, streamWriteTimeout: 5s, minResponseRate: 256, maxBufferedBodyBytes: 8MiB, maxQueuedResponseBytes: 32MiB, underscoresInHeaders: reject, "
                    + "maxConnections: 5000, maxConnectionsPerAddress: 40",
                upstream: ", maxConnectionsPerEndpoint: 10, maxConnectionsPerClient: 7"))
        #expect(c.limits.requestBodyTimeout == .seconds(3))
        #expect(c.limits.minRequestBodyRate == 0)
        #expect(c.limits.streamWriteTimeout == .seconds(5))
        #expect(c.limits.effectiveMaxBufferedBodyBytes == 8 << 20)
        #expect(c.limits.underscoresInHeaders == .reject)
        #expect(c.upstreams["api"]?.effectiveMaxConnectionsPerClient == 7)
        let summary = ConfigSummary.render(c)
        #expect(summary.contains("maxConnectionsPerClient 7"))
        #expect(c.limits.minResponseRate == 256)
        #expect(c.limits.effectiveMaxQueuedResponseBytes == 32 << 20)
        #expect(summary.contains("maxQueuedResponseBytes 32MiB per worker"))
        #expect(summary.contains("requestBodyTimeout 3s, minRequestBodyRate off, streamWriteTimeout 5s, minResponseRate 256B/s"))
        #expect(summary.contains("underscoresInHeaders reject"))
        #expect(c.limits.effectiveMaxConnections == 5000 && c.limits.maxConnectionsPerAddress == 40)
        #expect(summary.contains("maxConnections 5000, maxConnectionsPerAddress 40"))
    }

    @Test func wrongValuesSayWhatIsWrong() {
        let bad = ConfigText.errors(Self.yaml(limits: "underscoresInHeaders: sometimes"))
        #expect(bad.contains { $0.contains("limits.underscoresInHeaders: expected one of drop, reject, allow, got 'sometimes'") }, "\(bad)")
        let zero = ConfigText.errors(Self.yaml(limits: "streamWriteTimeout: 0s"))
        #expect(zero.contains { $0.contains("limits.streamWriteTimeout: must be greater than 0") }, "\(zero)")
        let small = ConfigText.errors(Self.yaml(limits: "maxQueuedResponseBytes: 64KiB"))
        #expect(small.contains { $0.contains("limits.maxQueuedResponseBytes: must be at least 1MiB") }, "\(small)")
        let tiny = ConfigText.errors(Self.yaml(limits: "maxBufferedBodyBytes: 1KiB"))
        #expect(tiny.contains { $0.contains("limits.maxBufferedBodyBytes: must be at least 64KiB") }, "\(tiny)")
        let huge = ConfigText.errors(Self.yaml(limits: "maxHeaderListBytes: 9MiB"))
        #expect(huge.contains { $0.contains("limits.maxHeaderListBytes: must be at most 8MiB") }, "\(huge)")
        let none = ConfigText.errors(Self.yaml(limits: "maxConnections: 0, maxConnectionsPerAddress: -1"))
        #expect(none.contains { $0.contains("limits.maxConnections") }, "\(none)")
        #expect(none.contains { $0.contains("limits.maxConnectionsPerAddress") }, "\(none)")
        let share = ConfigText.errors(Self.yaml(upstream: ", maxConnectionsPerEndpoint: 4, maxConnectionsPerClient: 5"))
        #expect(share.contains { $0.contains("upstreams.api.maxConnectionsPerClient: 5 exceeds maxConnectionsPerEndpoint (4)") }, "\(share)")
    }
}
