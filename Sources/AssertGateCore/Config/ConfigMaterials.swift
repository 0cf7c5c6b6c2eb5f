/// What only loading the referenced files can tell: that TLS certificates and
/// keys, trust anchors, CA files and the DeviceCheck key really load and
/// belong together. `check-config` reports these before a deploy; `serve`
/// stops at start on the same errors.
public enum ConfigMaterials {
    public static func problems(_ config: GatewayConfig) -> [String] {
        var out: [String] = []
        for (i, listener) in config.listeners.enumerated() {
            guard let tls = listener.tls else { continue }
            do { _ = try TLSServerContext(config: tls) } catch { out.append("listeners[\(i)].tls: \(error)") }
        }
        if case .redis(let redis) = config.store {
            do { _ = try RedisClientConfiguration(redis) } catch { out.append("store.redis: \(error)") }
        }
        do { _ = try GatewaySnapshot.build(config: config) } catch { out += error.failures.map { "\($0)" } }
        if let fraud = config.fraudMetric {
            do {
                _ = try TLSClientContext(caFile: fraud.caFile, certificatePath: nil, privateKeyPath: nil)
            } catch {
                out.append("fraudMetric: \(error)")
            }
            do {
                _ = try DeviceCheckToken(pem: fraud.privateKey.value, teamId: fraud.teamId, keyId: fraud.keyId)
            } catch {
                out.append("fraudMetric.privateKey: \(error)")
            }
        }
        if let device = config.deviceCheck {
            do {
                _ = try DeviceCheckClient(config: device)
            } catch {
                out.append("\(error)")
            }
        }
        return out
    }
}
