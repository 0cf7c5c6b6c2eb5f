/// The value of `<prefix>Set-Device-Bits` on an upstream response (risk.md
/// §6.8): `bit0=<0|1>` and/or `bit1=<0|1>`, `, `-separated, each at most
/// once, any order. Anything else is refused whole: no update from a value
/// the upstream did not mean.
struct SetDeviceBits: Equatable {
    var bit0: Bool?
    var bit1: Bool?

    init(bit0: Bool?, bit1: Bool?) {
        self.bit0 = bit0
        self.bit1 = bit1
    }

    /// nil: malformed. Bytes as the upstream sent them (a value is at most a few bytes).
    init?<Bytes: Collection<UInt8>>(parsing value: Bytes) {
        guard value.count <= 64 else { return nil }
        let text = String(decoding: value, as: UTF8.self)
        var bit0: Bool?
        var bit1: Bool?
        for item in text.split(separator: ",", omittingEmptySubsequences: false) {
            let part = item.trimmingASCIIWhitespace()
            let kv = part.split(separator: "=", omittingEmptySubsequences: false)
            guard kv.count == 2, kv[1] == "0" || kv[1] == "1" else { return nil }
            let on = kv[1] == "1"
            switch kv[0] {
            case "bit0":
                guard bit0 == nil else { return nil }
                bit0 = on
            case "bit1":
                guard bit1 == nil else { return nil }
                bit1 = on
            default:
                return nil
            }
        }
        guard bit0 != nil || bit1 != nil else { return nil }
        self.bit0 = bit0
        self.bit1 = bit1
    }
}
