import Foundation
import Verifier

/// Body of `POST {prefix}/challenge` (protocol.md §2).
public struct ChallengeRequest: Sendable, Equatable {
    public static let maxBodyBytes = 4 << 10
    public var keyId: [UInt8]
    public var purpose: ChallengePurpose

    private struct Wire: Decodable {
        var keyId: String
        var purpose: String
    }

    public static func parse(_ body: [UInt8]) throws(Rejection) -> ChallengeRequest {
        guard body.count <= maxBodyBytes else { throw Rejection(.bodyTooLarge, "challenge body over 4 KiB") }
        let wire: Wire
        do {
            wire = try JSONDecoder().decode(Wire.self, from: Data(body))
        } catch {
            throw Rejection(.malformedRequest, "challenge body is not {\"keyId\": string, \"purpose\": string}")
        }
        guard let purpose = ChallengePurpose(rawValue: wire.purpose) else {
            throw Rejection(.malformedRequest, "purpose must be \"attest\" or \"assert\"")
        }
        let keyId = try KeyIdCodec.decode(wire.keyId, reason: .malformedRequest)
        return ChallengeRequest(keyId: keyId, purpose: purpose)
    }
}

/// Body of `POST {prefix}/attest` (protocol.md §3).
public struct AttestRequest: Sendable, Equatable {
    public static let maxBodyBytes = 64 << 10
    public static let maxUserIdBytes = 256
    public var keyId: [UInt8]
    /// The b64url challenge string exactly as sent (it is part of the client data).
    public var challenge: String
    public var attestation: [UInt8]
    /// nil when absent, null or empty.
    public var userId: String?

    private struct Wire: Decodable {
        var keyId: String
        var challenge: String
        var attestation: String
        var userId: String?
    }

    public static func parse(_ body: [UInt8]) throws(Rejection) -> AttestRequest {
        guard body.count <= maxBodyBytes else { throw Rejection(.bodyTooLarge, "attest body over 64 KiB") }
        let wire: Wire
        do {
            wire = try JSONDecoder().decode(Wire.self, from: Data(body))
        } catch {
            throw Rejection(
                .malformedRequest,
                "attest body must carry keyId, challenge and attestation strings and an optional userId string")
        }
        let keyId = try KeyIdCodec.decode(wire.keyId, reason: .malformedRequest)
        guard ChallengeCodec.isWellFormed(wire.challenge) else {
            throw Rejection(.malformedRequest, "challenge must be 43 characters of unpadded base64url")
        }
        let attestation: [UInt8]
        do {
            attestation = try Base64.decode(wire.attestation, maxLength: maxBodyBytes)
        } catch {
            throw Rejection(.malformedRequest, "attestation is not valid base64")
        }
        var userId = wire.userId
        if userId?.isEmpty == true { userId = nil }
        if let u = userId, u.utf8.count > maxUserIdBytes {
            throw Rejection(.malformedRequest, "userId longer than 256 bytes")
        }
        return AttestRequest(keyId: keyId, challenge: wire.challenge, attestation: attestation, userId: userId)
    }
}

/// keyIds: 32 bytes, sent as b64 or b64url.
public enum KeyIdCodec {
    public static func decode(_ s: String, reason: ReasonToken) throws(Rejection) -> [UInt8] {
        let bytes: [UInt8]
        do {
            bytes = try Base64.decode(s, maxLength: 64)
        } catch {
            throw Rejection(reason, "keyId is not base64")
        }
        guard bytes.count == 32 else { throw Rejection(reason, "keyId must decode to 32 bytes") }
        return bytes
    }

    /// The canonical form used in Redis keys, headers and answers.
    public static func encode(_ keyId: [UInt8]) -> String { Base64.encodeURL(keyId) }
}

/// Challenges: 32 random bytes as 43 characters of unpadded b64url.
public enum ChallengeCodec {
    public static func isWellFormed(_ s: String) -> Bool {
        guard s.utf8.count == 43 else { return false }
        for b in s.utf8 {
            switch b {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "_"):
                continue
            default:
                return false
            }
        }
        // 43 chars carry 258 bits: the strict decoder refuses non-zero pad
        // bits, so only the canonical encoding of 32 bytes passes.
        return (try? Base64.decode(s, maxLength: 43))?.count == 32
    }
}
