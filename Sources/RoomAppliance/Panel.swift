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
/// join it again when it was left.
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

    /// LEDs from the session's state (or "connected, idle" without a room).
    func refresh() {
        guard let session else { return leds.apply(muted: false, handRaised: false, onStage: false, connection: .idle, linked: isLinked()) }
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
        leds.apply(muted: session.isEffectivelyMuted,
                   handRaised: present && (me?.stage == .handRaised || me?.stage == .invited),
                   onStage: present && me?.stage == .onStage, connection: connection, linked: isLinked())
    }
}
