import Testing

@testable import AssertGateCore

/// `UncheckedCell` holds a value like a stored property does; in debug
/// builds (the suite's) an access that overlaps a modification traps, as the
/// runtime's exclusivity check would have, so the tests still see overlaps
/// the release build no longer checks.
@Suite struct UncheckedCellTests {
    @Test func aValueIsReadAndChangedInPlace() {
        let cell = UncheckedCell([1, 2])
        cell.value.append(3)
        cell.value[0] = 9
        #expect(cell.value == [9, 2, 3])
        // Reads may nest (two reads never conflict).
        #expect(cell.value.count == cell.value.reduce(0) { n, _ in n + (cell.value.isEmpty ? 0 : 1) })
    }

    #if DEBUG
    /// A modification made while another is in progress (here through a
    /// second path to the same cell, as a re-entrant callback would).
    @Test func anOverlappingModificationTrapsInDebugBuilds() async {
        await #expect(processExitsWith: .failure) {
            let cell = UncheckedCell([1])
            Self.appendThroughTheCell(&cell.value, cell)
        }
        await #expect(processExitsWith: .failure) {
            let cell = UncheckedCell([1])
            Self.readThroughTheCell(&cell.value, cell)
        }
    }

    static func appendThroughTheCell(_ held: inout [Int], _ cell: UncheckedCell<[Int]>) {
        cell.value.append(2)
        held.append(3)
    }

    static func readThroughTheCell(_ held: inout [Int], _ cell: UncheckedCell<[Int]>) {
        _ = cell.value.count
        held.append(3)
    }
    #endif
}
