import COpenSSL
import Foundation
import NIOConcurrencyHelpers
import Verifier

/// The `Authorization` token of Apple's App Attest data endpoint
/// (app-attest.md §4) and of the DeviceCheck API (devicecheck.md): a JWT
/// signed ES256 with the team's DeviceCheck key, header `{alg: ES256, kid:
/// keyId}`, claims `{iss: teamId, iat: now}` (Apple's APNs provider-token
/// recipe).
///
/// Apple accepts a token for up to an hour and asks that it not be re-signed
/// for every request, so one token is kept for `reuseFor` seconds.
///
/// Thread safety: the `EVP_PKEY` is never mutated after init and each
/// signature has its own `EVP_MD_CTX` (OpenSSL 3 allows that from many
/// threads); the cached token is behind a lock. Frees its key in deinit.
final class DeviceCheckToken: @unchecked Sendable {
    enum KeyError: Error, Equatable, CustomStringConvertible {
        case unreadable(String)
        case notP256

        var description: String {
            switch self {
            // The caller names the setting: "fraudMetric.privateKey: \(error)".
            case .unreadable(let why): return "not a PEM private key (\(why))"
            case .notP256: return "must be an EC P-256 key (Apple's .p8 DeviceCheck key)"
            }
        }
    }

    let teamId: String
    let keyId: String
    let reuseFor: Int64
    /// `EVP_PKEY *`, owned.
    private let key: OpaquePointer
    private let cached = NIOLockedValueBox<(token: String, issuedAt: Int64)?>(nil)

    init(pem: String, teamId: String, keyId: String, reuseFor: Int64 = 1200) throws(KeyError) {
        OpenSSLErrorQueue.clear()
        let parsed: OpaquePointer? = Array(pem.utf8).withUnsafeBytes { bytes in
            guard let bio = BIO_new_mem_buf(bytes.baseAddress, Int32(clamping: bytes.count)) else { return nil }
            defer { BIO_free(bio) }
            // Encrypted keys are refused (no prompt): the callback supplies no password.
            return PEM_read_bio_PrivateKey(bio, nil, { _, _, _, _ in 0 }, nil)
        }
        guard let parsed else { throw .unreadable(OpenSSLErrorQueue.drain()) }
        var group = [CChar](repeating: 0, count: 64)
        var groupLength = 0
        let named = EVP_PKEY_get_group_name(parsed, &group, group.count, &groupLength) == 1
        let curve = named ? String(decoding: group.prefix(groupLength).map { UInt8(bitPattern: $0) }, as: UTF8.self) : ""
        guard EVP_PKEY_get_base_id(parsed) == EVP_PKEY_EC, curve == "prime256v1" else {
            EVP_PKEY_free(parsed)
            throw .notP256
        }
        self.key = parsed
        self.teamId = teamId
        self.keyId = keyId
        self.reuseFor = reuseFor
    }

    deinit {
        EVP_PKEY_free(key)
    }

    /// A token issued at most `reuseFor` seconds before `now`; nil only if
    /// OpenSSL cannot sign (out of memory).
    func token(now: Int64) -> String? {
        let reuseFor = self.reuseFor
        let kept = cached.withLockedValue { c -> String? in
            guard let c, now - c.issuedAt < reuseFor, now >= c.issuedAt else { return nil }
            return c.token
        }
        if let kept { return kept }
        // Signed outside the lock: two threads may both sign once; either token is good.
        guard let token = sign(issuedAt: now) else { return nil }
        cached.withLockedValue { $0 = (token, now) }
        return token
    }

    /// Forgets the cached token (after a 401: sign a fresh one next time).
    func invalidate() { cached.withLockedValue { $0 = nil } }

    func sign(issuedAt: Int64) -> String? {
        let header = JSONText.object([("alg", JSONText.quoted("ES256")), ("kid", JSONText.quoted(keyId))])
        let claims = JSONText.object([("iss", JSONText.quoted(teamId)), ("iat", String(issuedAt))])
        let input = Base64.encodeURL(Array(header.utf8)) + "." + Base64.encodeURL(Array(claims.utf8))
        guard let der = signDER(Array(input.utf8)), let raw = Self.rawSignature(fromDER: der) else { return nil }
        return input + "." + Base64.encodeURL(raw)
    }

    private func signDER(_ message: [UInt8]) -> [UInt8]? {
        guard let ctx = EVP_MD_CTX_new() else { return nil }
        defer { EVP_MD_CTX_free(ctx) }
        guard EVP_DigestSignInit(ctx, nil, EVP_sha256(), nil, key) == 1 else { return nil }
        var length = 0
        guard message.withUnsafeBufferPointer({ EVP_DigestSign(ctx, nil, &length, $0.baseAddress, $0.count) }) == 1 else {
            return nil
        }
        var signature = [UInt8](repeating: 0, count: length)
        let ok = signature.withUnsafeMutableBufferPointer { out in
            message.withUnsafeBufferPointer { EVP_DigestSign(ctx, out.baseAddress, &length, $0.baseAddress, $0.count) }
        }
        guard ok == 1 else { return nil }
        return Array(signature.prefix(length))
    }

    /// JWS wants r ‖ s, 32 bytes each; OpenSSL gives DER
    /// `SEQUENCE { INTEGER r, INTEGER s }` (short lengths for P-256).
    static func rawSignature(fromDER der: [UInt8]) -> [UInt8]? {
        var i = 0
        func byte() -> UInt8? {
            guard i < der.count else { return nil }
            defer { i += 1 }
            return der[i]
        }
        guard byte() == 0x30, let total = byte(), total < 0x80, Int(total) == der.count - 2 else { return nil }
        var out: [UInt8] = []
        for _ in 0..<2 {
            guard byte() == 0x02, let n = byte(), n > 0, n <= 33, i + Int(n) <= der.count else { return nil }
            var integer = Array(der[i..<(i + Int(n))])
            i += Int(n)
            while integer.count > 32, integer.first == 0 { integer.removeFirst() }
            guard integer.count <= 32 else { return nil }
            out += [UInt8](repeating: 0, count: 32 - integer.count) + integer
        }
        return i == der.count ? out : nil
    }
}
