import AssertGateTestSupport
import DeviceSim
import Foundation
import Testing

/// What the issue #19 tests assume of the gateway (the contract they are
/// written against, before the gateway side lands):
///
/// - an upstream endpoint `h2c://host:port` speaks cleartext HTTP/2 with prior
///   knowledge; `h2://host:port` speaks HTTP/2 over TLS (ALPN h2), verified
///   with the same `tls:` keys as `https://` upstreams (`caFile`, `serverName`);
/// - routes, modes and `bindBody` are as for HTTP/1.1 upstreams; a gRPC
///   request's signed body is its gRPC framing (flag byte, 4-byte length,
///   message), and `bindBody: false` signs `UNSIGNED-PAYLOAD` and streams;
/// - response trailers reach an HTTP/2 client; the gateway's own refusals of
///   a gRPC request are trailers-only answers with `grpc-status` and
///   `assertgate-reason` (protocol.md §5);
/// - `grpc-timeout` caps the upstream's `responseTimeout` (then 504, which a
///   gRPC client reads as 4 DEADLINE_EXCEEDED, reason `upstream-timeout`);
/// - GOAWAY from an upstream moves new streams to a new connection; resets
///   travel both ways.
enum H2Upstream {
    static let echo = "/assertgate.test.Echo/"

    /// `name: {...}` for an upstream of one endpoint, `h2c://` or, with
    /// `caFile`, `h2://` verified against it for the name `localhost`.
    static func upstream(
        _ name: String, port: Int, caFile: String? = nil, responseTimeout: String = "30s", extra: String = ""
    ) -> String {
        let scheme = caFile == nil ? "h2c" : "h2"
        let tls = caFile.map { ", tls: {caFile: \($0), serverName: localhost}" } ?? ""
        return "\(name): {endpoints: [\"\(scheme)://127.0.0.1:\(port)\"], responseTimeout: \(responseTimeout)\(tls)\(extra)}"
    }

    /// The YAML-configured gateway of the enforcement tests (real Redis,
    /// two workers) with these upstreams and routes before its own.
    static func gateway(
        upstreams: [String], routes: [String], extraTopLevel: String = "", workers: Int = 2
    ) async throws -> EnforcementHarness {
        var options = EnforcementHarness.Options(extraRoutes: routes, extraUpstreams: upstreams, extraTopLevel: extraTopLevel)
        options.workers = workers
        return try await EnforcementHarness.start(options)
    }

    /// A route for one method of the echo service (`exact` match).
    static func route(_ method: String, mode: String, upstream: String = "grpc", extra: String = "") -> String {
        "{match: {exact: \(echo)\(method)}, upstream: \(upstream), mode: \(mode)\(extra)}"
    }

    /// The `grpc-status` of a raw exchange: in the trailers, or in the only
    /// header block of a trailers-only answer.
    static func grpcStatus(_ e: NghttpExchange) -> String? {
        e.trailer("grpc-status") ?? e.header("grpc-status")
    }

    static func grpcField(_ e: NghttpExchange, _ name: String) -> String? {
        e.trailer(name) ?? e.header(name)
    }

    /// Downloads `url` with curl (HTTP/2 prior knowledge) to a file and
    /// compares every byte.
    static func expectDownload(_ url: String, equals expected: [UInt8]?) async throws {
        try await Integration.H2FixtureSmokeTests.expectDownload(url, equals: expected, curl: ["--http2-prior-knowledge"])
    }

    /// Assertion metadata for a gRPC call, as `--metadata` arguments.
    static func assertion(
        _ h: EnforcementHarness, _ device: SimDevice, method: String, body: [UInt8]? = nil, counter: UInt32
    ) throws -> [String] {
        let headers = try h.assertionHeaders(
            device, method: "POST", path: echo + method, body: body ?? [], counter: counter, unsigned: body == nil)
        return GRPCClient.metadata(headers)
    }
}

extension EnforcementHarness {
    /// What grpc_client.py dials: the gateway's cleartext listener (h2c).
    var grpcTarget: String { "127.0.0.1:\(server.ports[0])" }
}
