import Foundation

/// Anything that can send one request and return the whole response.
public protocol HTTPRequester: Sendable {
    func send(_ request: HTTPClientRequest) async throws -> HTTPClientResponse
}

extension HTTP2Client: HTTPRequester {
    public func send(_ request: HTTPClientRequest) async throws -> HTTPClientResponse {
        try await execute(request).get()
    }
}

/// The gateway's own routes (protocol.md §2, §3).
public struct GatewayAPI: Sendable {
    public let requester: HTTPRequester
    public let authority: String
    public let prefix: String

    public enum APIError: Error, CustomStringConvertible {
        case unexpectedStatus(route: String, status: Int, body: String)
        case malformedAnswer(route: String, body: String)

        public var description: String {
            switch self {
            case .unexpectedStatus(let route, let status, let body): "\(route) answered \(status): \(body)"
            case .malformedAnswer(let route, let body): "\(route) answered something unexpected: \(body)"
            }
        }
    }

    public enum Purpose: String, Sendable { case attest, assert }

    public init(requester: HTTPRequester, authority: String, prefix: String = "/assertgate/v1") {
        self.requester = requester
        self.authority = authority
        self.prefix = prefix.hasSuffix("/") ? String(prefix.dropLast()) : prefix
    }

    /// POST {prefix}/challenge; returns the b64url challenge.
    public func challenge(keyId: [UInt8], purpose: Purpose) async throws -> String {
        let route = "\(prefix)/challenge"
        let body = try JSONSerialization.data(withJSONObject: ["keyId": Base64Text.standard(keyId), "purpose": purpose.rawValue], options: [.sortedKeys])
        let response = try await postJSON(route, body: [UInt8](body))
        guard response.status == 200 else {
            throw APIError.unexpectedStatus(route: route, status: response.status, body: response.bodyText)
        }
        guard let object = try? JSONSerialization.jsonObject(with: Data(response.body)) as? [String: Any],
              let challenge = object["challenge"] as? String
        else { throw APIError.malformedAnswer(route: route, body: response.bodyText) }
        return challenge
    }

    /// POST {prefix}/attest; returns the raw response (201 on success).
    public func attest(keyId: [UInt8], challenge: String, attestation: [UInt8], userId: String?) async throws
        -> HTTPClientResponse
    {
        var fields: [String: String] = [
            "keyId": Base64Text.standard(keyId), "challenge": challenge, "attestation": Base64Text.standard(attestation),
        ]
        if let userId { fields["userId"] = userId }
        let body = try JSONSerialization.data(withJSONObject: fields, options: [.sortedKeys])
        return try await postJSON("\(prefix)/attest", body: [UInt8](body))
    }

    /// The whole attestation flow for `device`: challenge, attest, POST.
    public func attest(device: AppAttestDevice, userId: String?) async throws -> HTTPClientResponse {
        let challenge = try await challenge(keyId: device.keyId, purpose: .attest)
        let clientData = AssertGateClientData.attest(challenge: challenge, userId: userId)
        let attestation = try device.attestation(clientDataHash: SHA256Digest.hash(clientData))
        return try await attest(keyId: device.keyId, challenge: challenge, attestation: attestation, userId: userId)
    }

    private func postJSON(_ path: String, body: [UInt8]) async throws -> HTTPClientResponse {
        try await requester.send(HTTPClientRequest(
            method: "POST", path: path, authority: authority,
            headers: [("content-type", "application/json")], body: body))
    }
}
