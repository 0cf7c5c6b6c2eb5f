import Verifier

/// What the policy concluded about one request, before it becomes headers.
public enum TrustOutcome: Sendable, Equatable {
    case verified(VerifiedIdentity)
    case missing(ReasonToken)
    case invalid(ReasonToken)
    /// A check the decision needed could not be made (the store, DeviceCheck).
    case unavailable(ReasonToken)
    /// No assertion, but a valid first-use device token on a `fallback:
    /// device` route: a genuine Apple device, app integrity unknown (risk.md §3).
    /// `flags`: the failing `flag` rules (only `deviceBits` applies).
    case device(flags: [ReasonToken])
    case none

    public var trustValue: String {
        switch self {
        case .verified: return "verified"
        case .missing: return "missing"
        case .invalid: return "invalid"
        case .unavailable: return "unavailable"
        case .device: return "device"
        case .none: return "none"
        }
    }

    public var reason: ReasonToken? {
        switch self {
        case .missing(let r), .invalid(let r), .unavailable(let r): return r
        case .verified, .device, .none: return nil
        }
    }
}

/// What a verified request tells the upstream (protocol.md §6).
public struct VerifiedIdentity: Sendable, Equatable {
    public var keyId: [UInt8]
    public var environment: String
    public var userId: String?
    public var userKeyCount: Int?
    public var riskMetric: Int?
    public var riskMetricAgeSeconds: Int64?
    public var appVersion: String?
    public var launchCategory: UInt32?
    public var keyPolicy: KeyPolicy?
    /// The failing `flag` rules' reasons, in table order (risk.md §2).
    public var flags: [ReasonToken]

    public init(
        keyId: [UInt8], environment: String, userId: String? = nil, userKeyCount: Int? = nil,
        riskMetric: Int? = nil, riskMetricAgeSeconds: Int64? = nil, appVersion: String? = nil,
        launchCategory: UInt32? = nil, keyPolicy: KeyPolicy? = nil, flags: [ReasonToken] = []
    ) {
        self.keyPolicy = keyPolicy
        self.flags = flags
        self.keyId = keyId
        self.environment = environment
        self.userId = userId
        self.userKeyCount = userKeyCount
        self.riskMetric = riskMetric
        self.riskMetricAgeSeconds = riskMetricAgeSeconds
        self.appVersion = appVersion
        self.launchCategory = launchCategory
    }
}

/// Turns an outcome into the trust headers of protocol.md §6, in a fixed
/// order, with the prefix of the configuration; identity headers only for
/// `verified`, so a failed assertion can never hand the upstream someone
/// else's identity.
public struct TrustHeaderBuilder: Sendable {
    public let prefix: String
    private let signer: TrustSigner?

    /// `<prefix>Trust: none` unsigned: what most passthrough requests carry,
    /// the same every time, so built once instead of on the hot path.
    private let unsignedNone: [(name: String, value: String)]

    public init(prefix: String, signingSecret: String?) {
        self.prefix = prefix
        self.signer = signingSecret.map { TrustSigner(secret: $0, headerPrefix: prefix) }
        self.unsignedNone = [(prefix + "Trust", TrustOutcome.none.trustValue)]
    }

    /// The signature header's name, when the headers are signed.
    public var signatureHeaderName: String? { signer?.headerName }

    public func headers(
        for outcome: TrustOutcome, device: DeviceSignal? = nil, requestId: String, method: String, path: String,
        now: Int64
    ) -> [(name: String, value: String)] {
        if signer == nil, device == nil, case .none = outcome { return unsignedNone }
        var out: [(name: String, value: String)] = [(prefix + "Trust", outcome.trustValue)]
        if let r = outcome.reason { out.append((prefix + "Reason", r.rawValue)) }
        if case .verified(let id) = outcome {
            out.append((prefix + "Key-Id", Base64.encodeURL(id.keyId)))
            out.append((prefix + "Env", id.environment))
            if let u = id.userId {
                out.append((prefix + "User", PercentEncoding.encode(u)))
                if let n = id.userKeyCount { out.append((prefix + "User-Keys", String(n))) }
            }
            if let risk = id.riskMetric {
                out.append((prefix + "Risk-Metric", "\(risk); age=\(max(0, id.riskMetricAgeSeconds ?? 0))"))
            }
            if let v = id.appVersion { out.append((prefix + "App-Version", PercentEncoding.encode(v))) }
            if let c = id.launchCategory { out.append((prefix + "Launch-Category", LaunchCategory.name(c))) }
            if let p = id.keyPolicy { out.append((prefix + "Key-Policy", p.rawValue)) }
            if !id.flags.isEmpty { out.append((prefix + "Flags", id.flags.map(\.rawValue).joined(separator: ", "))) }
        }
        if case .device(let flags) = outcome, !flags.isEmpty {
            out.append((prefix + "Flags", flags.map(\.rawValue).joined(separator: ", ")))
        }
        // DeviceCheck's answer goes on every trust level: it names no identity.
        if let device {
            out.append((prefix + "Device", device.headerValue))
            if let bits = device.bitsHeaderValue { out.append((prefix + "Device-Bits", bits)) }
        }
        if let signer {
            let sig = signer.signature(
                timestamp: now, requestId: requestId, method: method, path: path, trustHeaders: out)
            out.append((signer.headerName, sig))
        }
        return out
    }
}
