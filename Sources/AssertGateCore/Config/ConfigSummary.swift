import AssertGateRedis
import GatewayTLS

/// The human-readable form `assertgate check-config` prints: listeners,
/// upstreams and routes with every default resolved. Secrets show only
/// their source.
public enum ConfigSummary {
    public static func render(_ config: GatewayConfig) -> String {
        var out: [String] = []
        out.append("listeners:")
        for l in config.listeners {
            let timeouts = "handshakeTimeout \(DurationParser.format(l.handshakeTimeout)), "
                + "headerTimeout \(DurationParser.format(l.headerTimeout)), "
                + "idleTimeout \(DurationParser.format(l.effectiveIdleTimeout))"
            if let tls = l.tls {
                out.append(
                    "  \(l.address)  tls (certificate \(tls.certificate), key \(tls.privateKey); ALPN h2, http/1.1); \(timeouts)")
            } else {
                out.append("  \(l.address)  cleartext (h2c prior knowledge, HTTP/1.1); \(timeouts)")
            }
        }
        let token = config.admin.token.map { "token \(source($0))" } ?? "no token: /keys and /reload off"
        out.append("admin: \(config.admin.address)  (\(token))")
        out.append("apps:")
        for app in config.apps {
            out.append("  \(app.appId)  [\(app.environments.sorted().map(\.rawValue).joined(separator: ", "))]")
        }
        let a = config.attestation
        out.append("attestation: prefix \(a.prefix), challengeTTL \(DurationParser.format(a.challengeTTL)), "
            + "challengeRate \(rate(a.challengeRate)), clockSkew \(DurationParser.format(a.clockSkew))")
        out.append("  rampUp: \(a.rampUp.map { rate($0) + " attest challenges, shared by every gateway on the store" } ?? "off (attest challenges not limited beyond challengeRate)")")
        out.append("  headers: \(a.headers.keyId), \(a.headers.assertion), \(a.headers.challenge)")
        out.append("  trustAnchors: \(a.trustAnchors.isEmpty ? "Apple App Attestation Root CA" : "REPLACED by " + a.trustAnchors.joined(separator: ", "))")
        out.append("  receiptTrustAnchors: \(a.receiptTrustAnchors.isEmpty ? "Apple Root CA - G3" : "REPLACED by " + a.receiptTrustAnchors.joined(separator: ", "))")
        switch config.store {
        case .memory:
            out.append("store: memory (single process)")
        case .redis(let r):
            let target = r.cluster.isEmpty
                ? r.endpoint?.description ?? r.redactedURL
                : "cluster, seeds " + r.cluster.map { (try? RedisURL.parse($0).get())?.description ?? RedisURL.redacted($0) }.joined(separator: " ")
            let password = r.password.map { ", password \(source($0))" } ?? ""
            out.append("store: redis \(target)\(password), connectTimeout \(DurationParser.format(r.connectTimeout)), "
                + "commandTimeout \(DurationParser.format(r.commandTimeout)), connectionsPerWorker \(r.connectionsPerWorker)")
            if r.endpoint?.tls == true {
                let tls = r.tls ?? ClientTLSConfig()
                out.append("  tls: server verified against \(tls.caFile ?? "the system trust store") as "
                    + "'\(tls.serverName ?? r.endpoint?.host ?? "")', client certificate \(tls.certificate ?? "none")")
            }
        }
        out.append("trust: headerPrefix \(config.trust.headerPrefix), signature \(config.trust.signingSecret.map { "on (secret \(source($0)))" } ?? "off")")
        out.append("upstreams:")
        for name in config.upstreams.keys.sorted() {
            guard let u = config.upstreams[name] else { continue }
            out.append("  \(name): \(u.endpoints.map(\.description).joined(separator: ", "))"
                + (u.endpoints.first.map { "  (\($0.scheme.protocolName))" } ?? ""))
            if let first = u.endpoints.first, first.tls {
                let tls = u.tls ?? ClientTLSConfig()
                out.append("    tls: server verified against \(tls.caFile ?? "the system trust store") as "
                    + "\(tls.serverName.map { "'\($0)'" } ?? "each endpoint's host"), client certificate \(tls.certificate ?? "none")")
            }
            out.append("    connectTimeout \(DurationParser.format(u.connectTimeout)), responseTimeout \(DurationParser.format(u.responseTimeout)), "
                + "idleTimeout \(DurationParser.format(u.idleTimeout)), maxConnectionsPerEndpoint \(u.maxConnectionsPerEndpoint), "
                + (u.isHTTP2 ? "maxStreamsPerConnection \(u.maxStreamsPerConnection), " : "")
                + "maxConnectionsPerClient \(u.effectiveMaxConnectionsPerClient)\(u.isHTTP2 ? " streams" : "")"
                + "\(u.maxConnectionsPerClient == nil ? " (half)" : "")")
        }
        out.append("routes (first match wins):")
        for (i, r) in config.routes.enumerated() {
            let match: String
            switch r.match.kind {
            case .prefix(let p): match = "prefix \(p)"
            case .exact(let p): match = "exact \(p)"
            }
            let methods = r.match.methods.map { $0.sorted().joined(separator: ",") } ?? "any"
            var line = "  [\(i)] \(match) methods \(methods) -> \(r.upstream)  mode \(r.mode.rawValue)"
            switch r.mode {
            case .passthrough:
                line += ", no assertion checks, bodies streamed"
            case .enforce, .monitor:
                line += ", challenge \(r.challengeRequired ? "required" : "none")"
                line += ", bindBody \(r.bindBody)"
                line += r.bindBody ? ", maxBodyBytes \(SizeParser.format(r.maxBodyBytes))" : ", body streamed (UNSIGNED-PAYLOAD)"
                line += ", onStoreError \(r.onStoreError.rawValue)"
                line += ", forwardAssertionHeaders \(r.forwardAssertionHeaders)"
            }
            out.append(line)
            if !r.limits.isEmpty { out.append("      its own limits: " + routeLimits(r.limits)) }
        }
        out += RulesSummary.lines(config)
        let l = config.limits
        out.append("limits: maxConcurrentStreams \(l.maxConcurrentStreams), maxHeaderListBytes \(SizeParser.format(l.maxHeaderListBytes)), "
            + "maxRequestBodyBytes \(SizeParser.format(l.maxRequestBodyBytes)), streamResetRate \(rate(l.streamResetRate))")
        out.append("  requestBodyTimeout \(DurationParser.format(l.requestBodyTimeout)), minRequestBodyRate \(bodyRate(l.minRequestBodyRate)), "
            + "streamWriteTimeout \(DurationParser.format(l.streamWriteTimeout)), minResponseRate \(bodyRate(l.minResponseRate)), maxBufferedBodyBytes \(SizeParser.format(l.effectiveMaxBufferedBodyBytes)) per worker\(l.maxBufferedBodyBytes == nil ? " (sized for this machine)" : ""), "
            + "maxQueuedResponseBytes \(SizeParser.format(l.effectiveMaxQueuedResponseBytes)) per worker\(l.maxQueuedResponseBytes == nil ? " (sized for this machine)" : ""), "
            + "underscoresInHeaders \(l.underscoresInHeaders.rawValue)")
        out.append("  maxConnections \(l.effectiveMaxConnections)\(l.maxConnections == nil ? " (half the descriptor limit)" : ""), "
            + "maxConnectionsPerAddress \(l.maxConnectionsPerAddress.map(String.init) ?? "none")")
        if let f = config.fraudMetric {
            out.append("fraudMetric: team \(f.teamId), key \(f.keyId) (\(source(f.privateKey))), production \(f.baseURL), development \(f.developmentBaseURL), every \(DurationParser.format(f.refreshEvery)), "
                + "schedule checked every \(DurationParser.format(f.pollEvery)), server verified against \(f.caFile ?? "the system trust store")")
        } else {
            out.append("fraudMetric: off")
        }
        if let d = config.deviceCheck {
            out.append("deviceCheck: team \(d.teamId), key \(d.keyId) (\(source(d.privateKey))), production \(d.baseURL), development \(d.developmentBaseURL), default \(d.environment.rawValue), "
                + "timeout \(DurationParser.format(d.timeout)), updates retried for \(DurationParser.format(d.updateRetryFor)), "
                + "queue looked at every \(DurationParser.format(d.updatePollEvery)), \(d.updateBatch) at a time, at most \(d.maxQueuedUpdates) queued, server verified against \(d.caFile ?? "the system trust store")")
        } else {
            out.append("deviceCheck: off")
        }
        out.append("logging: level \(config.logging.level), format \(config.logging.format.rawValue)")
        return out.joined(separator: "\n") + "\n"
    }

    /// Only what the route sets: the rest is the global `limits` line's, or the upstream's.
    private static func routeLimits(_ l: RouteLimits) -> String {
        var parts: [String] = []
        if let n = l.maxRequestBodyBytes { parts.append("maxRequestBodyBytes \(SizeParser.format(n))") }
        if let t = l.requestBodyTimeout { parts.append("requestBodyTimeout \(DurationParser.format(t))") }
        if let n = l.minRequestBodyRate { parts.append("minRequestBodyRate \(bodyRate(n))") }
        if let t = l.responseTimeout { parts.append("responseTimeout \(DurationParser.format(t))") }
        return parts.joined(separator: ", ")
    }

    /// A minimum body rate: 0 turns it off.
    private static func bodyRate(_ bytesPerSecond: Int) -> String {
        bytesPerSecond == 0 ? "off" : SizeParser.format(bytesPerSecond) + "/s"
    }

    private static func rate(_ r: RateConfig) -> String {
        let ps = r.perSecond == r.perSecond.rounded() ? String(Int(r.perSecond)) : String(r.perSecond)
        return "\(ps)/s burst \(r.burst)"
    }

    private static func source(_ s: Secret) -> String {
        switch s.source {
        case .inline: return "inline"
        case .file(let p): return "from file \(p)"
        case .env(let n): return "from env \(n)"
        }
    }
}
