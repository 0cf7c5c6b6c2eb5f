// Splits attestation and assertion objects by hand (app-attest.md §1 offsets).

struct ParsedAttestation {
    var fmt: String?
    var x5c: [[UInt8]]
    var receipt: [UInt8]?
    var authData: [UInt8]
    var rpIdHash: [UInt8]
    var flags: UInt8
    var counter: UInt32
    var aaguid: [UInt8]
    var credentialId: [UInt8]
    var coseKey: TestCBOR
    var extensions: TestCBOR?

    init(_ object: [UInt8], strict: Bool = true) throws {
        let top = try TestCBORReader.decode(object, strict: strict)
        fmt = top["fmt"]?.textValue
        let attStmt = try require(top["attStmt"])
        x5c = try require(attStmt["x5c"]?.arrayValue).map { try require($0.bytesValue) }
        receipt = attStmt["receipt"]?.bytesValue
        authData = try require(top["authData"]?.bytesValue)
        guard authData.count >= 55 else { throw ParseError.short }
        rpIdHash = Array(authData[0..<32])
        flags = authData[32]
        counter = authData[33..<37].reduce(0) { $0 << 8 | UInt32($1) }
        aaguid = Array(authData[37..<53])
        let length = Int(authData[53]) << 8 | Int(authData[54])
        guard authData.count >= 55 + length else { throw ParseError.short }
        credentialId = Array(authData[55..<(55 + length)])
        var reader = TestCBORReader(Array(authData[(55 + length)...]))
        coseKey = try reader.read()
        extensions = reader.position < reader.bytes.count ? try reader.read() : nil
        guard reader.position == reader.bytes.count else { throw ParseError.trailing }
    }
}

struct ParsedAssertion {
    var signature: [UInt8]
    var authenticatorData: [UInt8]
    var rpIdHash: [UInt8]
    var flags: UInt8
    var counter: UInt32
    var extensions: TestCBOR?

    init(_ object: [UInt8]) throws {
        let top = try TestCBORReader.decode(object)
        guard top.mapEntries?.count == 2 else { throw ParseError.shape }
        signature = try require(top["signature"]?.bytesValue)
        authenticatorData = try require(top["authenticatorData"]?.bytesValue)
        guard authenticatorData.count >= 37 else { throw ParseError.short }
        rpIdHash = Array(authenticatorData[0..<32])
        flags = authenticatorData[32]
        counter = authenticatorData[33..<37].reduce(0) { $0 << 8 | UInt32($1) }
        extensions = authenticatorData.count > 37 ? try TestCBORReader.decode(Array(authenticatorData[37...])) : nil
    }
}

enum ParseError: Error { case missing, short, trailing, shape }

func require<T>(_ value: T?) throws -> T {
    guard let value else { throw ParseError.missing }
    return value
}

/// A tiny DER TLV reader (definite lengths only) for receipt payloads and extensions.
struct TestDER {
    var tag: UInt8
    var content: [UInt8]

    /// Reads consecutive TLVs covering all of `bytes`.
    static func sequence(_ bytes: [UInt8]) throws -> [TestDER] {
        var items: [TestDER] = []
        var i = 0
        while i < bytes.count {
            guard i + 2 <= bytes.count else { throw ParseError.short }
            let tag = bytes[i]
            var length = Int(bytes[i + 1])
            var header = 2
            if length & 0x80 != 0 {
                let count = length & 0x7f
                guard count > 0, count <= 3, i + 2 + count <= bytes.count else { throw ParseError.shape }
                length = bytes[(i + 2)..<(i + 2 + count)].reduce(0) { $0 << 8 | Int($1) }
                header += count
            }
            guard i + header + length <= bytes.count else { throw ParseError.short }
            items.append(TestDER(tag: tag, content: Array(bytes[(i + header)..<(i + header + length)])))
            i += header + length
        }
        return items
    }

    static func single(_ bytes: [UInt8]) throws -> TestDER {
        let items = try sequence(bytes)
        guard items.count == 1 else { throw ParseError.shape }
        return items[0]
    }
}
