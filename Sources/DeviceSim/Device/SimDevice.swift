import COpenSSL
import Foundation

/// A software App Attest device: one P-256 key (an App Attest key), the test
/// CA that "attests" it and the receipt CA that signs its receipts.
///
/// Immutable except for the rpIdHash cache (guarded by a lock), so one device
/// may be shared between tasks; `assert` costs one SHA-256 and one
/// EVP_DigestSign on a copy of the key's pre-initialised signing context
/// (≈ 21 µs on this machine, raw P-256 signing being ≈ 19 µs).
public final class SimDevice: @unchecked Sendable {
    /// App ID used by the `wrongAppId` mutations.
    public static let otherAppId = "ZZZZZZZZZZ.org.example.other"

    public let key: ECKey
    /// H(65-byte uncompressed public point).
    public let keyId: [UInt8]
    public let ca: TestCA
    public let receiptCA: ReceiptCA

    private let cacheLock = NSLock()
    private var rpIdHashes: [String: [UInt8]] = [:]

    /// A device with `key`, or a freshly generated P-256 key.
    public init(ca: TestCA, receiptCA: ReceiptCA, key: ECKey? = nil) throws {
        let key = try key ?? ECKey(generating: .p256)
        guard key.curve == .p256 else { throw DeviceSimError.invalidInput("App Attest keys are P-256") }
        self.key = key
        self.keyId = Digest.sha256(key.uncompressedPoint)
        self.ca = ca
        self.receiptCA = receiptCA
    }

    /// The 65-byte uncompressed public key.
    public var publicKey: [UInt8] { key.uncompressedPoint }

    /// keyId as standard base64 (what `generateKey()` returns on a device).
    public var keyIdBase64: String { Data(keyId).base64EncodedString() }

    /// keyId as unpadded base64url (as some apps send it).
    public var keyIdBase64URL: String {
        String(keyIdBase64.compactMap { c -> Character? in
            switch c {
            case "+": return "-"
            case "/": return "_"
            case "=": return nil
            default: return c
            }
        })
    }

    /// Restores a device saved with `save(to:)` (a PEM private key file).
    public static func load(path: String, ca: TestCA, receiptCA: ReceiptCA) throws -> SimDevice {
        try SimDevice(ca: ca, receiptCA: receiptCA, key: ECKey(privateKeyPEM: PEMDirectory.read(path)))
    }

    /// Writes the private key as PEM (0600).
    public func save(to path: String) throws {
        try PEMDirectory.write(key.privateKeyPEM(), to: path, secret: true)
    }

    // MARK: Attestation

