import AssertGateCore
import Foundation
import NIOCore

/// The control surface of `assertgate-device apple-mock` (with
/// `controlEndpoint`), on the mock's own port under `/mock/`. Test-only: no
/// authentication, so the mock listens on 127.0.0.1 unless told otherwise.
///
///     POST /mock/script?endpoint=E&answer=SPEC     the next request of E gets SPEC
///     POST /mock/always?endpoint=E|all&answer=SPEC every request of E gets SPEC (normal: as Apple)
///     POST /mock/latency?endpoint=E|all&ms=N       answers of E wait N ms
///     POST /mock/reset                             forget scripts, answers, latency, bits, log
///     GET  /mock/bits?device=NAME                  the device's bits as Apple's query answers them
///     GET  /mock/requests                          one line per request: endpoint status device
///
/// E is validate_device_token, query_two_bits, update_two_bits or
/// attestationData; SPEC as `AppleMockAnswer(spec:)`.
extension AppleMockServer {
    func control(_ request: AppleMockHandler.Request, path: String) -> AppleMockResponse {
        let query = Self.queryItems(request.uri)
        func endpoints() -> [AppleMockEndpoint]? {
            guard let name = query["endpoint"] else { return nil }
            return name == "all" ? AppleMockEndpoint.allCases : AppleMockEndpoint(rawValue: name).map { [$0] }
        }
        switch (request.method, path) {
        case ("POST", "/mock/script"), ("POST", "/mock/always"):
            guard let targets = endpoints() else { return .text(400, "endpoint: one of \(Self.endpointNames) or all\n") }
            guard let spec = query["answer"], let answer = AppleMockAnswer(spec: spec) else {
                return .text(400, "answer: normal, stall, close, never-set[:TEXT], NNN[:TEXT], receipt:RISK, untrusted-receipt\n")
            }
            for e in targets {
                if path == "/mock/script" { script([answer], for: e) } else { answerAlways(answer, for: e) }
            }
            return .text(200, "ok\n")
        case ("POST", "/mock/latency"):
            guard let targets = endpoints() else { return .text(400, "endpoint: one of \(Self.endpointNames) or all\n") }
            guard let ms = query["ms"].flatMap({ Int64($0) }), ms >= 0, ms <= 600_000 else {
                return .text(400, "ms: 0 to 600000\n")
            }
            for e in targets { setLatency(.milliseconds(ms), for: e) }
            return .text(200, "ok\n")
        case ("POST", "/mock/reset"):
            reset()
            return .text(200, "ok\n")
        case ("GET", "/mock/bits"):
            guard let device = query["device"] else { return .text(400, "device: required\n") }
            guard let bits = bits(device: device) else { return .text(404, "Failed to find bit state\n") }
            return .json(bits.json + "\n")
        case ("GET", "/mock/requests"):
            let lines = requests.map { r in
                "\(r.endpoint?.rawValue ?? r.path) \(r.status.map(String.init) ?? "-") \(r.device ?? "-")\n"
            }
            return .text(200, lines.joined())
        default:
            return .text(404, "unknown control request\n")
        }
    }

    static var endpointNames: String { AppleMockEndpoint.allCases.map(\.rawValue).joined(separator: ", ") }

    /// `a=b&c=d` after `?`, percent-decoded; the first of a repeated name wins.
    public static func queryItems(_ uri: String) -> [String: String] {
        guard let q = uri.split(separator: "?", maxSplits: 1).dropFirst().first else { return [:] }
        var out: [String: String] = [:]
        for pair in q.split(separator: "&") {
            let kv = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false).map {
                String($0).replacingOccurrences(of: "+", with: " ").removingPercentEncoding ?? String($0)
            }
            if kv.count == 2, out[kv[0]] == nil { out[kv[0]] = kv[1] }
        }
        return out
    }
}
