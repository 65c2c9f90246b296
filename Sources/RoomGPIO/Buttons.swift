import RoomSystem

/// Debounced buttons with short and long presses, on the event loop (docs/gpio.md).
///
/// Debounce is "settle": every raw edge (re)starts a `debounce` timer; only when a line has
/// been quiet that long does its level count. A press and release closer together than
/// `debounce` therefore never happened, and a burst of contact bounce is one edge.
/// A press becomes `.longPress` as soon as it has been held `longPress` (the user gets the
/// feedback without guessing when to let go; the release is then silent); a release before
/// that is `.shortPress`. Durations are measured from the settled press, so a short press is
/// reported `debounce` after the release.
public final class Buttons {
    public enum Event: Equatable, Sendable {
        case shortPress(ButtonID)
        case longPress(ButtonID)
    }

    public struct Configuration: Sendable, Equatable {
        public var debounce: Duration
        public var longPress: Duration
        public init(debounce: Duration = .milliseconds(30), longPress: Duration = .milliseconds(1500)) {
            self.debounce = debounce
            self.longPress = longPress
        }
    }

    private struct State {
        var raw = false
        var stable = false
        var settle: EventLoop.TimerID?
        var hold: EventLoop.TimerID?
        var longReported = false
    }

    public let configuration: Configuration
    private let loop: EventLoop
    private let handler: (Event) -> Void
    private var states: [ButtonID: State] = [:]
    private var inputs: [ButtonID: (GPIOInput, EventLoop.IORegistration)] = [:]

    /// Registers each input's descriptor with `loop`. `handler` runs on the loop thread.
    /// Buttons does not own the inputs: `close()` deregisters them, the caller closes them.
    public init(loop: EventLoop, inputs: [ButtonID: GPIOInput], configuration: Configuration = Configuration(),
                handler: @escaping (Event) -> Void) throws(SystemError) {
        self.loop = loop
        self.configuration = configuration
        self.handler = handler
        do {
            for (button, input) in inputs {
                let reg = try loop.register(input.fileDescriptor, interest: .readable) { [weak self] events in
                    self?.readable(button, events)
                }
                self.inputs[button] = (input, reg)
            }
        } catch {
            close()
            throw error
        }
    }

    deinit {
        for (_, reg) in inputs.values { loop.deregister(reg) }
        for s in states.values {
            if let t = s.settle { loop.cancel(t) }
            if let t = s.hold { loop.cancel(t) }
        }
    }

    /// Stops watching the inputs and cancels pending timers.
    public func close() {
        for (_, reg) in inputs.values { loop.deregister(reg) }
        inputs.removeAll()
        for s in states.values {
            if let t = s.settle { loop.cancel(t) }
            if let t = s.hold { loop.cancel(t) }
        }
        states.removeAll()
    }

    /// True while the debounced level of `button` is pressed.
    public func isPressed(_ button: ButtonID) -> Bool { states[button]?.stable ?? false }

    private func readable(_ button: ButtonID, _ events: EventLoop.IOEvents) {
        guard let (input, reg) = inputs[button] else { return }
        do {
            for edge in try input.readEdges() { rawEdge(button, pressed: edge.pressed) }
        } catch {
            Log.error("\(error); button disabled")
            loop.deregister(reg)
            inputs[button] = nil
            return
        }
        if events.contains(.hangup) || events.contains(.error) {
            Log.error("gpio \(button.rawValue) button: line hung up; button disabled")
            loop.deregister(reg)
            inputs[button] = nil
        }
    }

    /// Feeds one raw edge (what the input line reports); public for callers with their own lines.
    public func rawEdge(_ button: ButtonID, pressed: Bool) {
        var s = states[button] ?? State()
        s.raw = pressed
        if let t = s.settle { loop.cancel(t) }
        s.settle = loop.schedule(after: configuration.debounce) { [weak self] in self?.settled(button) }
        states[button] = s
    }

    private func settled(_ button: ButtonID) {
        guard var s = states[button] else { return }
        s.settle = nil
        guard s.raw != s.stable else { states[button] = s; return }
        s.stable = s.raw
        var event: Event?
        if s.stable {
            s.longReported = false
            s.hold = loop.schedule(after: configuration.longPress) { [weak self] in self?.held(button) }
        } else {
            if let t = s.hold { loop.cancel(t) }
            s.hold = nil
            if !s.longReported { event = .shortPress(button) }
        }
        states[button] = s
        if let event { handler(event) }
    }

    private func held(_ button: ButtonID) {
        guard var s = states[button], s.stable else { return }
        s.hold = nil
        s.longReported = true
        states[button] = s
        handler(.longPress(button))
    }
}
