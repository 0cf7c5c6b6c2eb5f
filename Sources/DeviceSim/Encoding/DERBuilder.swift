import COpenSSL

/// DER building through OpenSSL's ASN.1 primitives (ASN1_put_object and the
/// i2d_ functions): DeviceSim deliberately shares no encoder with the Verifier.
enum DERBuilder {
    /// Tag header + `content`. `xclass` is V_ASN1_UNIVERSAL or V_ASN1_CONTEXT_SPECIFIC.
    static func wrap(tag: Int32, xclass: Int32 = V_ASN1_UNIVERSAL, constructed: Bool, _ content: [UInt8]) throws -> [UInt8] {
        let length = Int32(content.count)
        let total = ASN1_object_size(constructed ? 1 : 0, length, tag)
        guard total > length else { throw DeviceSimError.openSSL("ASN1_object_size") }
        var out = [UInt8](repeating: 0, count: Int(total - length))
        out.withUnsafeMutableBufferPointer { buffer in
            var cursor = buffer.baseAddress
            ASN1_put_object(&cursor, constructed ? 1 : 0, length, tag, xclass)
        }
        return out + content
    }

    static func sequence(_ content: [UInt8]) throws -> [UInt8] {
        try wrap(tag: V_ASN1_SEQUENCE, constructed: true, content)
    }

    static func set(_ content: [UInt8]) throws -> [UInt8] {
        try wrap(tag: V_ASN1_SET, constructed: true, content)
    }

    /// `[tag] EXPLICIT` around an already encoded element.
    static func explicit(_ tag: Int32, _ element: [UInt8]) throws -> [UInt8] {
        try wrap(tag: tag, xclass: V_ASN1_CONTEXT_SPECIFIC, constructed: true, element)
    }

    static func octetString(_ bytes: [UInt8]) throws -> [UInt8] {
        guard let octets = ASN1_OCTET_STRING_new() else { throw DeviceSimError.openSSL("ASN1_OCTET_STRING_new") }
        defer { ASN1_OCTET_STRING_free(octets) }
        let ok = bytes.withUnsafeBufferPointer { ASN1_OCTET_STRING_set(octets, $0.baseAddress, Int32($0.count)) }
        guard ok == 1 else { throw DeviceSimError.openSSL("ASN1_OCTET_STRING_set") }
        return try encode("i2d_ASN1_OCTET_STRING") { i2d_ASN1_OCTET_STRING(octets, $0) }
    }

    static func integer(_ value: Int64) throws -> [UInt8] {
        guard let integer = ASN1_INTEGER_new() else { throw DeviceSimError.openSSL("ASN1_INTEGER_new") }
        defer { ASN1_INTEGER_free(integer) }
        guard ASN1_INTEGER_set_int64(integer, value) == 1 else { throw DeviceSimError.openSSL("ASN1_INTEGER_set_int64") }
        return try encode("i2d_ASN1_INTEGER") { i2d_ASN1_INTEGER(integer, $0) }
    }

    /// Runs an i2d_ function that allocates its output, copies and frees it.
    private static func encode(
        _ name: String, _ i2d: (UnsafeMutablePointer<UnsafeMutablePointer<UInt8>?>) -> Int32
    ) throws -> [UInt8] {
        var out: UnsafeMutablePointer<UInt8>?
        let length = i2d(&out)
        guard length > 0, let out else { throw DeviceSimError.openSSL(name) }
        defer { CAssertGate_OPENSSL_free(out) }
        return Array(UnsafeBufferPointer(start: out, count: Int(length)))
    }
}
