import RoomAudio
import XCTest

final class StreamGainsTests: XCTestCase {
    func testSetUpdateAndDefault() {
        let g = StreamGains()
        XCTAssertEqual(g.gain(ssrc: 7), 1, "unset senders play at unity")
        XCTAssertTrue(g.set(ssrc: 7, linear: 0.5))
        XCTAssertEqual(g.gain(ssrc: 7), 0.5)
        XCTAssertTrue(g.set(ssrc: 7, linear: 2))
        XCTAssertEqual(g.gain(ssrc: 7), 2, "a second set replaces the first")
        XCTAssertEqual(g.gain(ssrc: 8), 1)
    }

    func testRefusesBadInputAndAFullTable() {
        let g = StreamGains()
        XCTAssertFalse(g.set(ssrc: 0, linear: 1))
        XCTAssertFalse(g.set(ssrc: 1, linear: .nan))
        XCTAssertFalse(g.set(ssrc: 1, linear: -1))
        for s in 1...UInt32(StreamGains.capacity) { XCTAssertTrue(g.set(ssrc: s, linear: 0.25)) }
        XCTAssertFalse(g.set(ssrc: 999, linear: 0.25), "table full")
        XCTAssertTrue(g.set(ssrc: 3, linear: 0.75), "updating an existing sender still works")
        XCTAssertEqual(g.gain(ssrc: 3), 0.75)
    }
}
