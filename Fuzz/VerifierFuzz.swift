// libFuzzer entry point. Compiled by run.sh together with the Verifier
// sources into one module, so it reaches internal parsers too.

private let fuzzAnchors = TrustAnchors.appleAppAttestation
private let fuzzVerifier = AttestationVerifier()
private let fuzzKey: P256PublicKey? = {
    // devicecheck ios-14.4 attested key.
    let hex = "0488c034a190aa7dbc5a061501c6542803942582198b3f1cc54673ca3b9ad20b41528267a54f5fdba0469fafb46bb6990a396bf04f94a49d4320c81c7ab240a398"
    guard let point = Hex.decode(hex) else { return nil }
    return try? P256PublicKey(point: point)
}()
private let allowed: [String: Set<AppAttestEnvironment>] = [
    "6MURL8TA57.de.vincent-haupert.apple-appattest-poc": [.development, .production]
]
private let fuzzKeyId = (try? Base64.decode("YmbJO4x5nEHUvncp9zdWuVZjNBEMgJn3cdSToAXQe3M=")) ?? []
// 2021-01-23T12:13:33Z: inside the ios-14.4 leaf's validity.
private let fuzzTime: Int64 = 1_611_404_013

@_cdecl("LLVMFuzzerTestOneInput")
public func verifierFuzzTestOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> Int32 {
    guard let data else { return 0 }
    let bytes = Array(UnsafeBufferPointer(start: data, count: size))

    _ = try? CBORDecoder(limits: .attestation).decode(bytes)
    _ = try? CBORDecoder(limits: .assertion).decodePrefix(bytes, range: 0..<bytes.count)
    _ = try? AuthenticatorData.parseAttestation(bytes)
    if let assertion = try? AuthenticatorData.parseAssertion(bytes) {
        fuzzSignals(assertion.extensions)
    }
    // The extension map on its own, as it follows the 37 fixed bytes of an
    // asserted request's authenticator data (risk.md §1).
    if let map = try? AuthenticatorExtensions.parse(bytes, range: 0..<bytes.count) {
        fuzzSignals(map)
    }
    _ = KeyPolicy.classify(aclBlob: bytes)
    if let parsed = try? ParsedAssertion.parse(bytes), let key = fuzzKey {
        _ = try? parsed.verify(
            publicKey: key, appId: "6MURL8TA57.de.vincent-haupert.apple-appattest-poc",
            clientDataHash: SHA256.hash(Array("wurzelpfropf".utf8)), previousCounter: 0)
    }
    _ = try? fuzzVerifier.verify(
        attestationObject: bytes, keyId: fuzzKeyId,
        clientDataHash: SHA256.hash(Array("wurzelpfropf".utf8)), allowedApps: allowed, at: fuzzTime)
    if bytes.first == 0x30 {
        _ = try? ReceiptVerifier.verify(receipt: bytes)
    }
    // Parsers that otherwise run only behind a genuine Apple signature or
    // chain, which the fuzzer cannot make: fed directly. (The receipt payload
    // is a SET, 0x31: behind the 0x30 check above it was never reached.)
    _ = ReceiptPayload.parse(bytes)
    _ = CredentialCertificate.nonce(extensionValue: bytes)
    if let value = try? CBORDecoder(limits: .attestation).decode(bytes) {
        _ = COSEKey.p256Point(value)
    }
    if size < 256 {
        _ = try? Base64.decode(bytes)
        _ = RFC3339Time(String(decoding: bytes, as: UTF8.self))
        _ = try? P256PublicKey(spki: bytes)
    }
    return 0
}

/// Invariants of the signals read from an extension map: a category is
/// either decoded or named malformed, never both; a kept bundle version is
/// within its bound.
private func fuzzSignals(_ extensions: AuthenticatorExtensions) {
    let categoryMalformed = extensions.malformedKeys.contains(AuthenticatorExtensions.validationCategoryKey)
    if extensions.launchCategory != nil && categoryMalformed { fatalError("category both decoded and malformed") }
    if let category = extensions.launchCategory { _ = LaunchCategory.name(category) }
    if let version = extensions.bundleVersion, version.utf8.count > AuthenticatorExtensions.maxBundleVersionBytes {
        fatalError("bundle version over its bound kept")
    }
}
