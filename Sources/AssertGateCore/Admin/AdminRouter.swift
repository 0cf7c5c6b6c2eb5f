import Logging
import Synchronization
import Verifier

/// One admin request, reduced to what routing needs.
public struct AdminRequest: Sendable {
    public var method: String
    public var uri: String
    public var authorization: String?
    public var requestIdHeader: String?

    public init(method: String, uri: String, authorization: String? = nil, requestIdHeader: String? = nil) {
        self.method = method
        self.uri = uri
        self.authorization = authorization
        self.requestIdHeader = requestIdHeader
    }
}

public struct AdminResponse: Sendable {
    public var status: Int
    public var headers: [(String, String)]
    public var body: String

    init(status: Int, headers: [(String, String)], body: String) {
        self.status = status
        self.headers = headers
        self.body = body
    }

    init(_ problem: ProblemAnswer) {
        self.init(status: problem.status, headers: problem.headers, body: problem.body)
    }
}

/// The admin endpoints of protocol.md §7, independent of the socket so they
/// can be tested directly. The token can be replaced on reload.
public final class AdminRouter: Sendable {
    private let token: Mutex<Secret?>
    private let metrics: MetricsRegistry
    private let readiness: @Sendable () async -> Bool
    private let actions: (any AdminActions)?
    private let readinessTimeout: Duration
    private let logger: Logger
    /// Upstream pools exhausted for longer than their response timeout
    /// (`UpstreamHealth.exhaustedUpstreams`): the gateway is not ready then.
    private let exhaustedUpstreams: @Sendable () -> [String]
    /// True once a graceful shutdown has begun: the gateway takes no new
    /// connections, so a load balancer should stop sending it any.
    private let draining: @Sendable () -> Bool

    public init(
        token: Secret?, metrics: MetricsRegistry, readiness: @escaping @Sendable () async -> Bool,
        actions: (any AdminActions)?, readinessTimeout: Duration = .seconds(2),
        exhaustedUpstreams: @escaping @Sendable () -> [String] = { [] },
        draining: @escaping @Sendable () -> Bool = { false },
        logger: Logger = Logger(label: "assertgate.admin")
    ) {
        self.logger = logger
        self.exhaustedUpstreams = exhaustedUpstreams
        self.draining = draining
        self.token = Mutex(token)
        self.metrics = metrics
        self.readiness = readiness
        self.actions = actions
        self.readinessTimeout = readinessTimeout
    }

    public func update(token newToken: Secret?) {
        token.withLock { $0 = newToken }
    }

