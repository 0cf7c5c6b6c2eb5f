import Testing
@testable import AssertGateCore

/// Every kind of answer Apple's DeviceCheck API gives, read as
/// devicecheck.md says.
@Suite struct DeviceCheckAnswerTests {
    private func result(_ call: DeviceCheckCall, _ status: Int, _ body: String) -> DeviceCheckResult {
        DeviceCheckAnswer.result(of: call, status: status, body: Array(body.utf8))
    }

    @Test func twoHundredIsValidOrUpdatedWhateverTheBody() {
        #expect(result(.validate, 200, "") == .valid)
        #expect(result(.validate, 200, "anything") == .valid)
        #expect(result(.update, 200, "") == .updated)
    }

    @Test func aQueryAnswersTheBitsObject() {
        let bits = result(.query, 200, #"{"bit0":true,"bit1":false,"last_update_time":"2026-11"}"#)
        #expect(bits == .bits(DeviceCheckBits(bit0: true, bit1: false, lastUpdate: "2026-11")))
        let spaced = result(.query, 200, "\n {\"bit1\" : true, \"bit0\" : false, \"last_update_time\" : \"2017-01\"} ")
        #expect(spaced == .bits(DeviceCheckBits(bit0: false, bit1: true, lastUpdate: "2017-01")))
        // The month is kept only in Apple's form.
        for odd in [#""2026-13""#, #""2026-1""#, #""26-11""#, "202611", "null"] {
            let body = #"{"bit0":true,"bit1":true,"last_update_time":\#(odd)}"#
            #expect(result(.query, 200, body) == .bits(DeviceCheckBits(bit0: true, bit1: true, lastUpdate: nil)), "\(odd)")
        }
    }

    @Test func aQueryTwoHundredThatIsNotTheBitsObjectIsUnset() {
        for body in [
            "Failed to find bit state", "Bit State Not Found", "", "{}", #"{"bit0":true}"#, #"{"bit0":1,"bit1":0}"#,
            #"["bit0"]"#, #"{"bit0":"true","bit1":"false"}"#, "{", "null",
        ] {
            #expect(result(.query, 200, body) == .unset, "\(body)")
        }
    }

    @Test func fourHundredsAreTheTokenTheJWTOrTheRequest() {
        #expect(result(.query, 400, "Missing or incorrectly formatted device token payload")
            == .invalidToken("Missing or incorrectly formatted device token payload"))
        #expect(result(.validate, 400, "Bad Device Token") == .invalidToken("Bad Device Token"))
        #expect(result(.update, 400, "Missing or badly formatted authorization token")
            == .unauthorized(status: 400, reason: "Missing or badly formatted authorization token"))
        #expect(result(.update, 400, "Bad Bits") == .badRequest("Bad Bits"))
        #expect(result(.query, 401, "Unable to verify authorization token")
            == .unauthorized(status: 401, reason: "Unable to verify authorization token"))
        #expect(result(.query, 403, "") == .unauthorized(status: 403, reason: ""))
    }

    @Test func throttledAndServerErrors() {
        #expect(result(.query, 429, "Too many requests") == .throttled)
        #expect(result(.validate, 500, "Internal Server Error") == .failed("Apple answered 500: Internal Server Error"))
        #expect(result(.update, 503, "") == .failed("Apple answered 503"))
        #expect(result(.query, 302, "") == .failed("Apple answered 302"))
    }

    @Test func reasonsAreCutAndPrintable() {
        let long = String(repeating: "x", count: 5000)
        guard case .badRequest(let text) = result(.query, 400, long) else {
            Issue.record("not badRequest")
            return
        }
        #expect(text.count == DeviceCheckAnswer.maxReasonLength)
        #expect(DeviceCheckAnswer.reason(Array("a\u{1B}[31mb\r\nc".utf8)) == "a [31mb  c")
    }

    @Test func metricLabels() {
        #expect(DeviceCheckResult.bits(DeviceCheckBits(bit0: true, bit1: true)).metricLabel == "ok")
        #expect(DeviceCheckResult.unset.metricLabel == "unset")
        #expect(DeviceCheckResult.invalidToken("").metricLabel == "invalid-token")
        #expect(DeviceCheckResult.throttled.metricLabel == "throttled")
        #expect(DeviceCheckResult.unauthorized(status: 401, reason: "").metricLabel == "unauthorized")
    }
}