    /// The CBOR attestation object for this key, as `DCAppAttestService.attestKey`
    /// returns it, made at unix time `time` (leaf validity and receipt creation).
    public func attest(
        clientDataHash: [UInt8], appId: String, environment: AttestationEnvironment = .development,
        at time: Int64, mutation: AttestationMutation? = nil, options: AttestationOptions = AttestationOptions()
    ) throws -> [UInt8] {
        // Keys and CAs that stand in for "someone else" exist only for the mutations needing them.
        let otherKey: ECKey? = [.keyIdMismatch, .coseKeyMismatch, .receiptWrongKey].contains(mutation)
            ? try ECKey(generating: .p256) : nil

        // authenticatorData (app-attest.md §1).
        var authData = rpIdHash(mutation == .wrongAppId ? Self.otherAppId : appId)
        authData.append(0x40)
        authData += Self.bigEndian(mutation == .nonZeroCounter ? 1 : 0)
        if mutation == .badAAGUID {
            var aaguid = try Digest.randomBytes(16)
            if aaguid == AttestationEnvironment.development.aaguid || aaguid == AttestationEnvironment.production.aaguid {
                aaguid[0] ^= 0xff
            }
            authData += aaguid
        } else {
            authData += environment.aaguid
        }
        authData += [0x00, 0x20]
        authData += mutation == .credentialIdMismatch ? try Digest.randomBytes(32) : keyId
        let coseKey = (mutation == .coseKeyMismatch ? otherKey : nil) ?? key
        authData += CBOR.map([
            (.int(1), .int(2)),
            (.int(3), .int(-7)),
            (.int(-1), .int(mutation == .coseKeyNotP256 ? 2 : 1)),
            (.int(-2), .bytes(coseKey.x)),
            (.int(-3), .bytes(coseKey.y)),
        ]).encoded()
        if let extensions = options.extensions { authData += extensions.cbor.encoded() }

        // credCert and chain.
        let nonce = Digest.sha256(authData, clientDataHash)
        let issuingCA = [.untrustedChain, .untrustedChainWithRoot].contains(mutation) ? try TestCA(name: "Untrusted") : ca
        var leafOptions = CredentialCertificateOptions(
            notBefore: time - 60, notAfter: time + options.leafLifetime,
            appId: options.includeAppIdExtension ? appId : nil, osVersion: options.osVersion, aclBlob: options.aclBlob)
        if mutation == .expiredLeaf {
            leafOptions.notBefore = time - 10 * 86_400
            leafOptions.notAfter = time - 7 * 86_400
        }
        let leafKey = (mutation == .keyIdMismatch ? otherKey : nil) ?? key
        let leaf = try issuingCA.issueCredentialCertificate(
            for: leafKey, nonce: mutation == .wrongNonce ? Digest.sha256(nonce) : nonce, options: leafOptions)
        var x5c: [CBOR] = [.bytes(leaf.der), .bytes(issuingCA.intermediate.der)]
        if mutation == .untrustedChainWithRoot { x5c.append(.bytes(issuingCA.root.der)) }

        // Receipt (app-attest.md §4).
        var attStmt: [(CBOR, CBOR)] = [(.text("x5c"), .array(x5c))]
        if mutation != .receiptMissing {
            let receiptKeyCert = try mutation == .receiptWrongKey
                ? issuingCA.issueCredentialCertificate(for: otherKey ?? key, nonce: nonce, options: leafOptions).der
                : leaf.der
            let createdAt = time * 1000
            let payload = ReceiptPayload(
                appId: mutation == .receiptWrongAppId ? Self.otherAppId : appId,
                attestedPublicKey: receiptKeyCert,
                clientHash: clientDataHash,
                token: try options.receiptToken ?? Data(Digest.randomBytes(64)).base64EncodedString(),
                kind: .attest,
                environment: environment.receiptEnvironment,
                // ATTEST receipts from real devices carry no field 19 (not before).
                createdAtMillis: createdAt,
                expiresAtMillis: createdAt + options.receiptLifetimeMillis)
            let signingCA = mutation == .receiptUntrusted ? try ReceiptCA(name: "Untrusted Receipt") : receiptCA
            var receipt = try signingCA.sign(payload)
            if mutation == .receiptBadSignature, let last = receipt.indices.last {
                // i2d_PKCS7 ends with the SignerInfo's encryptedDigest: this is the signature's last byte.
                receipt[last] ^= 0x01
            }
            attStmt.append((.text("receipt"), .bytes(receipt)))
        }

        var top: [(CBOR, CBOR)] = [
            (.text("fmt"), .text(mutation == .wrongFormat ? "wurzelpfropf" : "apple-appattest")),
            (.text("attStmt"), .map(attStmt)),
            (.text("authData"), .bytes(authData)),
        ]
        if mutation == .duplicateKey { top.append((.text("fmt"), .text("apple-appattest"))) }
        var object = (mutation == .indefiniteLength ? CBOR.indefiniteMap(top) : CBOR.map(top)).encoded()
        switch mutation {
        case .malformedCBOR: object.removeLast(7)
        case .trailingBytes: object.append(0xf6)
        default: break
        }
        return object
    }

    // MARK: Assertion

    /// The CBOR assertion object `{"signature", "authenticatorData"}` for
    /// `clientDataHash`, with the signature over nonce = H(authData ‖ clientDataHash).
    public func assert(
        clientDataHash: [UInt8], appId: String, counter: UInt32, mutation: AssertionMutation? = nil,
        extensions: AuthenticatorExtensions? = nil
    ) throws -> [UInt8] {
        var authData = rpIdHash(mutation == .wrongAppId ? Self.otherAppId : appId)
        authData.reserveCapacity(37 + clientDataHash.count)
        authData.append(0x40)
        authData += Self.bigEndian(counter)
        if let extensions { authData += extensions.cbor.encoded() }

        var signed = authData
        signed += clientDataHash
        if mutation == .badSignature { signed.append(0x00) }
        var signature = try key.sign(Digest.sha256(signed))
        if mutation == .signatureNotDER {
            signature = try ECKey.rawSignature(fromDER: signature, coordinateSize: 32)
        }

        // Hand-assembled: a 2-entry map, the same bytes the generic encoder would write.
        var object: [UInt8] = [0xa2, 0x69]
        object.reserveCapacity(40 + signature.count + authData.count)
        object += Array("signature".utf8)
        CBOREncoder.appendHead(major: 2, UInt64(signature.count), to: &object)
        object += signature
        object.append(0x71)
        object += Array("authenticatorData".utf8)
        CBOREncoder.appendHead(major: 2, UInt64(authData.count), to: &object)
        object += authData
        if mutation == .malformedCBOR { object.removeLast(5) }
        return object
    }

    // MARK: Helpers

    /// H(appId), cached per App ID.
    public func rpIdHash(_ appId: String) -> [UInt8] {
        cacheLock.lock()
        defer { cacheLock.unlock() }
        if let cached = rpIdHashes[appId] { return cached }
        let hash = Digest.sha256(Array(appId.utf8))
        rpIdHashes[appId] = hash
        return hash
    }

    private static func bigEndian(_ value: UInt32) -> [UInt8] {
        [UInt8(value >> 24), UInt8(value >> 16 & 0xff), UInt8(value >> 8 & 0xff), UInt8(value & 0xff)]
    }
}
