import Foundation
@testable import RoomGPIO
import RoomSettings
import RoomSystem
import XCTest

/// The LED ring's pattern (which LED shows the talker), its APA102 frames and the simulated ring.
final class LEDRingTests: XCTestCase {
    let ring = BoardRing(device: "sim", leds: 12)

    func testTheLEDNearestTheTalkerLights() {
        XCTAssertEqual(RingPattern.nearestLED(ring: ring, azimuthDegrees: 0), 0)
        XCTAssertEqual(RingPattern.nearestLED(ring: ring, azimuthDegrees: 59), 2)
        XCTAssertEqual(RingPattern.nearestLED(ring: ring, azimuthDegrees: 180), 6)
        XCTAssertEqual(RingPattern.nearestLED(ring: ring, azimuthDegrees: -30), 11)
        XCTAssertEqual(RingPattern.nearestLED(ring: ring, azimuthDegrees: -14), 0, "nearer LED 0 (0°) than LED 11 (-30°)")
        XCTAssertEqual(RingPattern.nearestLED(ring: ring, azimuthDegrees: 345), 0)
        // LED 0 at -90° (the board's -y side), numbers growing clockwise
        let turned = BoardRing(device: "sim", leds: 12, led0AzimuthDegrees: -90, clockwise: true)
        XCTAssertEqual(RingPattern.nearestLED(ring: turned, azimuthDegrees: -90), 0)
        XCTAssertEqual(RingPattern.nearestLED(ring: turned, azimuthDegrees: -120), 1)
        XCTAssertEqual(RingPattern.nearestLED(ring: turned, azimuthDegrees: -60), 11)
    }

    func testPatternSaysLockedLastOrNothing() {
        let locked = RingPattern.pixels(ring: ring, talkerAzimuthDegrees: 90, locked: true, muted: false)
        XCTAssertEqual(locked[3], RingColor(0, 0, 255))
        XCTAssertEqual(locked[2], RingColor(0, 0, 24))
        XCTAssertEqual(locked[4], RingColor(0, 0, 24))
        XCTAssertEqual(locked.filter { $0 != .off }.count, 3)
        let last = RingPattern.pixels(ring: ring, talkerAzimuthDegrees: 90, locked: false, muted: false)
        XCTAssertEqual(last.filter { $0 != .off }, [RingColor(0, 0, 24)])
        XCTAssertEqual(last[3], RingColor(0, 0, 24))
        let muted = RingPattern.pixels(ring: ring, talkerAzimuthDegrees: 90, locked: true, muted: true)
        XCTAssertEqual(muted[3], RingColor(255, 0, 0), "red while nobody at the far end hears the room")
        XCTAssertTrue(RingPattern.pixels(ring: ring, talkerAzimuthDegrees: nil, locked: false, muted: false).allSatisfy { $0 == .off })
        XCTAssertTrue(RingPattern.pixels(ring: ring, talkerAzimuthDegrees: .nan, locked: true, muted: false).allSatisfy { $0 == .off })
    }

    func testAPA102FrameIsStartLEDsEnd() {
        let bytes = APA102Ring.frame([RingColor(1, 2, 3), RingColor(10, 20, 30)])
        XCTAssertEqual(bytes, [0, 0, 0, 0, 0xFF, 3, 2, 1, 0xFF, 30, 20, 10, 0xFF, 0xFF, 0xFF, 0xFF])
        // the end frame needs a bit per two LEDs: 64 LEDs -> 4 bytes, still at least 4
        XCTAssertEqual(APA102Ring.frame(Array(repeating: .off, count: 64)).count, 4 + 64 * 4 + 4)
    }

    func testSimulatedRingWritesItsFile() throws {
        let dir = NSTemporaryDirectory() + "roomd-ring-\(getpid())"
        try? FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: dir) }
        let sim = SimulatedRing(directory: dir)
        try sim.show(RingPattern.pixels(ring: BoardRing(device: "sim", leds: 4), talkerAzimuthDegrees: 180, locked: true, muted: false))
        XCTAssertEqual(try String(contentsOfFile: dir + "/ring", encoding: .utf8), "0,0,0 0,0,24 0,0,255 0,0,24\n")
    }

    func testAMissingSPIDeviceIsNamed() {
        XCTAssertThrowsError(try APA102Ring(path: "/dev/spidev-none.0")) { error in
            XCTAssertTrue("\(error)".contains("LED ring /dev/spidev-none.0"), "\(error)")
        }
    }
}
