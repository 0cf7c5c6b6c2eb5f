import GatewayTLS
import Testing

@Suite struct ALPNSelectionTests {
    private func offer(_ names: [String]) -> [UInt8] {
        names.flatMap { [UInt8($0.utf8.count)] + Array($0.utf8) }
    }

    @Test func serverPreferenceWinsOverClientOrder() {
        let chosen = ALPN.select(serverPreference: ["h2", "http/1.1"], clientOffer: self.offer(["http/1.1", "h2"]))
        #expect(chosen == "h2")
    }

    @Test func fallsBackToHTTP11() {
        #expect(ALPN.select(serverPreference: ["h2", "http/1.1"], clientOffer: self.offer(["http/1.1"])) == "http/1.1")
    }

    @Test func configuredListIsHonoured() {
        #expect(ALPN.select(serverPreference: ["http/1.1"], clientOffer: self.offer(["h2", "http/1.1"])) == "http/1.1")
    }

    @Test func noOverlapSelectsNothing() {
        #expect(ALPN.select(serverPreference: ["h2", "http/1.1"], clientOffer: self.offer(["spdy/3", "h2c"])) == nil)
        #expect(ALPN.select(serverPreference: ["h2"], clientOffer: []) == nil)
    }

    @Test func prefixOfAProtocolIsNotAMatch() {
        // "h2" must not match inside "h2c" or "h2-14".
        #expect(ALPN.select(serverPreference: ["h2"], clientOffer: self.offer(["h2c", "h2-14"])) == nil)
    }

    @Test func malformedOffersAreRejected() {
        // Length byte runs past the end.
        #expect(ALPN.select(serverPreference: ["h2"], clientOffer: [2, 0x68, 0x32, 5, 0x68]) == nil)
        // Zero-length name.
        #expect(ALPN.select(serverPreference: ["h2"], clientOffer: [0, 2, 0x68, 0x32]) == nil)
    }

    @Test func returnedRangePointsIntoTheClientOffer() {
        let client = self.offer(["foo", "h2"])
        let server: [UInt8] = [2, 0x68, 0x32]
        let range = server.withUnsafeBytes { s in
            client.withUnsafeBytes { c in ALPN.select(serverPreference: s, clientOffer: c) }
        }
        #expect(range == 5..<7)
    }

    @Test func wireFormatValidatesNames() throws {
        #expect(try ALPN.wireFormat(["h2", "http/1.1"]) == [2, 0x68, 0x32, 8] + Array("http/1.1".utf8))
        #expect(throws: TLSConfigurationError.invalidALPN(protocols: [""])) { try ALPN.wireFormat([""]) }
        #expect(throws: TLSConfigurationError.invalidALPN(protocols: [])) { try ALPN.wireFormat([]) }
        let long = String(repeating: "x", count: 256)
        #expect(throws: TLSConfigurationError.invalidALPN(protocols: [long])) { try ALPN.wireFormat([long]) }
    }
}
