import Testing

@testable import AssertGateCore

/// The h2 upstream connection's stream table: slots by id, a dictionary for
/// the streams whose slot a long-lived stream still holds.
@Suite struct H2StreamTableTests {
    @Test func streamsAreFoundAndRemovedById() {
        var t = H2StreamTable<String>()
        #expect(t.isEmpty)
        t.insert("a", id: 1)
        t.insert("b", id: 3)
        #expect(t[1] == "a")
        #expect(t[3] == "b")
        #expect(t[5] == nil)
        #expect(t.remove(1) == "a")
        #expect(t[1] == nil)
        #expect(t.remove(1) == nil)
        #expect(!t.isEmpty)
        #expect(t.remove(3) == "b")
        #expect(t.isEmpty)
    }

    @Test func aStreamWhoseSlotIsTakenGoesToTheOverflow() {
        var t = H2StreamTable<String>()
        // 1 and 1 + 2 * 256 share a slot.
        t.insert("old", id: 1)
        t.insert("new", id: 513)
        #expect(t[1] == "old")
        #expect(t[513] == "new")
        #expect(t.all.sorted() == ["new", "old"])
        #expect(t.remove(513) == "new")
        #expect(t[513] == nil)
        #expect(t[1] == "old")
        t.insert("newer", id: 1025)
        #expect(t.removeAllInOrder() == ["old", "newer"])
        #expect(t.isEmpty)
        #expect(t[1] == nil)
    }

    @Test func everyStreamComesOutInIdOrder() {
        var t = H2StreamTable<Int32>()
        for id in stride(from: Int32(2001), through: 1, by: -2) { t.insert(id, id: id) }
        let all = t.removeAllInOrder()
        #expect(all == Array(stride(from: Int32(1), through: 2001, by: 2)))
        #expect(t.isEmpty)
    }
}
