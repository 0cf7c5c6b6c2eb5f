import Foundation
import NIOCore

/// Apple's DeviceCheck API (`validate_device_token`, `query_two_bits`,
/// `update_two_bits`) on the shared Apple transport (`AppleHTTPSClient`, kept
/// connections) with the shared ES256 token (`DeviceCheckToken`). Each call
/// names its environment (production or development host) and may name its
/// own timeout. The futures never fail: every outcome is a
/// `DeviceCheckResult`. Never logs: tokens stay out of logs, and the caller
/// decides what a result is worth saying.
final class DeviceCheckClient: Sendable {
    /// Apple's answers are short: a bits object or a line of text.
    static let maxAnswerBytes = 8 * 1024

    enum SetupError: Error, CustomStringConvertible {
        case key(DeviceCheckToken.KeyError)
        case tls(String)
        case baseURL(key: String, value: String)

        var description: String {
            switch self {
            case .key(let e): return "deviceCheck.privateKey: \(e)"
            case .tls(let why): return "deviceCheck.caFile: \(why)"
            case .baseURL(let key, let value): return "deviceCheck.\(key): '\(value)' is not https://host[:port]"
            }
        }
    }

    let production: AppleHTTPSClient
    let development: AppleHTTPSClient
    private let token: DeviceCheckToken
    let timeout: TimeAmount
    private let clockMillis: @Sendable () -> Int64

    init(
        production: AppleHTTPSClient, development: AppleHTTPSClient, token: DeviceCheckToken, timeout: TimeAmount,
        clockMillis: @escaping @Sendable () -> Int64 = { Int64(Date().timeIntervalSince1970 * 1000) }
    ) {
        self.production = production
        self.development = development
        self.token = token
        self.timeout = timeout
        self.clockMillis = clockMillis
    }

    /// From the `deviceCheck:` section, as `serve` builds it.
    convenience init(config: DeviceCheckConfig) throws(SetupError) {
        let token: DeviceCheckToken
        do {
            token = try DeviceCheckToken(pem: config.privateKey.value, teamId: config.teamId, keyId: config.keyId)
        } catch {
            throw .key(error)
        }
        let tls: TLSClientContext
        do {
            tls = try TLSClientContext(caFile: config.caFile, certificatePath: nil, privateKeyPath: nil)
        } catch {
            throw .tls("\(error)")
        }
        func client(_ url: String, _ key: String) throws(SetupError) -> AppleHTTPSClient {
            guard let c = AppleHTTPSClient(baseURL: url, tls: tls, timeout: config.timeout, maxBody: Self.maxAnswerBytes)
            else { throw .baseURL(key: key, value: url) }
            return c
        }
        self.init(
            production: try client(config.baseURL, "baseURL"),
            development: try client(config.developmentBaseURL, "developmentBaseURL"), token: token,
            timeout: config.timeout)
    }

    func validate(
        deviceToken: String, environment: AppEnvironment, timeout: TimeAmount? = nil, on loop: EventLoop
    ) -> EventLoopFuture<DeviceCheckResult> {
        call(.validate, deviceToken: deviceToken, bit0: nil, bit1: nil, environment, timeout, loop)
    }

    func query(
        deviceToken: String, environment: AppEnvironment, timeout: TimeAmount? = nil, on loop: EventLoop
    ) -> EventLoopFuture<DeviceCheckResult> {
        call(.query, deviceToken: deviceToken, bit0: nil, bit1: nil, environment, timeout, loop)
    }

    /// Sets the bits given; a nil bit is left as Apple has it.
    func update(
        deviceToken: String, bit0: Bool?, bit1: Bool?, environment: AppEnvironment, timeout: TimeAmount? = nil,
        on loop: EventLoop
    ) -> EventLoopFuture<DeviceCheckResult> {
        call(.update, deviceToken: deviceToken, bit0: bit0, bit1: bit1, environment, timeout, loop)
    }

    /// Closes the kept connections of both hosts.
    func closeIdle() {
        production.closeIdle()
        development.closeIdle()
    }

    private func call(
        _ call: DeviceCheckCall, deviceToken: String, bit0: Bool?, bit1: Bool?, _ environment: AppEnvironment,
        _ timeout: TimeAmount?, _ loop: EventLoop
    ) -> EventLoopFuture<DeviceCheckResult> {
        guard DeviceCheckRequestBody.isSendable(deviceToken) else {
            return loop.makeSucceededFuture(.invalidToken("not a base64 device token"))
        }
        let now = clockMillis()
        guard let jwt = token.token(now: now / 1000) else {
            return loop.makeSucceededFuture(.failed("cannot sign the DeviceCheck token"))
        }
        let body = DeviceCheckRequestBody(
            deviceToken: deviceToken, transactionId: UUID().uuidString, timestampMillis: now, bit0: bit0, bit1: bit1)
        let client = environment == .production ? production : development
        let token = self.token
        return client.post(
            path: call.path, authorization: "Bearer " + jwt, contentType: "application/json", body: body.json,
            timeout: timeout ?? self.timeout, on: loop
        )
        .hop(to: loop)
        .map { response in
            let result = DeviceCheckAnswer.result(of: call, status: response.status, body: response.body)
            // A refused JWT is signed afresh next time (a key rotated under us).
            if case .unauthorized = result { token.invalidate() }
            return result
        }
        .recover { error in .failed("\(client.host): \(error)") }
    }
}
