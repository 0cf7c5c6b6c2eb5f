import Testing
@testable import AssertGateCore

/// What only loading the files tells (check-config), and the inline-key warning.
@Suite struct DeviceCheckMaterialsTests {
    private func config(privateKey: Secret, fraudKey: Secret? = nil) -> GatewayConfig {
        var c = GatewayConfig(listeners: [], apps: [], upstreams: [:], routes: [])
        c.deviceCheck = DeviceCheckConfig(teamId: "ABCDE12345", keyId: "XYZ1234567", privateKey: privateKey)
        c.fraudMetric = fraudKey.map { FraudMetricConfig(teamId: "ABCDE12345", keyId: "XYZ1234567", privateKey: $0) }
        return c
    }

    @Test func aKeyThatDoesNotLoadIsReportedUnderDeviceCheck() throws {
        let problems = ConfigMaterials.problems(config(privateKey: Secret(source: .file("k.p8"), value: "not a key")))
        #expect(problems.contains { $0.hasPrefix("deviceCheck.privateKey: not a PEM private key") }, "\(problems)")
        let good = ConfigMaterials.problems(config(privateKey: Secret(source: .file("k.p8"), value: try TestKeys.ecPrivateKeyPEM())))
        #expect(!good.contains { $0.hasPrefix("deviceCheck") }, "\(good)")
    }

    @Test func anInlineKeyIsWarnedAboutOnce() throws {
        let pem = try TestKeys.ecPrivateKeyPEM()
        let own = config(privateKey: Secret(source: .inline, value: pem)).warnings
        #expect(own.contains("deviceCheck.privateKey is inline in the config file; prefer {file: PATH}"))
        // Inherited from an inline fraudMetric key: fraudMetric's warning says it.
        let inherited = config(privateKey: Secret(source: .inline, value: pem), fraudKey: Secret(source: .inline, value: pem))
            .warnings
        #expect(!inherited.contains { $0.hasPrefix("deviceCheck.privateKey") })
        #expect(inherited.contains { $0.hasPrefix("fraudMetric.privateKey is inline") })
    }
}
