import DeviceSim
import Testing

@Suite("ClientData (protocol.md §3, §4)")
struct ClientDataTests {
    static let challenge = "q7H1l0n5b2Qk2m8h3x0Jz9w4v6u1t3s5r7p9o1n3m5k"

    @Test("attestation clientData, with and without a user")
    func attestation() {
        #expect(ClientData.attestation(challenge: Self.challenge, userId: "u-1")
                == Array("assertgate-attest-v1\n\(Self.challenge)\nu-1".utf8))
        #expect(ClientData.attestation(challenge: Self.challenge)
                == Array("assertgate-attest-v1\n\(Self.challenge)\n".utf8))
        #expect(ClientData.attestation(challenge: Self.challenge, userId: "")
                == ClientData.attestation(challenge: Self.challenge, userId: nil))
        let data = ClientData.attestation(challenge: Self.challenge)
        #expect(ClientData.hash(data) == OpenSSLChecks.sha256(data))
    }

    @Test("assertion clientData binds method, raw path, challenge and the body hash")
    func assertion() {
        let empty = ClientData.assertion(method: "POST", path: "/v1/items?a=1%20", challenge: Self.challenge, body: .body([]))
        #expect(empty == Array(("assertgate-assert-v1\nPOST\n/v1/items?a=1%20\n\(Self.challenge)\n"
            + "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855").utf8))
        let unsigned = ClientData.assertion(method: "PUT", path: "/upload", challenge: nil, body: .unsigned)
        #expect(unsigned == Array("assertgate-assert-v1\nPUT\n/upload\n\nUNSIGNED-PAYLOAD".utf8))
        let abc = ClientData.assertion(method: "GET", path: "/", challenge: nil, body: .body(Array("abc".utf8)))
        #expect(String(decoding: abc, as: UTF8.self).hasSuffix(
            "\nba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"))
    }
}
