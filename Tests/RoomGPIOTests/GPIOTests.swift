import CGpiod
import Foundation
import Glibc
@testable import RoomGPIO
import RoomSettings
import RoomSystem
import XCTest

final class GPIOTests: XCTestCase {
    /// Runs the loop for `ms` milliseconds (or until `until` holds).
    private func run(_ loop: EventLoop, ms: Int, until: () -> Bool = { false }) throws {
        let end = monotonicNanoseconds() + UInt64(ms) * 1_000_000
        while !until() {
            let now = monotonicNanoseconds()
            if now >= end { break }
            try loop.runOnce(timeout: .nanoseconds(Int64(end - now)))
        }
    }

    private func makeButtons(longPress: Duration = .milliseconds(1500), directory: String? = nil)
        throws -> (EventLoop, SimulatedGPIO, Buttons, GPIOLines, Box) {
        let loop = try EventLoop()
        let sim = try SimulatedGPIO(directory: directory)
        let lines = try GPIOLines.open(BoardGPIO(chip: "sim", muteButton: 5, handButton: 6), backend: sim)
        let box = Box()
        let buttons = try Buttons(loop: loop, inputs: lines.inputs,
                                  configuration: .init(debounce: .milliseconds(30), longPress: longPress)) {
            box.events.append($0)
        }
        return (loop, sim, buttons, lines, box)
    }

    final class Box { var events: [Buttons.Event] = [] }

    private func tempDir() -> String {
        var template = Array("/tmp/roomgpio-XXXXXX".utf8CString)
        let p = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
        return String(cString: p!)
    }

    /// The kernel gets exactly the bias the board asks for, on top of active-low.
    func testLibgpiodInputFlagsCarryActiveLowAndBias() {
        XCTAssertEqual(LibgpiodBackend.inputFlags(activeLow: false, bias: .asIs), 0)
        XCTAssertEqual(LibgpiodBackend.inputFlags(activeLow: true, bias: .pullUp),
                       Int32(GPIOD_LINE_REQUEST_FLAG_ACTIVE_LOW | GPIOD_LINE_REQUEST_FLAG_BIAS_PULL_UP))
        XCTAssertEqual(LibgpiodBackend.inputFlags(activeLow: false, bias: .pullDown), Int32(GPIOD_LINE_REQUEST_FLAG_BIAS_PULL_DOWN))
        XCTAssertEqual(LibgpiodBackend.inputFlags(activeLow: false, bias: .disabled), Int32(GPIOD_LINE_REQUEST_FLAG_BIAS_DISABLE))
    }

    func testPressShorterThanDebounceIsIgnored() throws {
        let (loop, sim, buttons, lines, box) = try makeButtons()
        defer { buttons.close(); lines.close() }
        sim.press(.mute)
        try run(loop, ms: 10)
        sim.release(.mute)
        try run(loop, ms: 150)
        XCTAssertEqual(box.events, [])
        XCTAssertFalse(buttons.isPressed(.mute))
    }

    func testCleanPressIsShortPress() throws {
        let (loop, sim, buttons, lines, box) = try makeButtons()
        defer { buttons.close(); lines.close() }
        sim.press(.mute)
        try run(loop, ms: 100)
        XCTAssertTrue(buttons.isPressed(.mute))
        XCTAssertEqual(box.events, [])
        sim.release(.mute)
        try run(loop, ms: 100)
        XCTAssertEqual(box.events, [.shortPress(.mute)])
    }

    func testLongHoldIsLongPressReportedAtThreshold() throws {
        let (loop, sim, buttons, lines, box) = try makeButtons(longPress: .milliseconds(200))
        defer { buttons.close(); lines.close() }
        sim.press(.hand)
        try run(loop, ms: 150)
        XCTAssertEqual(box.events, [])
        try run(loop, ms: 200)
        XCTAssertEqual(box.events, [.longPress(.hand)], "reported while still held")
        sim.release(.hand)
        try run(loop, ms: 100)
        XCTAssertEqual(box.events, [.longPress(.hand)], "the release after a long press is silent")
    }

