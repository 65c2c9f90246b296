import CGpiod
import RoomSettings
import RoomSystem

/// libgpiod 1.6 (v1 API, Debian bookworm). Active-low is requested from the kernel with
/// `GPIOD_LINE_REQUEST_FLAG_ACTIVE_LOW`, so values and edges are logical ("pressed", "lit").
/// Errors name the chip, the line and the errno text. Not thread-safe: use on the loop thread.
public final class LibgpiodBackend: GPIOBackend {
    public let chipName: String
    public let activeLow: Bool
    public let bias: GPIOBias
    public static let consumer = "roomd"
    private var chip: OpaquePointer?

    public init(chip name: String, activeLow: Bool, bias: GPIOBias = .asIs) throws(SystemError) {
        chipName = name
        self.activeLow = activeLow
        self.bias = bias
        Errno.clearCurrent()
        guard let chip = name.withCString({ gpiod_chip_open_lookup($0) }) else {
            let e = Errno.current
            throw .errno("gpio chip \(name): open", (e.rawValue == 0 ? Errno.noSuchFile : e).rawValue)
        }
        self.chip = chip
    }

    deinit { if let chip { gpiod_chip_close(chip) } }

    private var flags: Int32 { activeLow ? Int32(GPIOD_LINE_REQUEST_FLAG_ACTIVE_LOW) : 0 }

    /// Request flags for a button line: active-low plus the board's bias. LEDs get no bias
    /// (an output drives the line; a pull would only waste current).
    public static func inputFlags(activeLow: Bool, bias: GPIOBias) -> Int32 {
        var f: Int32 = activeLow ? Int32(GPIOD_LINE_REQUEST_FLAG_ACTIVE_LOW) : 0
        switch bias {
        case .asIs: break
        case .pullUp: f |= Int32(GPIOD_LINE_REQUEST_FLAG_BIAS_PULL_UP)
        case .pullDown: f |= Int32(GPIOD_LINE_REQUEST_FLAG_BIAS_PULL_DOWN)
        case .disabled: f |= Int32(GPIOD_LINE_REQUEST_FLAG_BIAS_DISABLE)
        }
        return f
    }

    private func line(_ offset: Int, _ what: String) throws(SystemError) -> OpaquePointer {
        guard let chip, offset >= 0, let line = gpiod_chip_get_line(chip, UInt32(offset)) else {
            throw .errno("gpio chip \(chipName) line \(offset) (\(what)): get line", (offset < 0 ? Errno.invalidArgument : Errno.current).rawValue)
        }
        return line
    }

    public func openInput(_ button: ButtonID, line offset: Int) throws(SystemError) -> GPIOInput {
        let what = "\(button.rawValue) button"
        let line = try line(offset, what)
        if gpiod_line_request_both_edges_events_flags(line, Self.consumer, Self.inputFlags(activeLow: activeLow, bias: bias)) != 0 {
            throw .errno("gpio chip \(chipName) line \(offset) (\(what)): request edge events")
        }
        let fd = gpiod_line_event_get_fd(line)
        if fd < 0 {
            let e = Errno.current.rawValue
            gpiod_line_release(line)
            throw .errno("gpio chip \(chipName) line \(offset) (\(what)): event fd", e)
        }
        return Input(owner: self, line: line, fd: fd, label: "gpio chip \(chipName) line \(offset) (\(what))")
    }

    public func openOutput(_ led: LEDID, line offset: Int) throws(SystemError) -> GPIOOutput {
        let what = "\(led.rawValue) LED"
        let line = try line(offset, what)
        if gpiod_line_request_output_flags(line, Self.consumer, flags, 0) != 0 {
            throw .errno("gpio chip \(chipName) line \(offset) (\(what)): request output")
        }
        return Output(owner: self, line: line, label: "gpio chip \(chipName) line \(offset) (\(what))")
    }

    final class Input: GPIOInput {
        let owner: LibgpiodBackend  // keeps the chip open
        var line: OpaquePointer?
        let fileDescriptor: Int32
        let label: String
        init(owner: LibgpiodBackend, line: OpaquePointer, fd: Int32, label: String) {
            self.owner = owner; self.line = line; fileDescriptor = fd; self.label = label
        }
        deinit { close() }
        /// One event per call: the loop is level-triggered and calls again while more wait.
        func readEdges() throws(SystemError) -> [ButtonEdge] {
            guard let line else { return [] }
            var event = gpiod_line_event()
            if gpiod_line_event_read(line, &event) != 0 {
                let e = Errno.current
                if e == .wouldBlock || e == .interrupted { return [] }
                throw .errno("\(label): read event")
            }
            return [ButtonEdge(pressed: event.event_type == Int32(GPIOD_LINE_EVENT_RISING_EDGE))]
        }
        func close() {
            if let line { gpiod_line_release(line) }
            line = nil
        }
    }

    final class Output: GPIOOutput {
        let owner: LibgpiodBackend
        var line: OpaquePointer?
        let label: String
        init(owner: LibgpiodBackend, line: OpaquePointer, label: String) {
            self.owner = owner; self.line = line; self.label = label
        }
        deinit { close() }
        func set(_ on: Bool) throws(SystemError) {
            guard let line else { throw SystemError("\(label): closed") }
            if gpiod_line_set_value(line, on ? 1 : 0) != 0 { throw .errno("\(label): set value") }
        }
        func close() {
            if let line { gpiod_line_release(line) }
            line = nil
        }
    }
}
