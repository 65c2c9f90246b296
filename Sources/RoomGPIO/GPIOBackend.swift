import RoomSettings
import RoomSystem

/// The two buttons of the appliance (docs/gpio.md).
public enum ButtonID: String, Sendable, CaseIterable, Hashable {
    case mute, hand
}

/// The three LEDs of the appliance.
public enum LEDID: String, Sendable, CaseIterable, Hashable {
    case mute, hand, stage
}

/// One logical edge of an input line: `pressed` is already corrected for active-low wiring.
public struct ButtonEdge: Sendable, Equatable {
    public var pressed: Bool
    public init(pressed: Bool) { self.pressed = pressed }
}

/// An input line requested for edge events. `fileDescriptor` is pollable (readable when edges
/// wait); the owner registers it with the `EventLoop` and calls `readEdges()` when readable.
public protocol GPIOInput: AnyObject {
    var fileDescriptor: Int32 { get }
    /// Reads the edges waiting now without blocking (may return none).
    func readEdges() throws(SystemError) -> [ButtonEdge]
    /// Releases the line; safe to call twice. Deregister the fd from the loop first.
    func close()
}

/// An output line; `set(true)` lights the LED (active-low is the backend's business).
public protocol GPIOOutput: AnyObject {
    func set(_ on: Bool) throws(SystemError)
    func close()
}

/// Where lines come from: libgpiod on a board, `SimulatedGPIO` in tests and the rig.
public protocol GPIOBackend: AnyObject {
    func openInput(_ button: ButtonID, line: Int) throws(SystemError) -> GPIOInput
    func openOutput(_ led: LEDID, line: Int) throws(SystemError) -> GPIOOutput
}

/// The lines of one board, opened from its profile.
public struct GPIOLines {
    public var inputs: [ButtonID: GPIOInput] = [:]
    public var outputs: [LEDID: GPIOOutput] = [:]

    /// Opens every line the profile names (missing keys are skipped). On error the lines
    /// already opened are closed again.
    public static func open(_ board: BoardGPIO, backend: GPIOBackend) throws(SystemError) -> GPIOLines {
        var lines = GPIOLines()
        do {
            if let l = board.muteButton { lines.inputs[.mute] = try backend.openInput(.mute, line: l) }
            if let l = board.handButton { lines.inputs[.hand] = try backend.openInput(.hand, line: l) }
            if let l = board.muteLED { lines.outputs[.mute] = try backend.openOutput(.mute, line: l) }
            if let l = board.handLED { lines.outputs[.hand] = try backend.openOutput(.hand, line: l) }
            if let l = board.stageLED { lines.outputs[.stage] = try backend.openOutput(.stage, line: l) }
        } catch {
            lines.close()
            throw error
        }
        return lines
    }

    public func close() {
        for i in inputs.values { i.close() }
        for o in outputs.values { o.close() }
    }
}

public enum GPIO {
    /// The environment variable naming the simulated board's control directory.
    public static let simulatorDirectoryVariable = "ROOMD_SIM_GPIO_DIR"

    /// The backend for a board: chip `sim` → `SimulatedGPIO` (control directory from
    /// `$ROOMD_SIM_GPIO_DIR`, or none), anything else → libgpiod. Nil when the board has no lines.
    public static func backend(for board: BoardGPIO) throws(SystemError) -> GPIOBackend? {
        guard board.hasLines, let chip = board.chip else { return nil }
        if chip == "sim" {
            let dir = Environment.get(simulatorDirectoryVariable)
            return try SimulatedGPIO(directory: dir?.isEmpty == false ? dir : nil)
        }
        return try LibgpiodBackend(chip: chip, activeLow: board.activeLow, bias: board.bias)
    }
}