    func testDefaultLongPressIsOneAndAHalfSeconds() {
        XCTAssertEqual(Buttons.Configuration().longPress, .milliseconds(1500))
        XCTAssertEqual(Buttons.Configuration().debounce, .milliseconds(30))
    }

    func testBounceIsOnePress() throws {
        let (loop, sim, buttons, lines, box) = try makeButtons()
        defer { buttons.close(); lines.close() }
        // Five edges within ~10 ms, ending pressed; the loop reads them as they come.
        for i in 0..<5 {
            if i % 2 == 0 { sim.press(.mute) } else { sim.release(.mute) }
            try run(loop, ms: 2)
        }
        try run(loop, ms: 100)
        XCTAssertEqual(box.events, [])
        // Bounce on release too.
        sim.release(.mute); try run(loop, ms: 2)
        sim.press(.mute); try run(loop, ms: 2)
        sim.release(.mute)
        try run(loop, ms: 100)
        XCTAssertEqual(box.events, [.shortPress(.mute)])
    }

    func testLEDsFollowApplyAndStateFile() throws {
        let dir = tempDir()
        let loop = try EventLoop()
        let sim = try SimulatedGPIO(directory: dir)
        XCTAssertEqual(try Files.readText(dir + "/leds"), "mute=0 hand=0 stage=0\n")
        let lines = try GPIOLines.open(BoardGPIO(chip: "sim", muteLED: 1, handLED: 2, stageLED: 3), backend: sim)
        let leds = LEDController(loop: loop, outputs: lines.outputs, blinkInterval: .milliseconds(40))
        defer { leds.close() }

        leds.apply(muted: true, handRaised: false, onStage: false, connection: .connected)
        XCTAssertEqual(sim.led(.mute), true)
        XCTAssertEqual(sim.led(.hand), false)
        XCTAssertEqual(try Files.readText(dir + "/leds"), "mute=1 hand=0 stage=0\n")

        leds.apply(muted: false, handRaised: true, onStage: false, connection: .connected)
        XCTAssertEqual(try Files.readText(dir + "/leds"), "mute=0 hand=1 stage=0\n")
        leds.apply(muted: false, handRaised: false, onStage: true, connection: .connected)
        XCTAssertEqual(try Files.readText(dir + "/leds"), "mute=0 hand=0 stage=1\n")
        // Idempotent: same state, no timer, nothing changes.
        leds.apply(muted: false, handRaised: false, onStage: true, connection: .connected)
        XCTAssertEqual(loop.timerCount, 0)
        XCTAssertEqual(try Files.readText(dir + "/leds"), "mute=0 hand=0 stage=1\n")

        // Connecting: hand and stage blink together; mute still follows the mute state.
        leds.apply(muted: true, handRaised: false, onStage: false, connection: .connecting)
        XCTAssertEqual(sim.stateLine, "mute=1 hand=1 stage=1")
        XCTAssertEqual(loop.timerCount, 1)
        leds.apply(muted: true, handRaised: false, onStage: false, connection: .connecting)
        XCTAssertEqual(loop.timerCount, 1, "re-applying does not restart the blink")
        var seen = Set<String>()
        try run(loop, ms: 200) { seen.insert(sim.stateLine); return seen.count >= 2 }
        XCTAssertEqual(seen, ["mute=1 hand=1 stage=1", "mute=1 hand=0 stage=0"])

        // Failed: alternate.
        leds.apply(muted: false, handRaised: false, onStage: false, connection: .failed)
        seen = []
        try run(loop, ms: 200) { seen.insert(sim.stateLine); return seen.count >= 2 }
        XCTAssertEqual(seen, ["mute=0 hand=1 stage=0", "mute=0 hand=0 stage=1"])

        // Back to connected: blinking stops, state shows.
        leds.apply(muted: false, handRaised: true, onStage: false, connection: .connected)
        XCTAssertEqual(loop.timerCount, 0)
        XCTAssertEqual(try Files.readText(dir + "/leds"), "mute=0 hand=1 stage=0\n")

        // Linked to a second room: the stage LED winks (lit for one 10 ms tick of every 16, at
        // a 40 ms blink interval), over the stage state, on stage or not.
        leds.apply(muted: false, handRaised: true, onStage: false, connection: .connected, linked: true)
        XCTAssertEqual(loop.timerCount, 1)
        var stages: [String] = []
        try run(loop, ms: 400) { stages.append(sim.stateLine); return false }
        XCTAssertTrue(stages.contains("mute=0 hand=1 stage=1") && stages.contains("mute=0 hand=1 stage=0"), "\(Set(stages))")
        XCTAssertLessThan(stages.filter { $0.hasSuffix("stage=1") }.count * 3, stages.count, "a wink, mostly dark")
        leds.apply(muted: false, handRaised: true, onStage: false, connection: .connected, linked: false)
        XCTAssertEqual(loop.timerCount, 0, "unlinked: no timer")
        XCTAssertEqual(sim.stateLine, "mute=0 hand=1 stage=0")
        lines.close()
        _ = try? Process.run(URL(fileURLWithPath: "/bin/rm"), arguments: ["-rf", dir]).waitUntilExit()
    }

