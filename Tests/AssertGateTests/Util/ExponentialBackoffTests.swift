import NIOCore
import Testing

@testable import AssertGateCore

@Suite struct ExponentialBackoffTests {
    @Test func doublesFromTheFirstWaitAndStopsAtTheLongest() {
        let waits = (1...8).map {
            ExponentialBackoff.delay(first: .milliseconds(250), longest: .seconds(30), failures: $0).nanoseconds / 1_000_000
        }
        #expect(waits == [250, 500, 1000, 2000, 4000, 8000, 16000, 30000])
        #expect(ExponentialBackoff.delay(first: .milliseconds(500), longest: .minutes(5), failures: 0) == .milliseconds(500))
        #expect(ExponentialBackoff.delay(first: .milliseconds(500), longest: .minutes(5), failures: 10_000) == .minutes(5))
    }
}
