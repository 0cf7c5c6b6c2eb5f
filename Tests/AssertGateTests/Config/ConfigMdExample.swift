/// The full example of docs/config.md, verbatim; tests rewrite /etc/assertgate/ to a temp dir.
let configMdExampleYAML = #"""
listeners:
  - address: 0.0.0.0:8443          # host:port, IPv6 as [::]:8443
    tls:                            # omit for cleartext (h2c prior knowledge + HTTP/1.1)
      certificate: /etc/assertgate/tls.crt
      privateKey: /etc/assertgate/tls.key
  - address: 127.0.0.1:8080

admin:
  address: 127.0.0.1:9901           # health, readiness, metrics, key admin
  token: {file: /etc/assertgate/admin.token}   # bearer token for /keys/* and /reload [none: those endpoints off]

apps:                               # who may attest; at least one
  - appId: ABCDE12345.com.example.app    # TEAMID.bundleID
    environments: [production]      # [production]; development accepted only if listed
  - appId: ABCDE12345.com.example.app.Clip

attestation:
  prefix: /assertgate/v1            # challenge + attest routes live here
  challengeTTL: 120s
  challengeRate: {perSecond: 20, burst: 40}   # per TCP peer address
  trustAnchors: []                  # PEM files (each may hold several certificates) that REPLACE the
                                    # Apple App Attestation Root CA; [] = Apple's root only.
  receiptTrustAnchors: []           # likewise for receipts; [] = Apple Root CA - G3 only.
                                    # Non-empty anchors are for testing and are logged loudly at start.
  clockSkew: 60s
  headers:                          # names of the assertion request headers (protocol.md §4)
    keyId: AssertGate-Key-Id
    assertion: AssertGate-Assertion
    challenge: AssertGate-Challenge

store:
  redis:                            # or `memory: {}` for one process only (the embedded default)
    url: redis://127.0.0.1:6379/0   # redis://[user:password@]host:port/db ; rediss:// later
    connectTimeout: 1s
    commandTimeout: 250ms
    connectionsPerWorker: 1

trust:
  headerPrefix: X-AssertGate-       # any client-sent header with this prefix is removed
  signingSecret: {env: ASSERTGATE_TRUST_SECRET}   # [none] HMAC key for X-AssertGate-Signature

upstreams:
  legacy:
    endpoints: [http://127.0.0.1:9001]          # http:// only for now; several = round robin
    connectTimeout: 2s
    responseTimeout: 30s
    idleTimeout: 60s
    maxConnectionsPerEndpoint: 64               # per worker

routes:                             # first match wins
  - match: {prefix: /api/payments, methods: [POST]}   # prefix | exact | (later) regex ; methods [any]
    upstream: legacy
    mode: enforce                   # enforce | monitor | passthrough
    challenge: required             # required | none [none]
    bindBody: true                  # [true]; false signs UNSIGNED-PAYLOAD and streams the body
    maxBodyBytes: 1MiB              # [1MiB] cap on bodies buffered for an assertion (enforce/monitor with bindBody);
                                    # passthrough and bindBody: false stream, capped by limits.maxRequestBodyBytes
    onStoreError: reject            # reject (503) | forward (trust=unavailable) [reject for enforce, forward for monitor;
                                    # an explicit value wins in either mode; passthrough never asks the store]
    maxRiskMetric: 20               # [none] risk metric above this counts as invalid: risk-too-high
    forwardAssertionHeaders: false  # [false] pass the AssertGate-* request headers upstream
  - match: {prefix: /api/}
    upstream: legacy
    mode: monitor
  - match: {prefix: /}
    upstream: legacy
    mode: passthrough

limits:
  maxConcurrentStreams: 100
  maxHeaderListBytes: 64KiB
  maxRequestBodyBytes: 16MiB        # absolute cap for any route
  streamResetRate: {perSecond: 1000, burst: 1000}

fraudMetric:                        # optional: refresh receipts to read Apple's risk metric
  teamId: ABCDE12345
  keyId: XYZ1234567                 # the DeviceCheck key's id
  privateKey: {file: /etc/assertgate/AuthKey_XYZ1234567.p8}
  baseURL: https://data.appattest.apple.com     # data-development.appattest.apple.com for development receipts
  refreshEvery: 24h

logging: {level: info, format: json}            # json | text
"""#
