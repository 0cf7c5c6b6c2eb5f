import Testing
@testable import AssertGateCore

@Suite struct ConfigTypesTests {
    @Test func onStoreErrorDefaultsFollowMode() {
        let m = RouteMatch(kind: .prefix("/"))
        #expect(RouteConfig(match: m, upstream: "a", mode: .enforce).onStoreError == .reject)
        #expect(RouteConfig(match: m, upstream: "a", mode: .monitor).onStoreError == .forward)
    }
}