    public func respond(to request: AdminRequest) async -> AdminResponse {
        let requestId = RequestId.resolve(request.requestIdHeader)
        let path = request.uri.split(separator: "?", maxSplits: 1, omittingEmptySubsequences: false).first ?? ""
        let segments = path.split(separator: "/", omittingEmptySubsequences: false).dropFirst()
        let isRead = request.method == "GET" || request.method == "HEAD"

        switch Array(segments) {
        case ["healthz"]:
            guard isRead else { return methodNotAllowed("GET, HEAD", requestId) }
            return ok(#"{"status":"ok"}"#, requestId)
        case ["readyz"]:
            guard isRead else { return methodNotAllowed("GET, HEAD", requestId) }
            if draining() {
                return problem(
                    .gatewayBusy, requestId, detail: "shutting down: no new connections, in-flight requests draining",
                    status: 503)
            }
            let exhausted = exhaustedUpstreams()
            if !exhausted.isEmpty {
                return problem(
                    .upstreamUnavailable, requestId,
                    detail: "no free upstream connection for longer than the response timeout: \(exhausted.joined(separator: "; "))",
                    status: 503)
            }
            if await readyWithinTimeout() { return ok(#"{"status":"ready"}"#, requestId) }
            return problem(.storeUnavailable, requestId)
        case ["metrics"]:
            guard isRead else { return methodNotAllowed("GET, HEAD", requestId) }
            return AdminResponse(
                status: 200, headers: [("Content-Type", MetricsRegistry.contentType), ("X-Request-Id", requestId)],
                body: metrics.exposition())
        case let s where s.first == "keys" && (s.count == 2 || (s.count == 3 && s[2] == "revoke")):
            let revoke = s.count == 3
            guard let actions, let expected = token.withLock({ $0 }) else { return problem(.noRoute, requestId) }
            guard authorized(request.authorization, expected) else { return unauthorized(requestId) }
            if revoke && request.method != "POST" { return methodNotAllowed("POST", requestId) }
            if !revoke && !isRead { return methodNotAllowed("GET, HEAD", requestId) }
            guard let keyId = AdminKeyId.canonical(pathComponent: s[1]) else {
                return problem(.malformedRequest, requestId, detail: "keyId must be the b64url (or percent-encoded base64) of 32 bytes")
            }
            do {
                let record = revoke ? try await actions.revoke(keyId: keyId) : try await actions.keyRecord(keyId: keyId)
                guard let record else { return problem(.unknownKey, requestId, status: 404) }
                if revoke { logger.notice("key revoked", metadata: ["keyId": "\(keyId)", "requestId": "\(requestId)"]) }
                return AdminResponse(
                    status: 200,
                    headers: [("Content-Type", "application/json"), ("Cache-Control", "no-store"), ("X-Request-Id", requestId)],
                    body: record.adminJSON)
            } catch {
                logger.error("admin key action failed", metadata: ["requestId": "\(requestId)", "error": "\(error)"])
                return problem(.storeUnavailable, requestId)
            }
        case let s where s.count == 3 && s[0] == "users" && (s[2] == "keys" || s[2] == "revoke"):
            return await userAction(revoke: s[2] == "revoke", component: s[1], request, requestId, isRead: isRead)
        case ["reload"]:
            guard let actions, let expected = token.withLock({ $0 }) else { return problem(.noRoute, requestId) }
            guard authorized(request.authorization, expected) else { return unauthorized(requestId) }
            guard request.method == "POST" else { return methodNotAllowed("POST", requestId) }
            switch await actions.reload() {
            case .success:
                logger.notice("configuration reloaded via admin", metadata: ["requestId": "\(requestId)"])
                return ok(#"{"status":"reloaded"}"#, requestId)
            case .failure(let e):
                logger.error("reload refused, old configuration kept", metadata: ["requestId": "\(requestId)", "error": "\(e.message)"])
                return problem(.configInvalid, requestId, detail: e.message)
            }
        default:
            return problem(.noRoute, requestId)
        }
    }

    /// `GET /users/{userId}/keys`, `POST /users/{userId}/revoke` (risk.md §2,
    /// §6.13): `{"userId", "keys": [records]}`, or `404 unknown-user`.
    private func userAction(
        revoke: Bool, component: Substring, _ request: AdminRequest, _ requestId: String, isRead: Bool
    ) async -> AdminResponse {
        guard let actions, let expected = token.withLock({ $0 }) else { return problem(.noRoute, requestId) }
        guard authorized(request.authorization, expected) else { return unauthorized(requestId) }
        if revoke && request.method != "POST" { return methodNotAllowed("POST", requestId) }
        if !revoke && !isRead { return methodNotAllowed("GET, HEAD", requestId) }
        guard let userId = AdminUserId.decode(pathComponent: component) else {
            return problem(.malformedRequest, requestId, detail: "userId must be 1-256 bytes of UTF-8, percent-encoded")
        }
        do {
            let records = revoke ? try await actions.revokeUser(userId: userId) : try await actions.userKeys(userId: userId)
            guard let records else { return problem(.unknownUser, requestId) }
            if revoke {
                logger.notice(
                    "user's keys revoked",
                    metadata: ["keys": "\(records.count)", "requestId": "\(requestId)"])
            }
            let body = JSONText.object([
                ("userId", JSONText.quoted(userId)),
                ("keys", "[" + records.map(\.adminJSON).joined(separator: ",") + "]"),
            ])
            return AdminResponse(
                status: 200,
                headers: [("Content-Type", "application/json"), ("Cache-Control", "no-store"), ("X-Request-Id", requestId)],
                body: body)
        } catch {
            logger.error("admin user action failed", metadata: ["requestId": "\(requestId)", "error": "\(error)"])
            return problem(.storeUnavailable, requestId)
        }
    }

    /// `Authorization: Bearer <token>`, the token compared in constant time.
    func authorized(_ header: String?, _ expected: Secret) -> Bool {
        guard let header else { return false }
        let utf8 = Array(header.utf8)
        let scheme = Array("bearer ".utf8)
        guard utf8.count > scheme.count,
            zip(utf8.prefix(scheme.count), scheme).allSatisfy({ ($0 | 0x20) == $1 || ($0 == $1) })
        else { return false }
        var presented = utf8[scheme.count...]
        while presented.first == UInt8(ascii: " ") { presented = presented.dropFirst() }
        while presented.last == UInt8(ascii: " ") { presented = presented.dropLast() }
        return ConstantTime.equals(presented, expected.value.utf8)
    }

    private func readyWithinTimeout() async -> Bool {
        let readiness = self.readiness
        let timeout = self.readinessTimeout
        return await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
            let once = OnceResume(continuation)
            Task { once.resume(await readiness()) }
            Task {
                try? await Task.sleep(for: timeout)
                once.resume(false)
            }
        }
    }

    private func ok(_ body: String, _ requestId: String) -> AdminResponse {
        AdminResponse(status: 200, headers: [("Content-Type", "application/json"), ("X-Request-Id", requestId)], body: body)
    }

    private func unauthorized(_ requestId: String) -> AdminResponse {
        var r = problem(.unauthorized, requestId)
        r.headers.append(("www-authenticate", "Bearer"))
        return r
    }

    private func methodNotAllowed(_ allow: String, _ requestId: String) -> AdminResponse {
        AdminResponse(ProblemWriter.answer(Rejection(.methodNotAllowed, allow: allow), requestId: requestId))
    }

    /// `status` overrides the reason's own status where §7 says so (`404 unknown-key`).
    private func problem(_ reason: ReasonToken, _ requestId: String, detail: String = "", status: Int? = nil) -> AdminResponse {
        AdminResponse(ProblemWriter.answer(Rejection(reason, detail, status: status), requestId: requestId))
    }
}

private final class OnceResume: Sendable {
    private let state: Mutex<CheckedContinuation<Bool, Never>?>
    init(_ continuation: CheckedContinuation<Bool, Never>) { state = Mutex(continuation) }
    func resume(_ value: Bool) {
        state.withLock { c in
            c?.resume(returning: value)
            c = nil
        }
    }
}
