import NIOCore

/// `deviceCheck:` (devicecheck.md): Apple's DeviceCheck API, called with the
/// team's DeviceCheck key. `teamId`, `keyId` and `privateKey` default to
/// `fraudMetric`'s (one Apple key serves both).
public struct DeviceCheckConfig: Sendable {
    public static let productionURL = "https://api.devicecheck.apple.com"
    public static let developmentURL = "https://api.development.devicecheck.apple.com"
    /// A request waits on DeviceCheck: longer than this is never right.
    public static let maxTimeout = TimeAmount.seconds(30)

    public var teamId: String
    public var keyId: String
    public var privateKey: Secret
    public var baseURL: String = productionURL
    public var developmentBaseURL: String = developmentURL
    /// The host for a request whose key's environment is not known.
    public var environment: AppEnvironment = .production
    /// Per call, connection and answer included.
    public var timeout: TimeAmount = .seconds(2)
    /// How long a queued bit update is retried before it is dropped.
    public var updateRetryFor: TimeAmount = .hours(1)
    /// How often the delivery worker looks at the queue.
    public var updatePollEvery: TimeAmount = .milliseconds(250)
    /// The most updates one look claims and delivers at once (in flight to Apple together).
    public var updateBatch = 32
    public static let updatePollRange = TimeAmount.milliseconds(10)...TimeAmount.seconds(60)
    public static let updateBatchRange = 1...1000
    /// The most bit updates the queue holds (every gateway on the store
    /// together); past it an upstream's update is dropped and counted. Each
    /// holds a device token (a few KiB), so a long Apple outage with a busy
    /// app would otherwise grow the store without bound.
    public var maxQueuedUpdates = 20_000
    public static let maxQueuedUpdatesRange = 1...10_000_000
    /// PEM CA certificates for Apple's server; nil = the system trust store.
    public var caFile: String?

    public init(teamId: String, keyId: String, privateKey: Secret) {
        self.teamId = teamId
        self.keyId = keyId
        self.privateKey = privateKey
    }
}