    func testExternalControlFileInjectsIntoRunningLoop() throws {
        let dir = tempDir()
        defer { _ = try? Process.run(URL(fileURLWithPath: "/bin/rm"), arguments: ["-rf", dir]).waitUntilExit() }
        let (loop, _, buttons, lines, box) = try makeButtons(directory: dir)
        defer { buttons.close(); lines.close() }
        var st = stat()
        XCTAssertEqual(lstat(dir + "/hand", &st), 0)
        XCTAssertEqual(st.st_mode & S_IFMT, S_IFIFO)
        // Another process presses and releases, the way the rig does.
        let p = try Process.run(URL(fileURLWithPath: "/bin/sh"), arguments: [
            "-c", "echo press > '\(dir)/hand'; sleep 0.1; echo release > '\(dir)/hand'; echo bogus > '\(dir)/mute'",
        ])
        try run(loop, ms: 3000) { !box.events.isEmpty }
        p.waitUntilExit()
        XCTAssertEqual(box.events, [.shortPress(.hand)])
        try run(loop, ms: 50)
        XCTAssertEqual(box.events, [.shortPress(.hand)], "an unknown word is ignored")
    }

    func testSimulatorRefusesNonFIFOControlPath() throws {
        let dir = tempDir()
        defer { _ = try? Process.run(URL(fileURLWithPath: "/bin/rm"), arguments: ["-rf", dir]).waitUntilExit() }
        try Files.writeAtomically(dir + "/mute", [])
        let sim = try SimulatedGPIO(directory: dir)
        XCTAssertThrowsError(try sim.openInput(.mute, line: 0)) { error in
            XCTAssertTrue("\(error)".contains("not a FIFO"), "\(error)")
        }
    }

    func testLibgpiodMissingChipIsAClearError() {
        XCTAssertThrowsError(try LibgpiodBackend(chip: "gpiochip-nonexistent", activeLow: false)) { error in
            let text = "\(error)"
            XCTAssertTrue(text.contains("gpio chip gpiochip-nonexistent"), text)
            XCTAssertTrue(text.contains("No such file or directory"), text)
        }
        XCTAssertThrowsError(try GPIO.backend(for: BoardGPIO(chip: "gpiochip7", muteButton: 3))) { error in
            XCTAssertTrue("\(error)".hasPrefix("gpio chip gpiochip7: open: "), "\(error)")
        }
        XCTAssertNil(try GPIO.backend(for: BoardGPIO()))
        XCTAssertTrue(try GPIO.backend(for: BoardGPIO(chip: "sim", muteLED: 1)) is SimulatedGPIO)
    }
}
