import Testing
@testable import AssertGateCore

/// The JSON Apple's DeviceCheck calls take.
@Suite struct DeviceCheckRequestBodyTests {
    @Test func queryAndValidateBodies() {
        let body = DeviceCheckRequestBody(
            deviceToken: "wlkCDA2Hy/CfrMqVAShs1BAR/0sA+uRIUm5jQg0a==", transactionId: "5b737ca6-a4c7-488e-b928-8452960c4be9",
            timestampMillis: 1_487_716_472_000)
        #expect(String(decoding: body.json, as: UTF8.self) == #"{"device_token":"wlkCDA2Hy/CfrMqVAShs1BAR/0sA+uRIUm5jQg0a==","transaction_id":"5b737ca6-a4c7-488e-b928-8452960c4be9","timestamp":1487716472000}"#)
    }

    @Test func updateBodiesCarryOnlyTheBitsGivenAsBooleans() {
        var body = DeviceCheckRequestBody(deviceToken: "AA==", transactionId: "t", timestampMillis: 1, bit0: true)
        #expect(String(decoding: body.json, as: UTF8.self) == #"{"device_token":"AA==","transaction_id":"t","timestamp":1,"bit0":true}"#)
        body.bit0 = nil
        body.bit1 = false
        #expect(String(decoding: body.json, as: UTF8.self) == #"{"device_token":"AA==","transaction_id":"t","timestamp":1,"bit1":false}"#)
        body.bit0 = false
        body.bit1 = true
        #expect(String(decoding: body.json, as: UTF8.self).hasSuffix(#""bit0":false,"bit1":true}"#))
    }

    @Test func onlyBase64TokensOfSaneSizeAreSent() {
        #expect(DeviceCheckRequestBody.isSendable("AQID+/=="))
        #expect(!DeviceCheckRequestBody.isSendable(""))
        #expect(!DeviceCheckRequestBody.isSendable("AQ\"ID"))
        #expect(!DeviceCheckRequestBody.isSendable("AQ\nID"))
        #expect(!DeviceCheckRequestBody.isSendable("AQ-_ID"))
        #expect(!DeviceCheckRequestBody.isSendable(String(repeating: "A", count: DeviceCheckRequestBody.maxDeviceTokenLength + 1)))
        #expect(DeviceCheckRequestBody.isSendable(String(repeating: "A", count: DeviceCheckRequestBody.maxDeviceTokenLength)))
    }

    @Test func callPaths() {
        #expect(DeviceCheckCall.validate.path == "/v1/validate_device_token")
        #expect(DeviceCheckCall.query.path == "/v1/query_two_bits")
        #expect(DeviceCheckCall.update.path == "/v1/update_two_bits")
    }
}
