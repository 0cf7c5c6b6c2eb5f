@testable import AssertGateCore
import Foundation
import Testing
import Verifier

@Suite struct ProblemWriterTests {
    @Test func statusesFollowProtocolTable() {
        #expect(ReasonToken.counterReplay.httpStatus == 403)
        #expect(ReasonToken.unknownKey.httpStatus == 401)
        #expect(ReasonToken.storeUnavailable.httpStatus == 503)
        for reason in [ReasonToken.launchCategoryNotAllowed, .appVersionTooOld, .keyPolicyNotAllowed, .tooManyKeys] {
            #expect(reason.httpStatus == 403)
        }
        #expect(ReasonToken.unknownUser.httpStatus == 404)
        #expect(ReasonToken.requestTimeout.httpStatus == 408)
        #expect(ReasonToken.gatewayBusy.httpStatus == 503)
        // Every token has a title and a status in the 4xx/5xx range.
        for reason in ReasonToken.allCases {
            #expect(!reason.title.isEmpty)
            #expect((400...599).contains(reason.httpStatus))
        }
    }

    @Test func answerCarriesBodyHeadersAndStatus() throws {
        let answer = ProblemWriter.answer(
            Rejection(.rateLimited, "too many challenges", retryAfter: 3), requestId: "req-9")
        #expect(answer.status == 429)
        let headers = Dictionary(uniqueKeysWithValues: answer.headers)
        #expect(headers["content-type"] == "application/problem+json")
        #expect(headers["content-length"] == String(answer.body.utf8.count))
        #expect(headers["x-request-id"] == "req-9")
        #expect(headers["retry-after"] == "3")
        #expect(headers["allow"] == nil)
        let json = try #require(
            try JSONSerialization.jsonObject(with: Data(answer.body.utf8)) as? [String: Any])
        #expect(json["type"] as? String == "urn:assertgate:problem:rate-limited")
        #expect(json["reason"] as? String == "rate-limited")
        #expect(json["status"] as? Int == 429)
        #expect(json["requestId"] as? String == "req-9")
        #expect(json["detail"] as? String == "too many challenges")
        #expect(json["title"] as? String == ReasonToken.rateLimited.title)
    }

    @Test func allowAndStatusOverride() throws {
        let notAllowed = ProblemWriter.answer(Rejection(.methodNotAllowed, allow: "GET, HEAD"), requestId: "r")
        #expect(notAllowed.status == 405)
        #expect(notAllowed.headers.contains { $0 == ("allow", "GET, HEAD") })
        #expect(!notAllowed.body.contains("detail"))
        // The admin listener answers an unknown key with 404, and the body says the same status.
        let unknown = ProblemWriter.answer(Rejection(.unknownKey, status: 404), requestId: "r")
        #expect(unknown.status == 404)
        let json = try #require(try JSONSerialization.jsonObject(with: Data(unknown.body.utf8)) as? [String: Any])
        #expect(json["status"] as? Int == 404)
    }

    @Test func detailIsEscapedAsJSON() throws {
        let answer = ProblemWriter.answer(Rejection(.malformedRequest, "a \"quoted\"\nline"), requestId: "r")
        let json = try #require(try JSONSerialization.jsonObject(with: Data(answer.body.utf8)) as? [String: Any])
        #expect(json["detail"] as? String == "a \"quoted\"\nline")
    }

    @Test func grpcClientsAreRecognisedByContentType() {
        for yes in ["application/grpc", "application/grpc+proto", "Application/GRPC;charset=x", "application/grpc+json"] {
            #expect(ProblemWriter.isGRPC(contentType: yes), "\(yes)")
        }
        for no in [nil, "", "application/json", "application/grpc-web", "application/grpcx", "text/application/grpc"] {
            #expect(!ProblemWriter.isGRPC(contentType: no), "\(no ?? "nil")")
        }
    }

    @Test func grpcAnswersAreTrailersOnlyWithTheMappedCode() {
        let cases: [(ReasonToken, Int)] = [
            (.missingAssertion, 16), (.badSignature, 7), (.rateLimited, 8), (.bodyTooLarge, 8), (.malformedHeader, 3),
            (.noRoute, 12), (.methodNotAllowed, 12), (.upstreamUnavailable, 14), (.storeUnavailable, 14),
            (.upstreamTimeout, 4), (.devicecheckUnavailable, 14), (.deviceTokenReused, 7),
        ]
        for (reason, code) in cases {
            let a = ProblemWriter.grpcAnswer(Rejection(reason), requestId: "r")
            let h = Dictionary(uniqueKeysWithValues: a.headers)
            #expect(a.status == 200)
            #expect(a.body.isEmpty)
            #expect(h["grpc-status"] == String(code), "\(reason)")
            #expect(h["assertgate-reason"] == reason.rawValue)
            #expect(h["grpc-message"] == reason.title)
            #expect(h["content-type"] == "application/grpc")
        }
        #expect(ProblemWriter.percentEncodedMessage("50% off\ncaf\u{E9}") == "50%25 off%0Acaf%C3%A9")
    }
}
