import RoomModel
import RoomProtocol

// Room state machine types ↔ protocol messages. The enums are shared (their raw values are the wire
// spellings), so the mapping is mostly a matter of structure.

extension ParticipantInfo {
    /// `ssrc` is published only for streamers (docs/protocol.md, ParticipantInfo).
    init(_ info: RoomParticipantInfo, ssrc: UInt32?) {
        self.init(
            id: info.id, userID: info.userID, name: info.name, role: info.role, stage: info.stage,
            muted: info.muted, moderator: info.isModerator, ssrc: info.stage == .onStage ? ssrc : nil)
    }
}

extension ErrorCode {
    /// A join refused because the room holds `rooms.max_participants` already (a server
    /// extension of protocol 1's open set of codes; see docs/roomserver.md).
    public static let roomFull: ErrorCode = "room_full"
}

extension SignalMessage.Body {
    /// The room command a client request stands for, or nil for requests the server answers
    /// itself (hello, ping, refresh_token) and for server-only types.
    func roomCommand(from id: RoomParticipantID) -> RoomCommand? {
        switch self {
        case .leave: .leave(id)
        case .raiseHand: .raiseHand(id)
        case .lowerHand: .lowerHand(id)
        case .stepDown: .stepDown(id)
        case .acceptInvite: .acceptInvitation(id)
        case .declineInvite: .declineInvitation(id)
        case let .setMute(muted): .setMute(id, muted: muted)
        case let .approve(target): .approve(by: id, target: target)
        case let .deny(target): .deny(by: id, target: target)
        case let .invite(target): .invite(by: id, target: target)
        case let .demote(target): .demote(by: id, target: target)
        // A moderator's mute is soft: the participant may unmute itself later (nobody can
        // open someone else's microphone, and protocol 1 has no hard-mute flag).
        case let .muteParticipant(target): .muteParticipant(by: id, target: target, hard: false)
        case let .kick(target, _): .kick(by: id, target: target)
        case let .appMessage(message): .sendMessage(from: id, to: message.to, payload: Array(message.data.utf8))
        case let .setAttribute(key, value?): .setAttribute(by: id, key: key, value: value)
        case let .setAttribute(key, nil): .deleteAttribute(by: id, key: key)
        default: nil
        }
    }
}
