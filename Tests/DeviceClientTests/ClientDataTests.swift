import DeviceClient
import Testing

@Suite("clientData, base64 and URLs")
struct ClientDataTests {
    @Test func attestClientDataIsTheProtocolString() {
        let bytes = AssertGateClientData.attest(challenge: "abc", userId: "user-1")
        #expect(String(decoding: bytes, as: UTF8.self) == "assertgate-attest-v1\nabc\nuser-1")
        #expect(AssertGateClientData.attest(challenge: "abc", userId: nil) == AssertGateClientData.attest(challenge: "abc", userId: ""))
    }

    @Test func assertClientDataBindsMethodPathChallengeAndBody() {
        let empty = AssertGateClientData.assert(method: "GET", path: "/a?b=1", challenge: nil, bodyHash: .body([]))
        #expect(String(decoding: empty, as: UTF8.self)
            == "assertgate-assert-v1\nGET\n/a?b=1\n\ne3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
        let unsigned = AssertGateClientData.assert(method: "PUT", path: "/u", challenge: "ch", bodyHash: .unsignedPayload)
        #expect(String(decoding: unsigned, as: UTF8.self) == "assertgate-assert-v1\nPUT\n/u\nch\nUNSIGNED-PAYLOAD")
        // SHA-256("abc"), FIPS 180-2 test vector.
        #expect(AssertGateClientData.BodyHash.body(Array("abc".utf8)).text
            == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
    }

    @Test func base64Forms() {
        let bytes: [UInt8] = [0xfb, 0xff, 0xfe]
        #expect(Base64Text.standard(bytes) == "+//+")
        #expect(Base64Text.url(bytes) == "-__-")
        #expect(Base64Text.decode("-__-") == bytes)
        #expect(Base64Text.url([0x01]) == "AQ")
        #expect(Base64Text.decode("AQ") == [0x01])
        #expect(Base64Text.decode("not base64!") == nil)
    }

    @Test func gatewayURLParsing() throws {
        #expect(try GatewayURL(parsing: "http://127.0.0.1:8080") == GatewayURL(host: "127.0.0.1", port: 8080))
        #expect(try GatewayURL(parsing: "http://localhost/") == GatewayURL(host: "localhost", port: 80))
        #expect(try GatewayURL(parsing: "http://[::1]:9000").authority == "[::1]:9000")
        #expect(throws: GatewayURL.ParseError.unsupportedScheme("https://x")) { try GatewayURL(parsing: "https://x") }
        #expect(throws: GatewayURL.ParseError.badPort("http://x:99999")) { try GatewayURL(parsing: "http://x:99999") }
    }
}
