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
}
