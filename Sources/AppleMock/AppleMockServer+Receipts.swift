import DeviceSim
import Foundation
import Verifier

extension AppleMockServer {
    /// What Apple's App Attest data endpoint does: read the old receipt (base64
    /// body), answer a new one for the same App ID and key.
    func refreshReceipt(_ body: [UInt8], _ answer: AppleMockAnswer) -> AppleMockResponse {
        guard let receipts = options.receipts else { return .text(404, "Not Found") }
        var risk = receipts.defaultRiskMetric
        var notBefore: Int64?
        var signer = receipts.signer
        switch answer {
        case .receipt(let r, let n):
            risk = r
            notBefore = n
        case .untrustedReceipt:
            guard let untrusted else { return .text(500, "") }
            signer = untrusted
            risk = 1
        default:
            break
        }
        guard let text = String(validating: body, as: UTF8.self), let old = try? Base64.decode(text),
            let receipt = try? ReceiptVerifier.verify(receipt: old, anchors: receipts.anchors)
        else { return .text(400, "") }
        let now = options.clock() * 1000
        let payload = ReceiptPayload(
            appId: receipt.appId, attestedPublicKey: receipt.attestedCertificate, clientHash: [0x01],
            token: "refreshed", kind: .receipt, environment: .sandbox, createdAtMillis: now, riskMetric: risk,
            notBeforeMillis: notBefore.map { now + $0 * 1000 }, expiresAtMillis: now + 30 * 86_400_000)
        guard let signed = try? signer.sign(payload) else { return .text(500, "") }
        return .answer(status: 200, body: Array(Base64.encode(signed).utf8), contentType: "application/octet-stream")
    }
}
