import Testing

@testable import AssertGateCore

@Suite struct KeyRecordTests {
    @Test func jsonHasExactlyTheProtocolShape() {
        let record = KeyRecord(
            keyId: Array(repeating: 0xFB, count: 32), appId: "TEAM.com.ex\"q", environment: .development,
            counter: 42, publicKey: [0x04, 0xFF, 0x00], userId: "a\u{1}b", createdAt: 1_763_762_276,
            revoked: true, riskMetric: 3, riskMetricAt: 951_782_400)
        #expect(
            record.adminJSON
                == #"{"keyId":"-_v7-_v7-_v7-_v7-_v7-_v7-_v7-_v7-_v7-_v7-_s","appId":"TEAM.com.ex\"q","environment":"development","counter":42,"publicKey":"BP8A","userId":"a\u0001b","createdAt":"2025-11-21T21:57:56Z","revoked":true,"riskMetric":3,"riskMetricAt":"2000-02-29T00:00:00Z"}"#
        )
    }

    @Test func optionalFieldsAreLeftOut() {
        let record = KeyRecord(
            keyId: Array(repeating: 0, count: 32), appId: "A.b", environment: .production, counter: 0,
            publicKey: [], userId: nil, createdAt: 0, revoked: false, riskMetric: nil, riskMetricAt: nil)
        #expect(
            record.adminJSON
                == #"{"keyId":"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA","appId":"A.b","environment":"production","counter":0,"publicKey":"","createdAt":"1970-01-01T00:00:00Z","revoked":false}"#
        )
    }

    @Test func challengesAre43CanonicalB64urlCharacters() {
        for _ in 0..<100 {
            #expect(ChallengeCodec.isWellFormed(StoreChallenge.generate()))
        }
        #expect(ChallengeCodec.isWellFormed(String(repeating: "A", count: 43)))
        #expect(!ChallengeCodec.isWellFormed(String(repeating: "A", count: 42) + "B"))  // non-canonical tail
        #expect(!ChallengeCodec.isWellFormed(String(repeating: "A", count: 44)))
        #expect(!ChallengeCodec.isWellFormed(String(repeating: "A", count: 42) + "=")
        )
        #expect(!ChallengeCodec.isWellFormed(String(repeating: "+", count: 43)))
    }
}
