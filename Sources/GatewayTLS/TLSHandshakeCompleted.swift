/// Inbound user event fired by `OpenSSLHandler` once the TLS handshake
/// is done, before any decrypted byte is delivered. A protocol detector
/// downstream uses `negotiatedALPN` to choose HTTP/2 (`"h2"`) or HTTP/1.1;
/// `nil` means the client offered no protocol we support (or no ALPN at all)
/// and the detector should sniff the connection preface.
public struct TLSHandshakeCompleted: Hashable, Sendable {
    public let negotiatedALPN: String?

    public init(negotiatedALPN: String?) {
        self.negotiatedALPN = negotiatedALPN
    }
}
