import AssertGateCore
import NIOCore

extension AppleMockServer {
    /// What to do with one request, and after how long; records it.
    func respond(_ request: AppleMockHandler.Request) -> (AppleMockResponse, TimeAmount) {
        let path = String(request.uri.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false).first ?? "")
        if options.controlEndpoint, path.hasPrefix("/mock/") { return (control(request, path: path), .zero) }
        let endpoint = AppleMockEndpoint(path: path)
        var record = AppleMockRequest(
            method: request.method, path: path, endpoint: endpoint, hadAuthorization: request.authorization != nil,
            body: endpoint == .attestationData ? request.body : [],
            authorization: endpoint == .attestationData ? request.authorization : nil, status: nil,
            connection: request.connection)
        let (response, latency) = decide(request, endpoint, &record)
        record.status = response.status
        state.withLockedValue { $0.record(record) }
        return (response, latency)
    }

    private func decide(
        _ request: AppleMockHandler.Request, _ endpoint: AppleMockEndpoint?, _ record: inout AppleMockRequest
    ) -> (AppleMockResponse, TimeAmount) {
        guard let endpoint else { return (.text(404, "Not Found"), .zero) }
        guard request.method == "POST" else { return (.text(405, "Method Not Allowed"), .zero) }
        let body = endpoint == .attestationData ? nil : DeviceCheckMockBody.parse(request.body)
        if let body {
            record.device = MockDeviceToken.device(in: body.deviceToken, secret: options.deviceSecret)
            record.transactionId = body.transactionId
            record.timestampMillis = body.timestamp
            record.bit0 = body.bit0
            record.bit1 = body.bit1
        }
        let (answer, latency) = state.withLockedValue { s in (s.nextAnswer(endpoint), s.latency[endpoint] ?? .zero) }
        switch answer {
        case .status(let status, let text): return (.text(status, text), latency)
        case .neverSet(let text): return (.text(200, text), latency)
        case .stall: return (.stall, latency)
        case .close: return (.close, latency)
        case .normal, .receipt, .untrustedReceipt:
            if let refused = checkAuthorization(request.authorization, bearer: endpoint != .attestationData) {
                return (refused, latency)
            }
            if endpoint == .attestationData { return (refreshReceipt(request.body, answer), latency) }
            return (deviceCheck(endpoint, body, device: record.device), latency)
        }
    }

    /// nil when the JWT passes (or none is checked); else Apple's refusal.
    private func checkAuthorization(_ header: String?, bearer: Bool) -> AppleMockResponse? {
        guard let jwt else { return nil }
        let malformed = AppleMockResponse.text(400, "Missing or badly formatted authorization token")
        guard var token = header else { return malformed }
        // DeviceCheck wants `Bearer <JWT>`; the attestation data endpoint takes the JWT bare.
        if token.hasPrefix("Bearer ") {
            token.removeFirst("Bearer ".count)
        } else if bearer {
            return malformed
        }
        switch jwt.check(token, nowSeconds: options.clock()) {
        case .ok: return nil
        case .malformed: return malformed
        case .refused: return .text(401, "Unable to verify authorization token")
        }
    }

    /// DeviceCheck as Apple answers it, on the mock's per-device bits.
    private func deviceCheck(_ endpoint: AppleMockEndpoint, _ body: DeviceCheckMockBody?, device: String?) -> AppleMockResponse {
        guard let body, let device else {
            return .text(400, "Missing or incorrectly formatted device token payload")
        }
        guard !body.transactionId.isEmpty, body.timestamp > 0 else {
            return .text(400, "Missing or incorrectly formatted transaction_id or timestamp")
        }
        switch endpoint {
        case .validate:
            return .text(200, "")
        case .query:
            guard let bits = bits(device: device) else { return .text(200, "Failed to find bit state") }
            return .json(bits.json)
        case .update:
            // `YYYY-MM` of now, in UTC.
            let month = String(RFC3339.format(unixNanoseconds: options.clock() * 1_000_000_000).prefix(7))
            state.withLockedValue { s in
                let old = s.bits[device]
                s.bits[device] = MockDeviceBits(
                    bit0: body.bit0 ?? old?.bit0 ?? false, bit1: body.bit1 ?? old?.bit1 ?? false, lastUpdate: month)
            }
            return .text(200, "")
        case .attestationData:
            return .text(404, "Not Found")
        }
    }
}
