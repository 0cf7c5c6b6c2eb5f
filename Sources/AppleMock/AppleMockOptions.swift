import Foundation
import DeviceSim
import Verifier

/// How an `AppleMockServer` is set up.
public struct AppleMockOptions: Sendable {
    /// Receipt refresh (`/v1/attestationData`): the CA that signs refreshed
    /// receipts and the anchors that old receipts must chain to.
    public struct Receipts: Sendable {
        public var signer: ReceiptCA
        public var anchors: TrustAnchors
        public var defaultRiskMetric: Int

        public init(signer: ReceiptCA, anchors: TrustAnchors, defaultRiskMetric: Int = 3) {
            self.signer = signer
            self.anchors = anchors
            self.defaultRiskMetric = defaultRiskMetric
        }
    }

    public var host = "127.0.0.1"
    /// 0: any free port (`AppleMockServer.port` tells which).
    public var port = 0
    public var certificatePath: String
    public var privateKeyPath: String
    /// PEM public key of the DeviceCheck key; nil: JWTs are not checked.
    public var jwtPublicKeyPEM: String?
    /// The MAC key of device tokens (`MockDeviceToken`).
    public var deviceSecret: [UInt8] = MockDeviceToken.defaultSecret
    /// nil: `/v1/attestationData` answers 404.
    public var receipts: Receipts?
    /// false: every answer says `Connection: close`.
    public var keepAlive = true
    /// true: a connection's second request is met with a close and no answer,
    /// as when a server's idle timeout closed it just before the request.
    public var dropIdle = false
    /// `/mock/...` control requests are served (for the CLI).
    public var controlEndpoint = false
    /// Seconds since the epoch (JWT ages, `last_update_time`).
    public var clock: @Sendable () -> Int64 = { Int64(Date().timeIntervalSince1970) }

    public init(certificatePath: String, privateKeyPath: String) {
        self.certificatePath = certificatePath
        self.privateKeyPath = privateKeyPath
    }
}
