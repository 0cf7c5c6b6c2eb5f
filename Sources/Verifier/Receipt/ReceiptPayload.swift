import SwiftASN1

/// Parses the receipt payload: a SET of
/// `SEQUENCE { type INTEGER, version INTEGER, value OCTET STRING }`.
enum ReceiptPayload {
    static let maxFields = 64

    /// Returns the receipt or a description of what is wrong.
    static func parse(_ content: [UInt8]) -> Result<Receipt, ReceiptError> {
        var fields: [Int: [UInt8]] = [:]
        do {
            let root = try DER.parse(content)
            guard root.identifier == .set, case .constructed(let children) = root.content else {
                return .failure(ReceiptError("payload is not a SET"))
            }
            var count = 0
            for child in children {
                count += 1
                guard count <= maxFields else { return .failure(ReceiptError("too many payload fields")) }
                guard child.identifier == .sequence, case .constructed(let parts) = child.content else {
                    return .failure(ReceiptError("payload field is not a SEQUENCE"))
                }
                var iterator = parts.makeIterator()
                guard let typeNode = iterator.next(), let versionNode = iterator.next(),
                    let valueNode = iterator.next(), iterator.next() == nil
                else { return .failure(ReceiptError("payload field does not have three elements")) }
                let type = try Int(derEncoded: typeNode)
                _ = try Int(derEncoded: versionNode)
                let value = try ASN1OctetString(derEncoded: valueNode)
                if fields.updateValue(Array(value.bytes), forKey: type) != nil, knownTypes.contains(type) {
                    return .failure(ReceiptError("payload field \(type) appears twice"))
                }
            }
        } catch {
            return .failure(ReceiptError("payload is not valid DER"))
        }
        return build(fields)
    }

    static let knownTypes: Set<Int> = [2, 3, 4, 5, 6, 7, 12, 17, 19, 21]

    private static func build(_ fields: [Int: [UInt8]]) -> Result<Receipt, ReceiptError> {
        func text(_ type: Int) -> String? {
            fields[type].flatMap { String(validating: $0, as: UTF8.self) }
        }
        func time(_ type: Int, _ name: String) -> Result<RFC3339Time?, ReceiptError> {
            guard let raw = fields[type] else { return .success(nil) }
            guard let string = String(validating: raw, as: UTF8.self), let parsed = RFC3339Time(string) else {
                return .failure(ReceiptError("\(name) is not an RFC 3339 time"))
            }
            return .success(parsed)
        }
        guard let appId = text(2), !appId.isEmpty else { return .failure(ReceiptError("no App ID")) }
        guard let certificate = fields[3], let cert = X509Certificate(der: certificate) else {
            return .failure(ReceiptError("no parsable attested certificate"))
        }
        guard let point = cert.p256PublicKeyPoint else {
            return .failure(ReceiptError("attested certificate key is not P-256"))
        }
        guard let kindText = text(6), let kind = Receipt.Kind(rawValue: kindText) else {
            return .failure(ReceiptError("missing or unknown receipt type"))
        }
        let creation: RFC3339Time
        switch time(12, "creation time") {
        case .failure(let e): return .failure(e)
        case .success(let value):
            guard let value else { return .failure(ReceiptError("no creation time")) }
            creation = value
        }
        var risk: Int?
        if let raw = fields[17] {
            guard let string = String(validating: raw, as: UTF8.self), string.utf8.count <= 9,
                let value = Int(string), value >= 0
            else { return .failure(ReceiptError("risk metric is not a number")) }
            risk = value
        }
        let notBefore: RFC3339Time?
        let expiration: RFC3339Time?
        switch time(19, "not-before time") {
        case .failure(let e): return .failure(e)
        case .success(let value): notBefore = value
        }
        switch time(21, "expiration time") {
        case .failure(let e): return .failure(e)
        case .success(let value): expiration = value
        }
        return .success(
            Receipt(
                appId: appId, attestedCertificate: certificate, attestedPublicKey: point,
                clientHash: fields[4], token: text(5), kind: kind, environment: text(7),
                creationTime: creation, riskMetric: risk, notBefore: notBefore, expirationTime: expiration))
    }
}

struct ReceiptError: Error {
    let message: String
    init(_ message: String) { self.message = message }
}
