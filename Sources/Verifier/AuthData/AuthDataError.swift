/// Why authenticator data did not parse.
public enum AuthDataError: Error, Sendable, Hashable, CustomStringConvertible {
    case tooShort(length: Int, needed: Int)
    case credentialIdLength(Int)
    case credentialKey(CBORError)
    case extensions(CBORError)
    case extensionsNotAMap

    public var description: String {
        switch self {
        case .tooShort(let length, let needed):
            return "authenticator data is \(length) bytes, needs at least \(needed)"
        case .credentialIdLength(let length): return "credential ID length \(length) exceeds the data"
        case .credentialKey(let error): return "credential public key: \(error)"
        case .extensions(let error): return "extensions: \(error)"
        case .extensionsNotAMap: return "extensions are not a CBOR map"
        }
    }
}
