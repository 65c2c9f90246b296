/// A room as roomd uses it, whatever serves it: our roomserver (`RoomSession`) or a WebRTC
/// media server (the Janus backend, `JanusRoomSession`). The daemon's buttons, LEDs, control
/// API, status and health read and drive a room only through this, so a backend is a module
/// chosen in roomd.conf (`room.backend`), not a fork of the daemon's session code.
///
/// The vocabulary is roomserver's (stage, hand, moderator actions) because it is the richer
/// one; a backend that has no equivalent for a request answers it with `unsupported` (a clear
/// sentence naming the backend), never pretends it happened. What maps to what for Janus is in
/// docs/janus.md. Event-loop thread only, like the sessions themselves.
public protocol RoomBackend: AnyObject {
    /// Events, on the loop thread. Set before `start()`.
    var onEvent: ((RoomSessionEvent) -> Void)? { get set }
    var connectionState: RoomConnectionState { get }
    var participants: [RoomParticipantID: ParticipantInfo] { get }
    var joinInfo: RoomJoinInfo? { get }
    var localParticipant: ParticipantInfo? { get }
    var isSelfMuted: Bool { get }
    /// Muted for the room, by itself or by a moderator: what the mute LED shows.
    var isEffectivelyMuted: Bool { get }
    /// Media flows both ways (roomserver: a binding answer; WebRTC: ICE and DTLS-SRTP up).
    var isMediaPathUp: Bool { get }
    /// Our audio goes out now (joined, on stage, not muted): the engine encodes only then.
    var isSendingMedia: Bool { get }
    var statistics: RoomSessionStatistics { get }
    /// "roomserver" or "janus": for status output and messages.
    var backendName: String { get }

    func start()
    /// Closes at once without telling the server.
    func stop()
    func leave(completion: RoomRequestCompletion?)
    /// Sends (or drops, counted) what the audio thread queued; called on its eventfd.
    func drainOutgoingMedia()
    /// The receivers' loss of each sender, for the senders' FEC; false when the room takes none.
    @discardableResult func reportLoss(ssrcs: [UInt32], lostPermille: [UInt16]) -> Bool

    @discardableResult func setMute(_ muted: Bool, completion: RoomRequestCompletion?) -> Int?
    @discardableResult func raiseHand(completion: RoomRequestCompletion?) -> Int?
    @discardableResult func lowerHand(completion: RoomRequestCompletion?) -> Int?
    @discardableResult func stepDown(completion: RoomRequestCompletion?) -> Int?
    @discardableResult func acceptInvite(completion: RoomRequestCompletion?) -> Int?
    @discardableResult func declineInvite(completion: RoomRequestCompletion?) -> Int?
    @discardableResult func approve(_ id: RoomParticipantID, completion: RoomRequestCompletion?) -> Int?
    @discardableResult func deny(_ id: RoomParticipantID, completion: RoomRequestCompletion?) -> Int?
    @discardableResult func invite(_ id: RoomParticipantID, completion: RoomRequestCompletion?) -> Int?
    @discardableResult func demote(_ id: RoomParticipantID, completion: RoomRequestCompletion?) -> Int?
    @discardableResult func muteParticipant(_ id: RoomParticipantID, completion: RoomRequestCompletion?) -> Int?
    @discardableResult func kick(_ id: RoomParticipantID, reason: String?, completion: RoomRequestCompletion?) -> Int?
    @discardableResult func sendMessage(to: RoomParticipantID?, data: String, completion: RoomRequestCompletion?) -> Int?
    @discardableResult func setAttribute(key: String, value: String?, completion: RoomRequestCompletion?) -> Int?
    @discardableResult func refreshToken(_ token: String, completion: RoomRequestCompletion?) -> Int?
}

/// The calls without a completion (the buttons'): a failure comes as a `requestFailed` event.
extension RoomBackend {
    public func leave() { leave(completion: nil) }
    @discardableResult public func setMute(_ muted: Bool) -> Int? { setMute(muted, completion: nil) }
    @discardableResult public func raiseHand() -> Int? { raiseHand(completion: nil) }
    @discardableResult public func lowerHand() -> Int? { lowerHand(completion: nil) }
    @discardableResult public func stepDown() -> Int? { stepDown(completion: nil) }
    @discardableResult public func acceptInvite() -> Int? { acceptInvite(completion: nil) }
    @discardableResult public func declineInvite() -> Int? { declineInvite(completion: nil) }
}

extension RoomRequestError {
    /// The local code for a request the room's backend has no equivalent for.
    public static let unsupported: ErrorCode = "unsupported"
}
