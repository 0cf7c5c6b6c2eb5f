extension GatewayConfig {
    /// Valid but risky settings, printed by check-config and logged at start.
    public var warnings: [String] {
        var out: [String] = []
        if !attestation.trustAnchors.isEmpty {
            out.append("attestation.trustAnchors REPLACE Apple's App Attestation Root CA: for testing only")
        }
        if !attestation.receiptTrustAnchors.isEmpty {
            out.append("attestation.receiptTrustAnchors REPLACE Apple Root CA - G3: for testing only")
        }
        if !["127.0.0.1", "::1", "localhost"].contains(admin.address.host) {
            out.append("admin.address \(admin.address) is not loopback: /metrics and /readyz are exposed without a token")
        }
        for (name, secret) in [("admin.token", admin.token), ("trust.signingSecret", trust.signingSecret)] {
            if secret?.source == .inline { out.append("\(name) is inline in the config file; prefer {file: PATH} or {env: NAME}") }
        }
        if case .inline? = fraudMetric?.privateKey.source {
            out.append("fraudMetric.privateKey is inline in the config file; prefer {file: PATH}")
        }
        // Without receipt refresh no key ever has a risk metric: say so rather
        // than let an operator believe risk is being checked.
        if fraudMetric == nil {
            for (i, route) in routes.enumerated() where route.maxRiskMetric != nil && route.mode != .passthrough {
                out.append("routes[\(i)].maxRiskMetric has no effect without fraudMetric: keys get a risk metric only from refreshed receipts")
            }
        }
        if case .memory = store, routes.contains(where: { $0.mode != .passthrough }) {
            out.append("store is memory: keys and counters live in this process only and are lost on restart")
        }
        return out
    }
}
