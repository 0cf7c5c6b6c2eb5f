/// The decoded attestation object (app-attest.md §1), before verification.
struct AttestationObject {
    static let format = "apple-appattest"
    static let maxCertificates = 4

    let certificates: [[UInt8]]
    let receipt: [UInt8]?
    let authenticatorData: AuthenticatorData

    /// Step 1: decode; only `apple-appattest` is supported.
    static func parse(_ bytes: [UInt8]) throws(VerificationError) -> AttestationObject {
        let root: CBORValue
        do {
            root = try CBORDecoder(limits: .attestation).decode(bytes)
        } catch {
            throw .malformedAttestation("attestation object: \(error)")
        }
        guard root.mapEntries != nil else { throw .malformedAttestation("attestation object is not a CBOR map") }
        guard let fmt = root[text: "fmt"]?.textValue else {
            throw .malformedAttestation("attestation object has no text fmt")
        }
        guard fmt == format else { throw .unsupportedFormat("fmt is \"\(fmt.prefix(64))\", expected \(format)") }
        guard let statement = root[text: "attStmt"], statement.mapEntries != nil else {
            throw .malformedAttestation("attestation object has no attStmt map")
        }
        guard case .array(let x5c)? = statement[text: "x5c"] else {
            throw .malformedAttestation("attStmt has no x5c array")
        }
        guard !x5c.isEmpty, x5c.count <= maxCertificates else {
            throw .malformedAttestation("x5c holds \(x5c.count) certificates, expected 1 to \(maxCertificates)")
        }
        var certificates: [[UInt8]] = []
        for cert in x5c {
            guard let der = cert.bytesValue else { throw .malformedAttestation("x5c element is not a byte string") }
            certificates.append(der)
        }
        var receipt: [UInt8]?
        if let value = statement[text: "receipt"] {
            guard let bytes = value.bytesValue else { throw .malformedAttestation("receipt is not a byte string") }
            receipt = bytes
        }
        guard let authData = root[text: "authData"]?.bytesValue else {
            throw .malformedAttestation("attestation object has no authData byte string")
        }
        let parsed: AuthenticatorData
        do {
            parsed = try AuthenticatorData.parseAttestation(authData)
        } catch {
            throw .malformedAttestation("authData: \(error)")
        }
        return AttestationObject(certificates: certificates, receipt: receipt, authenticatorData: parsed)
    }
}
