@testable import RoomBase
import XCTest

final class DeadlineHeapTests: XCTestCase {
    func testPopsByDeadlineThenArrival() {
        var heap = DeadlineHeap<String>()
        var rng = SplitMix64(seed: 7)
        var pushed: [(UInt64, UInt64, String)] = []
        for seq in 0..<200 as Range<UInt64> {
            let deadline = rng.next() % 20   // many ties
            pushed.append((deadline, seq, "\(seq)"))
            heap.push(.init(deadline: deadline, seq: seq, item: "\(seq)"))
        }
        var popped: [String] = []
        while let e = heap.popFirst() { popped.append(e.item) }
        XCTAssertEqual(popped, pushed.sorted { ($0.0, $0.1) < ($1.0, $1.1) }.map(\.2))
    }

    func testPopDueStopsAtTheFirstFutureDeadline() {
        var heap = DeadlineHeap<Int>()
        for (i, d) in [30, 10, 20, 10].enumerated() { heap.push(.init(deadline: UInt64(d), seq: UInt64(i), item: i)) }
        XCTAssertEqual(heap.popDue(now: 15)?.item, 1)
        XCTAssertEqual(heap.popDue(now: 15)?.item, 3, "equal deadlines in arrival order")
        XCTAssertNil(heap.popDue(now: 15))
        XCTAssertEqual(heap.first?.deadline, 20)
        heap.replaceAll(with: [.init(deadline: 5, seq: 9, item: 9), .init(deadline: 1, seq: 8, item: 8)])
        XCTAssertEqual(heap.popFirst()?.item, 8)
        XCTAssertEqual(heap.count, 1)
    }
}
