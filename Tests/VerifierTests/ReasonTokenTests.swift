import Testing
import Verifier

@Suite struct ReasonTokenTests {
    @Test func tokensAreUnique() {
        let raw = ReasonToken.allCases.map(\.rawValue)
        #expect(Set(raw).count == raw.count)
        #expect(raw.allSatisfy { !$0.isEmpty && $0 == $0.lowercased() })
    }
}
