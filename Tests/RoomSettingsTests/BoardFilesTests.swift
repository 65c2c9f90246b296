import Foundation
import RoomBase
import RoomSettings
import XCTest

/// The profiles shipped in board/ must always parse: a broken one is only noticed on the
/// board itself otherwise.
final class BoardFilesTests: XCTestCase {
    /// Repository root: this file is <root>/Tests/RoomSettingsTests/BoardFilesTests.swift.
    private static let root = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    private func load(_ relative: String) throws -> BoardProfile {
        let url = Self.root.appendingPathComponent(relative)
        let text = try String(contentsOf: url, encoding: .utf8)
        return try BoardProfile.parse(text: text, file: relative)
    }

    func testSimulatedBoard() throws {
        let p = try load("board/sim/board.conf")
        XCTAssertEqual(p.name, "sim")
        XCTAssertEqual(p.captureDevice, "roomsim")
        XCTAssertEqual(p.rate, 48000)
        XCTAssertEqual(p.captureChannels, 4)
        XCTAssertEqual(p.alsaConfig, "asound.conf")
        XCTAssertTrue(p.hasArray)
        XCTAssertEqual(p.micPositions.count, 4)
        XCTAssertEqual(p.micPositions[1], Point3(x: 0, y: 0.032, z: 0))
        // The self-test's speaker: on +x, where room.conf's mic_delays (0 4 9 4) put it.
        XCTAssertEqual(p.speakerPosition, Point3(x: 0.5, y: 0, z: 0))
        XCTAssertEqual(p.gpio.chip, "sim")
        XCTAssertEqual(p.gpio.muteButton, 5)
        XCTAssertTrue(p.gpio.activeLow)
        XCTAssertTrue(FileManager.default.fileExists(atPath: Self.root.appendingPathComponent("board/sim/asound.conf").path),
                      "alsa_config must name a file that exists next to the profile")
    }

    func testRaspberryPiReSpeaker4() throws {
        let p = try load("board/rpi-respeaker4/board.conf")
        XCTAssertEqual(p.name, "rpi-respeaker4")
        XCTAssertFalse(p.testedOnHardware, "not run on hardware yet; flip only after a real test")
        XCTAssertEqual(p.captureDevice, "plughw:CARD=seeed4micvoicec,DEV=0")
        XCTAssertEqual(p.captureChannels, 4)
        XCTAssertEqual(p.rate, 16000)
        XCTAssertTrue(p.hasArray)
        // Opposite mics 81.27 mm apart (Seeed's DOA constant), to the 0.1 mm the file states.
        XCTAssertEqual(p.micPositions[0].distance(to: p.micPositions[2]), 0.08127, accuracy: 0.0002)
        XCTAssertEqual(p.micPositions[1].distance(to: p.micPositions[3]), 0.08127, accuracy: 0.0002)
        XCTAssertNil(p.speakerPosition, "the speaker on the Pi's jack has no known place")
        XCTAssertEqual(p.gpio.muteButton, 17)
        XCTAssertNil(p.alsaConfig)
    }

    /// Every profile in board/*/board.conf, including ones added later.
    func testEveryShippedProfileParses() throws {
        let boards = Self.root.appendingPathComponent("board")
        let names = try FileManager.default.contentsOfDirectory(atPath: boards.path).sorted()
        var parsed = 0
        for name in names {
            let relative = "board/\(name)/board.conf"
            guard FileManager.default.fileExists(atPath: Self.root.appendingPathComponent(relative).path) else { continue }
            XCTAssertNoThrow(try load(relative), relative)
            parsed += 1
        }
        XCTAssertGreaterThanOrEqual(parsed, 2)
    }
}
