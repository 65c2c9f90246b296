import RoomClient
import RoomGPIO
import RoomModel
import RoomProtocol
import RoomSettings
import RoomSystem

/// The two buttons and three LEDs of the appliance. Buttons act on the room session; LEDs are
/// recomputed from the session's state on every room event and after every button action, so
/// the mute LED and the mute state never disagree, whoever changed the mute.
///
/// Mapping (docs/gpio.md): mute — short: toggle self mute; hand — short: raise the hand, lower
/// it again, accept an invitation, or step down when on stage; hand — long: leave the room, or
/// join it again when it was left. While a SIP call rings: hand — short: answer; a long press
/// of either button: decline. While a call is up (or dialing): a long press of either button
/// hangs up (the room is left with a long press only when there is no call).
final class Panel {
    /// Kept alive for as long as its lines: the simulated backend's outputs refer back to it.
    private let backend: GPIOBackend
    private let lines: GPIOLines
    private var buttons: Buttons?
    private let leds: LEDController
    private let room: RoomLink
    private var session: (any RoomBackend)? { room.session }
    /// Called after every button action (roomd records the mute state).
    var afterAction: (() -> Void)?
    /// Whether a second room is listened to (the stage LED winks).
    var isLinked: () -> Bool = { false }
    /// SIP calls: the buttons answer, decline and hang up; the LEDs flash while one rings.
    var calls: CallLink?
    /// The appliance's mute (`Appliance.isMuted` / `setMuted`): the mute button and LED.
    var isMuted: () -> Bool = { false }
    var setMuted: (Bool) -> Void = { _ in }

    /// nil when the board has no GPIO lines. Throws when the lines cannot be opened.
    init?(board: BoardGPIO, loop: EventLoop, room: RoomLink) throws(SystemError) {
        guard let backend = try GPIO.backend(for: board) else { return nil }
        self.backend = backend
        lines = try GPIOLines.open(board, backend: backend)
        leds = LEDController(loop: loop, outputs: lines.outputs)
        self.room = room
        buttons = try Buttons(loop: loop, inputs: lines.inputs) { [weak self] event in self?.pressed(event) }
        refresh()
    }

    func close() {
        buttons?.close()
        buttons = nil
        leds.close()
        lines.close()
    }

    private func pressed(_ event: Buttons.Event) {
        if let calls, calls.hasCall, callButton(event, calls) {
            refresh()
            afterAction?()
            return
        }
        if event == .shortPress(.mute), calls?.bridged == true || (session == nil && calls?.hasCall == true) {
            // The mic alone: a caller is bridged into the room, or a call runs without a room.
            setMuted(!isMuted())
            refresh()
            afterAction?()
            return
        }
        guard let session else {
            Log.info("button \(event): no room (no server configured)")
            return
        }
        switch event {
        case .shortPress(.mute):
            // Toggles what people see: after a moderator's mute the LED is on, so a press
            // unmutes (the room service refuses it only under a hard mute).
            let muted = session.isEffectivelyMuted
            Log.notice("mute button: \(muted ? "unmute" : "mute")")
            session.setMute(!muted)
        case .shortPress(.hand):
            switch session.localParticipant?.stage {
            case .onStage?: Log.notice("hand button: step down"); session.stepDown()
            case .handRaised?: Log.notice("hand button: lower hand"); session.lowerHand()
            case .invited?: Log.notice("hand button: accept invitation"); session.acceptInvite()
            default: Log.notice("hand button: raise hand"); session.raiseHand()
            }
        case .longPress(.hand):
            // Held again after leaving: join again, so the panel alone can undo its own leave.
            if case .disconnected = session.connectionState {
                Log.notice("hand button held: joining the room again")
                _ = room.rejoin()
            } else {
                Log.notice("hand button held: leaving the room")
                session.leave()
            }
        case .longPress(.mute):
            break  // reserved: a long press on mute does nothing yet
        }
        room.followSending()
        refresh()
        afterAction?()
    }

    /// What a button does to a call that rings or is up; false when the press is the room's.
    private func callButton(_ event: Buttons.Event, _ calls: CallLink) -> Bool {
        do throws(CallLink.Refusal) {
            switch (calls.phase, event) {
            case (.ringing, .shortPress(.hand)):
                Log.notice("hand button: answer the call")
                try calls.answer()
            case (.ringing, .longPress):
                Log.notice("button held: decline the call")
                try calls.decline()
            case (.dialing, .longPress), (.active, .longPress):
                Log.notice("button held: hang up")
                try calls.hangUp()
            default:
                return false
            }
        } catch {
            Log.warning("button: \(error)")
        }
        return true
    }

    private var ringing: Bool { if case .ringing = calls?.phase { true } else { false } }

    /// LEDs from the session's state (or "connected, idle" without a room).
    func refresh() {
        guard let session else {
            return leds.apply(muted: isMuted(), handRaised: false, onStage: false, connection: .idle, linked: isLinked(), ringing: ringing)
        }
        let me = session.localParticipant
        let connection: ConnectionIndicator
        switch session.connectionState {
        case .connected: connection = .connected
        case .disconnected(.left), .disconnected(.stopped), .idle: connection = .idle
        case .failed, .disconnected: connection = .failed
        default: connection = .connecting
        }
        // Out of the room the stage LEDs show nothing: the last stage the server told us
        // (still in the session's model) is no longer true.
        let present = connection == .connected
        leds.apply(muted: isMuted(),
                   handRaised: present && (me?.stage == .handRaised || me?.stage == .invited),
                   onStage: present && me?.stage == .onStage, connection: connection, linked: isLinked(), ringing: ringing)
    }
}
