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
        if case .redis(let r) = store {
            if r.endpoint?.password != nil {
                out.append("store.redis: the URL carries the password inline in the config file; prefer store.redis.password: {file: PATH} or {env: NAME}")
            } else if r.password?.source == .inline {
                out.append("store.redis.password is inline in the config file; prefer {file: PATH} or {env: NAME}")
            }
        }
        if case .inline? = fraudMetric?.privateKey.source {
            out.append("fraudMetric.privateKey is inline in the config file; prefer {file: PATH}")
        }
        // An inline key inherited from fraudMetric is already warned about above.
        if deviceCheck?.privateKey.source == .inline, fraudMetric?.privateKey.source != .inline {
            out.append("deviceCheck.privateKey is inline in the config file; prefer {file: PATH}")
        }
        // Rules that can never act (risk.md §2), e.g. maxRiskMetric without
        // receipt refresh: say so rather than let an operator believe risk is checked.
        out += RulesSummary.warnings(self)
        // onDeviceCheckError decides only for fallback: device and require.deviceBits;
        // set to other than its default anywhere else, it would mislead.
        for (i, r) in routes.enumerated()
        where r.mode != .passthrough && r.deviceCheck != .none && r.fallback != .device && r.rules.require.deviceBits == nil
            && r.onDeviceCheckError != (r.mode == .enforce ? .reject : .forward)
        {
            out.append(
                "routes[\(i)].onDeviceCheckError: \(r.onDeviceCheckError.rawValue) never acts: the route has neither fallback: device nor rules.require.deviceBits, so Apple not answering only leaves the device signal unavailable")
        }
        out += methodFallThroughWarnings
        // bindBody buffers a body whole within the worker's budget: one larger
        // than the budget is refused 503 however idle the gateway is (and the
        // default budget depends on the machine).
        let budget = limits.effectiveMaxBufferedBodyBytes
        for (i, route) in routes.enumerated() where route.mode != .passthrough && route.bindBody && route.maxBodyBytes > budget {
            let sized = limits.maxBufferedBodyBytes == nil ? " (sized for this machine)" : ""
            out.append(
                "routes[\(i)].maxBodyBytes \(SizeParser.format(route.maxBodyBytes)) is over limits.maxBufferedBodyBytes "
                    + "\(SizeParser.format(budget)) per worker\(sized): bindBody buffers bodies whole, and one that large "
                    + "always gets 503 gateway-busy")
        }
        if case .memory = store, attestation.rampUp != nil {
            out.append("attestation.rampUp with store memory: the budget is this process's only, not shared with other gateways")
        }
        if case .memory = store, routes.contains(where: { $0.mode != .passthrough }) {
            out.append("store is memory: keys and counters live in this process only and are lost on restart")
        }
        return out
    }

    /// A route with a `methods:` list hands its other methods to the next route
    /// that matches the same paths. When that route is laxer, an upstream that
    /// serves every method of the path from one handler (or acts on GET) gets
    /// those requests with less checking: worth a line in check-config.
    private var methodFallThroughWarnings: [String] {
        func strictness(_ mode: PolicyMode) -> Int {
            switch mode {
            case .passthrough: return 0
            case .monitor: return 1
            case .enforce: return 2
            }
        }
        var out: [String] = []
        for (i, route) in routes.enumerated() {
            guard let methods = route.match.methods, route.mode != .passthrough else { continue }
            let pattern: String
            switch route.match.kind {
            case .prefix(let p): pattern = p
            case .exact(let e): pattern = e
            }
            // Later routes that also take this route's paths, each for the methods
            // no earlier one took; a route without a list takes all that remain.
            var taken = Set(methods)
            for (j, later) in routes.enumerated().dropFirst(i + 1) {
                let covers: Bool
                switch later.match.kind {
                case .prefix(let p): covers = pattern.hasPrefix(p)
                case .exact(let e): covers = e == pattern
                }
                guard covers else { continue }
                let laxer = strictness(later.mode) < strictness(route.mode)
                let head = "routes[\(i)] (\(route.mode.rawValue), methods \(methods.sorted().joined(separator: ","))): "
                if let laterMethods = later.match.methods {
                    // Sorted: a Set's order changes from process to process, and warnings must not.
                    let here = laterMethods.filter { !taken.contains($0) }.sorted()
                    if laxer, !here.isEmpty {
                        out.append(head + "\(here.joined(separator: ",")) requests on its paths go to routes[\(j)] (\(later.mode.rawValue))")
                    }
                    taken.formUnion(laterMethods)
                } else {
                    if laxer { out.append(head + "requests with other methods on its paths go to routes[\(j)] (\(later.mode.rawValue))") }
                    break
                }
            }
        }
        return out
    }
}
