import GatewayTLS

extension TLSServerContext {
    /// Builds the context for a `listeners[].tls` entry of the config file.
    public convenience init(config: TLSConfig, alpn: [String] = ALPN.defaultProtocols) throws(TLSConfigurationError) {
        try self.init(certificatePath: config.certificate, privateKeyPath: config.privateKey, alpn: alpn)
    }
}
