import Testing
import Verifier

@Suite struct ReasonTokenTests {
    @Test func tokensAreUniqueAndMapToProtocolStatuses() {
        let raw = ReasonToken.allCases.map(\.rawValue)
        #expect(Set(raw).count == raw.count)
        #expect(ReasonToken.counterReplay.httpStatus == 403)
        #expect(ReasonToken.unknownKey.httpStatus == 401)
        #expect(ReasonToken.storeUnavailable.httpStatus == 503)
        // risk.md §5.
        for reason in [ReasonToken.launchCategoryNotAllowed, .appVersionTooOld, .keyPolicyNotAllowed, .tooManyKeys] {
            #expect(reason.httpStatus == 403)
        }
        #expect(ReasonToken.unknownUser.httpStatus == 404)
    }
}
