/// A device's two bits as `query_two_bits` answers them.
struct DeviceCheckBits: Sendable, Equatable {
    var bit0: Bool
    var bit1: Bool
    /// `last_update_time`, Apple's month of the last change (`YYYY-MM`); nil
    /// when the answer carried none in that form.
    var lastUpdate: String?
}
