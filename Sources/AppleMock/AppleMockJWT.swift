import Foundation
import Verifier

/// Checks an `Authorization` JWT as Apple would: three base64url parts,
/// header `alg: ES256` with a `kid`, claims with `iss` and an `iat` no older
/// than an hour (and not ahead of the clock by more than a minute), and an
/// ES256 signature by the configured public key.
struct AppleMockJWT: Sendable {
    enum Verdict: Equatable {
        case ok
        /// Apple: 400 "Missing or badly formatted authorization token".
        case malformed
        /// Apple: 401 "Unable to verify authorization token".
        case refused
    }

    static let maxLength = 4096
    let key: P256PublicKey

    func check(_ jwt: String, nowSeconds: Int64) -> Verdict {
        guard jwt.utf8.count <= Self.maxLength else { return .malformed }
        let parts = jwt.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
        guard parts.count == 3, let headerBytes = try? Base64.decode(parts[0]),
            let claimsBytes = try? Base64.decode(parts[1]), let signature = try? Base64.decode(parts[2]),
            let header = try? JSONDecoder().decode(Header.self, from: Data(headerBytes)),
            let claims = try? JSONDecoder().decode(Claims.self, from: Data(claimsBytes))
        else { return .malformed }
        guard header.alg == "ES256", !header.kid.isEmpty, !claims.iss.isEmpty else { return .refused }
        guard claims.iat <= nowSeconds + 60, nowSeconds - claims.iat <= 3600 else { return .refused }
        guard signature.count == 64, let der = Self.der(raw: signature) else { return .refused }
        let input = Array((parts[0] + "." + parts[1]).utf8)
        return key.verify(signature: der, message: input) ? .ok : .refused
    }

    /// JWS r ‖ s as DER `SEQUENCE { INTEGER r, INTEGER s }`.
    static func der(raw: [UInt8]) -> [UInt8]? {
        guard raw.count == 64 else { return nil }
        func integer(_ bytes: ArraySlice<UInt8>) -> [UInt8] {
            var v = Array(bytes.drop(while: { $0 == 0 }))
            if v.isEmpty { v = [0] }
            if v[0] & 0x80 != 0 { v.insert(0, at: 0) }
            return [0x02, UInt8(v.count)] + v
        }
        let body = integer(raw[0..<32]) + integer(raw[32..<64])
        return [0x30, UInt8(body.count)] + body
    }

    private struct Header: Decodable {
        var alg: String
        var kid: String
    }

    private struct Claims: Decodable {
        var iss: String
        var iat: Int64
    }
}
