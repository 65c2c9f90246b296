import RoomSystem

/// The connection to the room, as the LEDs show it.
public enum ConnectionIndicator: String, Sendable, Equatable {
    case connecting, connected, failed
    /// Not in a room on purpose (left with the hand button or roomctl): steady, like connected,
    /// so a deliberate leave does not look like a fault.
    case idle
}

/// Drives the LEDs from state, never by polling (docs/gpio.md). Call `apply` whenever the
/// state changes (from any source: button, roomctl, moderator); it is idempotent and writes a
/// line only when its level changes.
///
/// - mute LED = muted, always (also while connecting or failed: mute and LED never disagree);
/// - connected: hand LED = hand raised, stage LED = on stage;
/// - connecting: hand and stage LEDs blink together (on/off every `blinkInterval`, 500 ms);
/// - failed: hand and stage LEDs blink alternately, twice as fast (250 ms);
/// - linked to a second room (`roomctl listen`), while connected: the stage LED winks — flips
///   for one quarter of `blinkInterval` every four intervals (2 s) — over what it shows;
/// - a call rings: hand and stage LEDs flash together, four times as fast as connecting
///   (125 ms), over everything but the mute LED — what people look for when a phone rings.
public final class LEDController {
    public struct State: Equatable, Sendable {
        public var muted = false
        public var handRaised = false
        public var onStage = false
        public var connection = ConnectionIndicator.connected
        /// Listening to a second room.
        public var linked = false
        /// A SIP call rings here.
        public var ringing = false
        public init(muted: Bool = false, handRaised: Bool = false, onStage: Bool = false,
                    connection: ConnectionIndicator = .connected, linked: Bool = false, ringing: Bool = false) {
            self.muted = muted; self.handRaised = handRaised; self.onStage = onStage; self.connection = connection
            self.linked = linked
            self.ringing = ringing
        }
    }

    /// Ticks of the wink's timer (a quarter of `blinkInterval`) per wink: 2 s at 500 ms.
    static let winkTicks = 16
    private var winkTick = 0

    public let blinkInterval: Duration
    public private(set) var state: State?
    /// What each LED shows now (also for LEDs without a line).
    public private(set) var levels: [LEDID: Bool] = [:]
    private let loop: EventLoop
    private let outputs: [LEDID: GPIOOutput]
    private var blinkTimer: EventLoop.TimerID?
    private var blinkPhase = false

    /// Does not own the outputs; `close()` cancels the blink timer.
    public init(loop: EventLoop, outputs: [LEDID: GPIOOutput], blinkInterval: Duration = .milliseconds(500)) {
        self.loop = loop
        self.outputs = outputs
        self.blinkInterval = blinkInterval
    }

    deinit { if let blinkTimer { loop.cancel(blinkTimer) } }

    public func close() {
        if let blinkTimer { loop.cancel(blinkTimer) }
        blinkTimer = nil
    }

    public func apply(muted: Bool, handRaised: Bool, onStage: Bool, connection: ConnectionIndicator, linked: Bool = false,
                      ringing: Bool = false) {
        apply(State(muted: muted, handRaised: handRaised, onStage: onStage, connection: connection, linked: linked, ringing: ringing))
    }

    /// Whether the stage LED winks now: linked and steadily connected.
    private func winking(_ s: State) -> Bool { s.linked && (s.connection == .connected || s.connection == .idle) }

    public func apply(_ new: State) {
        guard new != state else { return }
        let old = state
        state = new
        if old?.connection != new.connection || old.map(winking) != winking(new) || old?.ringing != new.ringing {
            if let blinkTimer { loop.cancel(blinkTimer) }
            blinkTimer = nil
            blinkPhase = true
            winkTick = 0
            let steady: Duration? = switch new.connection {
            case .connected, .idle: winking(new) ? blinkInterval / 4 : nil
            case .connecting: blinkInterval
            case .failed: blinkInterval / 2
            }
            let interval = new.ringing ? blinkInterval / 4 : steady
            if let interval {
                blinkTimer = loop.schedule(after: interval, repeating: interval) { [weak self] in
                    guard let self else { return }
                    self.blinkPhase.toggle()
                    self.winkTick = (self.winkTick + 1) % Self.winkTicks
                    self.render()
                }
            }
        }
        render()
    }

    private func render() {
        guard let s = state else { return }
        write(.mute, s.muted)
        if s.ringing {
            write(.hand, blinkPhase)
            write(.stage, blinkPhase)
            return
        }
        switch s.connection {
        case .connected, .idle:
            write(.hand, s.handRaised)
            // Linked: flipped for the first tick of every `winkTicks`.
            write(.stage, s.onStage != (winking(s) && winkTick == 0))
        case .connecting:
            write(.hand, blinkPhase)
            write(.stage, blinkPhase)
        case .failed:
            write(.hand, blinkPhase)
            write(.stage, !blinkPhase)
        }
    }

    private func write(_ led: LEDID, _ on: Bool) {
        guard levels[led] != on else { return }
        levels[led] = on
        guard let out = outputs[led] else { return }
        do { try out.set(on) } catch { Log.error("\(error)") }
    }
}
