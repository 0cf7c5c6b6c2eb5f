import GatewayTLS
import Testing

@Suite struct TLSServerContextTests {
    @Test func loadsP256AndRSAKeys() async throws {
        let directory = try TLSTestSupport.TemporaryDirectory()
        for keyType in [TLSTestSupport.KeyType.p256, .rsa2048] {
            let files = try await TLSTestSupport.makeCertificate(in: directory, name: "\(keyType)", keyType: keyType)
            let context = try TLSServerContext(certificatePath: files.certificate, privateKeyPath: files.key)
            #expect(context.alpnProtocols == ["h2", "http/1.1"])
        }
    }

    @Test func missingCertificateIsATypedErrorNamingTheFile() async throws {
        let directory = try TLSTestSupport.TemporaryDirectory()
        let files = try await TLSTestSupport.makeCertificate(in: directory)
        let missing = directory.path("does-not-exist.crt")
        do {
            _ = try TLSServerContext(certificatePath: missing, privateKeyPath: files.key)
            Issue.record("loading a missing certificate succeeded")
        } catch {
            guard case .certificate(let path, let reason) = error else {
                Issue.record("wrong error: \(error)")
                return
            }
            #expect(path == missing)
            #expect(reason.contains("No such file"), "OpenSSL's reason should be kept: \(reason)")
            #expect(error.description.contains(missing))
        }
    }

    @Test func missingOrGarbageKeyIsATypedError() async throws {
        let directory = try TLSTestSupport.TemporaryDirectory()
        let files = try await TLSTestSupport.makeCertificate(in: directory)
        // A certificate is not a private key.
        #expect {
            try TLSServerContext(certificatePath: files.certificate, privateKeyPath: files.certificate)
        } throws: { error in
            guard case .privateKey(let path, let reason)? = error as? TLSConfigurationError else { return false }
            return path == files.certificate && !reason.isEmpty
        }
    }

    @Test func encryptedKeyFailsInsteadOfPrompting() async throws {
        let directory = try TLSTestSupport.TemporaryDirectory()
        let files = try await TLSTestSupport.makeCertificate(in: directory)
        let encrypted = directory.path("encrypted.key")
        let result = try await TLSTestSupport.run(
            "openssl", ["pkey", "-in", files.key, "-aes256", "-passout", "pass:secret", "-out", encrypted])
        try #require(result.status == 0, "openssl pkey failed: \(result.stderr)")
        #expect {
            try TLSServerContext(certificatePath: files.certificate, privateKeyPath: encrypted)
        } throws: { error in
            guard case .privateKey(let path, _)? = error as? TLSConfigurationError else { return false }
            return path == encrypted
        }
    }

    @Test func keyOfAnotherCertificateIsRejected() async throws {
        let directory = try TLSTestSupport.TemporaryDirectory()
        let first = try await TLSTestSupport.makeCertificate(in: directory, name: "first")
        let second = try await TLSTestSupport.makeCertificate(in: directory, name: "second")
        #expect {
            try TLSServerContext(certificatePath: first.certificate, privateKeyPath: second.key)
        } throws: { error in
            guard case .keyMismatch(let certificate, let key, _)? = error as? TLSConfigurationError else {
                return false
            }
            return certificate == first.certificate && key == second.key
        }
    }

    @Test func emptyALPNNameIsRejected() async throws {
        let directory = try TLSTestSupport.TemporaryDirectory()
        let files = try await TLSTestSupport.makeCertificate(in: directory)
        #expect(throws: TLSConfigurationError.invalidALPN(protocols: ["h2", ""])) {
            try TLSServerContext(certificatePath: files.certificate, privateKeyPath: files.key, alpn: ["h2", ""])
        }
    }
}
