import RoomSettings
import XCTest

final class BoardBeamformerTests: XCTestCase {
    private let base = """
    [board]
    name = t
    [audio]
    capture_device = a
    playback_device = b
    capture_channels = 2
    """

    func testDefaultsToOnWithAnArrayAndOffWithout() throws {
        XCTAssertFalse(try BoardProfile.parse(text: base, file: "t.conf").beamformer)
        let array = base + "\n[array]\nmic0 = 0 0 0\nmic1 = 0.05 0 0\n"
        XCTAssertTrue(try BoardProfile.parse(text: array, file: "t.conf").beamformer)
        XCTAssertFalse(try BoardProfile.parse(text: array + "beamformer = no\n", file: "t.conf").beamformer)
    }

    func testBeamformerWithoutPositionsNamesTheKey() {
        XCTAssertThrowsError(try BoardProfile.parse(text: base + "\n[array]\nbeamformer = yes\n", file: "t.conf")) {
            XCTAssertTrue("\($0)".contains("array.beamformer"), "\($0)")
        }
    }
}
