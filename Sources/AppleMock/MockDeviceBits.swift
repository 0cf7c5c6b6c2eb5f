/// A device's two bits as the mock keeps them.
public struct MockDeviceBits: Sendable, Equatable {
    public var bit0: Bool
    public var bit1: Bool
    /// `YYYY-MM` of the last update.
    public var lastUpdate: String

    public init(bit0: Bool, bit1: Bool, lastUpdate: String) {
        self.bit0 = bit0
        self.bit1 = bit1
        self.lastUpdate = lastUpdate
    }

    /// Apple's query answer.
    var json: String {
        #"{"bit0":\#(bit0),"bit1":\#(bit1),"last_update_time":"\#(lastUpdate)"}"#
    }
}
