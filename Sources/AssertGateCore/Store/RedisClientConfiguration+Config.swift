import AssertGateRedis
import GatewayTLS

extension RedisClientConfiguration {
    /// Throws `ValueParseError` for a bad URL, `TLSConfigurationError` when
    /// the TLS files of a `rediss://` store cannot be loaded.
    public init(_ config: RedisConfig) throws {
        let seeds = try config.cluster.map { text throws(ValueParseError) in try RedisURL(parsing: text) }
        self.init(
            url: try seeds.first ?? RedisURL(parsing: config.url), connectTimeout: config.connectTimeout,
            commandTimeout: config.commandTimeout, connections: config.connectionsPerWorker)
        self.clusterSeeds = seeds.map { RedisNodeAddress(host: $0.host, port: $0.port) }
        // Every node of a cluster is reached with the first seed's credentials.
        if let password = config.password { url.password = password.value }
        if url.tls {
            let files = config.tls ?? ClientTLSConfig()
            self.tls = try TLSClientContext(
                caFile: files.caFile, certificatePath: files.certificate, privateKeyPath: files.privateKey)
            self.tlsServerName = files.serverName
        }
    }
}
