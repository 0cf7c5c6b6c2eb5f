/// The signed content of an App Attest receipt: a SET OF
/// `SEQUENCE { type INTEGER, version INTEGER, value OCTET STRING }`, written
/// in ascending type order as Apple's receipts are.
public struct ReceiptPayload: Sendable, Equatable {
    public enum Kind: String, Sendable { case attest = "ATTEST", receipt = "RECEIPT" }
    public enum Environment: String, Sendable { case sandbox, production }

    /// Field 2.
    public var appId: String
    /// Field 3: the credCert DER.
    public var attestedPublicKey: [UInt8]
    /// Field 4.
    public var clientHash: [UInt8]
    /// Field 5.
    public var token: String
    /// Field 6.
    public var kind: Kind
    /// Field 7.
    public var environment: Environment
    /// Field 12, unix milliseconds (written as RFC 3339 with milliseconds).
    public var createdAtMillis: Int64
    /// Field 17, RECEIPT receipts only (written as ASCII decimal).
    public var riskMetric: Int?
    /// Field 19, unix milliseconds.
    public var notBeforeMillis: Int64?
    /// Field 21, unix milliseconds.
    public var expiresAtMillis: Int64

    public init(
        appId: String, attestedPublicKey: [UInt8], clientHash: [UInt8], token: String, kind: Kind,
        environment: Environment, createdAtMillis: Int64, riskMetric: Int? = nil,
        notBeforeMillis: Int64? = nil, expiresAtMillis: Int64
    ) {
        self.appId = appId
        self.attestedPublicKey = attestedPublicKey
        self.clientHash = clientHash
        self.token = token
        self.kind = kind
        self.environment = environment
        self.createdAtMillis = createdAtMillis
        self.riskMetric = riskMetric
        self.notBeforeMillis = notBeforeMillis
        self.expiresAtMillis = expiresAtMillis
    }

    /// (type, value) in the order they are written.
    public var fields: [(type: Int, value: [UInt8])] {
        var fields: [(Int, [UInt8])] = [
            (2, Array(appId.utf8)),
            (3, attestedPublicKey),
            (4, clientHash),
            (5, Array(token.utf8)),
            (6, Array(kind.rawValue.utf8)),
            (7, Array(environment.rawValue.utf8)),
            (12, Array(RFC3339.string(fromUnixMillis: createdAtMillis).utf8)),
        ]
        if let riskMetric { fields.append((17, Array(String(riskMetric).utf8))) }
        if let notBeforeMillis { fields.append((19, Array(RFC3339.string(fromUnixMillis: notBeforeMillis).utf8))) }
        fields.append((21, Array(RFC3339.string(fromUnixMillis: expiresAtMillis).utf8)))
        return fields
    }

    /// DER of the payload.
    public func der() throws -> [UInt8] {
        var content: [UInt8] = []
        for field in fields {
            content += try DERBuilder.sequence(
                DERBuilder.integer(Int64(field.type)) + DERBuilder.integer(1) + DERBuilder.octetString(field.value))
        }
        return try DERBuilder.set(content)
    }
}
