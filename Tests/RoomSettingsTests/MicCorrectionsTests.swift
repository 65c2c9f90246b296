// roomd's file of the array's measured mic corrections (<state dir>/mic-corrections.conf): read
// back to what was written, and a person's edit checked like any configuration file.
import RoomSettings
import XCTest

final class MicCorrectionsTests: XCTestCase {
    func testWhatIsWrittenReadsBack() throws {
        for c in [MicCorrections(board: "sim", decibels: [0, 0.9, -1.1, 0.4]),
                  MicCorrections(board: "ReSpeaker 4-Mic Array", decibels: [0, -6]),
                  MicCorrections(board: "eight", decibels: [0, 0.1, 0.2, 0.3, -0.3, -0.2, -0.1, 6])] {
            XCTAssertEqual(try MicCorrections.parse(text: c.serialized(), file: "m.conf"), c)
        }
    }

    func testABadEditNamesTheLineAndTheKey() {
        let cases: [(String, String)] = [
            ("[array]\nboard = sim\ncorrections_db = 0, x, 1, 0\n", "m.conf:3: array.corrections_db: mic 1: \"x\" is not a number"),
            ("[array]\nboard = sim\ncorrections_db = 0, 7, 1, 0\n", "m.conf:3: array.corrections_db: mic 1: 7 dB is beyond the calibration's ±6 dB"),
            ("[array]\nboard = sim\ncorrections_db = 0, inf\n", "m.conf:3: array.corrections_db: mic 1: \"inf\" is not a number"),
            ("[array]\nboard = sim\ncorrections_db = 1, 0, 0, 0\n", "m.conf:3: array.corrections_db: mic 0: 1: mic 0 is the reference, its correction is 0"),
            ("[array]\nboard = sim\ncorrections_db = 0\n", "m.conf:3: array.corrections_db: 1 value(s); one per mic, 2 to 8, mic 0 first"),
            ("[array]\nboard = sim\ncorrections_db = 0,,1\n", "m.conf:3: array.corrections_db: mic 1: \"\" is not a number"),
            ("[array]\ncorrections_db = 0, 1\n", "m.conf: array.board: missing (required)"),
            ("[array]\nboard = sim\n", "m.conf: array.corrections_db: missing (required)"),
            ("[array]\nboard = sim\ncorection_db = 0, 1\n", "m.conf:3: array.corection_db: unknown key (did you mean \"corrections_db\"?) (known in [array]: board, corrections_db)"),
        ]
        for (text, message) in cases {
            XCTAssertThrowsError(try MicCorrections.parse(text: text, file: "m.conf"), text) { error in
                XCTAssertEqual("\(error)", message)
            }
        }
    }

    /// The keeper writes a flash card only when it is worth it: enough measured, moved by a tenth
    /// of a dB, and not within 5 minutes of its last write unless roomd is stopping.
    func testCorrectionsAreKeptOnlyWhenMeasuredMovedAndNotTooOften() {
        typealias P = MicCorrectionsKeepPolicy
        let measured = [0, 0.9, -1.1, 0.4]
        let minute: UInt64 = 60_000_000_000
        func write(blocks: Int = P.blocksBeforeKeeping, kept: [Double]? = nil, last: UInt64? = nil,
                   now: UInt64 = 100 * minute, stopping: Bool = false) -> Bool {
            P.shouldWrite(measured: measured, measuredBlocks: blocks, kept: kept, lastWriteNs: last,
                          nowNs: now, stopping: stopping)
        }
        XCTAssertTrue(write(), "measured enough, nothing kept yet")
        XCTAssertFalse(write(blocks: P.blocksBeforeKeeping - 1), "too little of the room's noise measured")
        XCTAssertFalse(write(blocks: P.blocksBeforeKeeping - 1, stopping: true), "not even at a stop")
        XCTAssertFalse(write(kept: [0, 0.94, -1.06, 0.36]), "within the status's tenth of a dB")
        XCTAssertFalse(write(kept: [0, 0.94, -1.06, 0.36], stopping: true), "a stop writes only what moved")
        XCTAssertTrue(write(kept: [0, 0.8, -1.1, 0.4]), "one mic moved by 0.1 dB")
        XCTAssertTrue(write(kept: [0, 0.9]), "kept for another count of mics")
        XCTAssertFalse(write(kept: [0, 0.8, -1.1, 0.4], last: 96 * minute), "4 minutes after the last write")
        XCTAssertTrue(write(kept: [0, 0.8, -1.1, 0.4], last: 95 * minute), "5 minutes after it")
        XCTAssertTrue(write(kept: [0, 0.8, -1.1, 0.4], last: 99 * minute, stopping: true), "a stop does not wait")
    }
}
