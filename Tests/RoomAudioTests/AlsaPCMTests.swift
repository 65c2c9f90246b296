import Foundation
import RoomALSA
import RoomAudio
import XCTest

/// The ALSA device wrapper refuses what a device cannot do, with the numbers an installer needs.
final class AlsaPCMTests: XCTestCase {
    override func setUp() {
        XCTAssertTrue(SimCard.prepared)
        SimCard.useRoom(SimCard.scratch("pcm"), ["echo": "off"])
    }

    func testUnsupportedChannelCountNamesWhatTheDeviceOffers() {
        XCTAssertThrowsError(try AlsaPCM(device: "roomsim", direction: .capture, rate: 48000, channels: 9, periodFrames: 480, periods: 4)) {
            let text = "\($0)"
            XCTAssertTrue(text.contains("9 channels not supported") && text.contains("1..8"), text)
        }
        XCTAssertThrowsError(try AlsaPCM(device: "roomsim", direction: .playback, rate: 48000, channels: 3, periodFrames: 480, periods: 4)) {
            XCTAssertTrue("\($0)".contains("3 channels not supported"), "\($0)")
        }
    }

    /// The engine's recovery branches on these, not on errno values of its own.
    func testErrorCodesAreClassifiedByName() {
        for code in [EPIPE, ESTRPIPE, EINTR, EAGAIN] {
            XCTAssertTrue(AlsaCode.isXrun(-code), "\(code)")
            XCTAssertFalse(AlsaCode.isDeviceLost(-code), "\(code)")
        }
        for code in [ENODEV, EIO, EBADFD, ENOENT, ENXIO] {
            XCTAssertTrue(AlsaCode.isDeviceLost(-code), "\(code)")
            XCTAssertFalse(AlsaCode.isXrun(-code), "\(code)")
        }
        XCTAssertEqual(AlsaCode.notOpen, -EBADFD)
        XCTAssertEqual(AlsaCode.ioError, -EIO)
        XCTAssertFalse(AlsaCode.isXrun(0))
        XCTAssertFalse(AlsaCode.isDeviceLost(-EINVAL))
    }

    func testUnsupportedRateNamesTheRange() {
        XCTAssertThrowsError(try AlsaPCM(device: "roomsim", direction: .capture, rate: 4000, channels: 1, periodFrames: 40, periods: 4)) {
            XCTAssertTrue("\($0)".contains("rate 4000 Hz not supported"), "\($0)")
        }
    }

    func testOpensAtTheBoardShape() throws {
        let pcm = try AlsaPCM(device: "roomsim", direction: .capture, rate: 16000, channels: 4, periodFrames: 160, periods: 4)
        XCTAssertEqual(pcm.bufferFrames, 640)
        let buffer = UnsafeMutablePointer<Int16>.allocate(capacity: 160 * 4)
        defer { buffer.deallocate() }
        XCTAssertEqual(pcm.read(buffer, frames: 160), 160)
    }
}
