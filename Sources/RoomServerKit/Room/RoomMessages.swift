import RoomModel

// Commands into the room, and the effects (events to send, forwarding changes, connections
// to close) that come out. See Room.swift and docs/room-semantics.md.

/// Everything a join needs. The token has been verified elsewhere; the room trusts these
/// fields.
public struct RoomJoinRequest: Sendable, Equatable {
    public var participantID: RoomParticipantID
    public var userID: String
    public var name: String
    public var grants: RoomGrants
    public var desiredRole: RoomRole
    public var tokenExpiresAt: RoomInstant
    /// Set by a reconnecting client: its participant id in the session that was lost.
    public var previousParticipantID: RoomParticipantID?

    public init(participantID: RoomParticipantID, userID: String, name: String, grants: RoomGrants,
                desiredRole: RoomRole = .audience, tokenExpiresAt: RoomInstant,
                previousParticipantID: RoomParticipantID? = nil) {
        self.participantID = participantID
        self.userID = userID
        self.name = name
        self.grants = grants
        self.desiredRole = desiredRole
        self.tokenExpiresAt = tokenExpiresAt
        self.previousParticipantID = previousParticipantID
    }
}

/// A request to the room. The first participant id of each case is the one who asks
/// (`by:` for moderator commands); `nil` as actor means the server itself.
public enum RoomCommand: Sendable, Equatable {
    case join(RoomJoinRequest)
    /// Left on purpose (reason `left`).
    case leave(RoomParticipantID)
    /// The connection was lost (reason `timeout`); a reconnect within the grace period
    /// restores the stage state.
    case connectionLost(RoomParticipantID)

    // The participant's own stage commands.
    case raiseHand(RoomParticipantID)
    case lowerHand(RoomParticipantID)
    case acceptInvitation(RoomParticipantID)
    case declineInvitation(RoomParticipantID)
    case stepDown(RoomParticipantID)
    case setMute(RoomParticipantID, muted: Bool)

    // Moderator commands (the actor needs the moderate grant).
    case approve(by: RoomParticipantID, target: RoomParticipantID)
    case deny(by: RoomParticipantID, target: RoomParticipantID)
    case invite(by: RoomParticipantID, target: RoomParticipantID)
    case demote(by: RoomParticipantID, target: RoomParticipantID)
    /// Sets the target muted. `hard: true` also stops the target from unmuting itself; a
    /// later `hard: false` mute lifts that (the target then unmutes itself when it wants —
    /// nobody can open someone else's microphone).
    case muteParticipant(by: RoomParticipantID, target: RoomParticipantID, hard: Bool)
    case kick(by: RoomParticipantID, target: RoomParticipantID)

    /// An app message to one participant (`to`) or to everyone else (`to: nil`).
    case sendMessage(from: RoomParticipantID, to: RoomParticipantID?, payload: [UInt8])
    /// `by: nil` is the server. In moderated rooms only moderators may change attributes.
    case setAttribute(by: RoomParticipantID?, key: String, value: String)
    case deleteAttribute(by: RoomParticipantID?, key: String)
    /// The participant presented a new (verified) token.
    /// A new token for the participant: its expiry, and its grants (nil: unchanged, as for a
    /// resume). Fewer grants take effect at once: off stage without publish, no moderation
    /// without moderate.
    case refreshToken(RoomParticipantID, expiresAt: RoomInstant, grants: RoomGrants? = nil)
    /// Closes the room: everyone is removed with `room_closed`. `by: nil` is the server;
    /// a participant needs the moderate grant.
    case close(by: RoomParticipantID?)
}

/// What other participants (and the participant itself) see of a participant.
public struct RoomParticipantInfo: Sendable, Equatable {
    public var id: RoomParticipantID
    public var userID: String
    public var name: String
    public var stage: RoomStageState
    public var muted: Bool
    /// Muted by a moderator in a way the participant cannot undo.
    public var hardMuted: Bool
    public var isModerator: Bool
    public var mayPublishGrant: Bool

    public init(id: RoomParticipantID, userID: String, name: String, stage: RoomStageState, muted: Bool,
                hardMuted: Bool, isModerator: Bool, mayPublishGrant: Bool) {
        self.id = id
        self.userID = userID
        self.name = name
        self.stage = stage
        self.muted = muted
        self.hardMuted = hardMuted
        self.isModerator = isModerator
        self.mayPublishGrant = mayPublishGrant
    }

    /// Streamer exactly when on stage.
    public var role: RoomRole { stage == .onStage ? .streamer : .audience }
}

/// A room attribute (key/value).
public struct RoomAttribute: Sendable, Equatable {
    public var key: String
    public var value: String

    public init(key: String, value: String) {
        self.key = key
        self.value = value
    }
}

/// The full room state a newcomer receives.
public struct RoomSnapshot: Sendable, Equatable {
    /// The newcomer's own participant id.
    public var you: RoomParticipantID
    public var policy: RoomStagePolicy
    public var speakerLimit: Int
    /// In join order, including the newcomer.
    public var participants: [RoomParticipantInfo]
    /// Sorted by key.
    public var attributes: [RoomAttribute]
    public var activeSpeakers: [RoomParticipantID]
    /// Raised hands, oldest first.
    public var handQueue: [RoomParticipantID]

    // Built only by `Room` (the synthesized memberwise initializer, internal to the module).
}

/// An event for participants.
public enum RoomEvent: Sendable, Equatable {
    /// To a newcomer: everything it needs (participants, attributes, speakers).
    case stateSync(RoomSnapshot)
    case participantJoined(RoomParticipantInfo)
    case participantLeft(RoomParticipantID, reason: RoomLeaveReason)
    /// Stage, role or mute changed.
    case participantUpdated(RoomParticipantInfo)
    /// To moderators: this participant raised its hand and waits for approval.
    case stageRequest(RoomParticipantID)
    /// To the invited participant: a moderator invites it on stage (ring, then accept or
    /// decline). Everyone also gets `participantUpdated` with stage `invited`.
    case invited(by: RoomParticipantID)
    /// The active speakers changed; loudest first.
    case activeSpeakers([RoomParticipantID])
    /// An app message; `broadcast` tells whether it went to everyone or only to the receiver.
    case message(from: RoomParticipantID, payload: [UInt8], broadcast: Bool)
    /// `value: nil` means the key was deleted.
    case attributeChanged(key: String, value: String?)
    /// To the token's owner, once per token: refresh before `expiresAt`.
    case tokenWillExpire(expiresAt: RoomInstant)
    /// To the participant being removed by the server, just before its connection closes.
    case removed(reason: RoomLeaveReason)
}

/// Something the server must do after a command or a tick, in order.
public enum RoomEffect: Sendable, Equatable {
    /// Send `event` to each listed participant (in join order; never empty).
    case send(RoomEvent, to: [RoomParticipantID])
    /// Start (true) or stop (false) forwarding this participant's media to the others.
    /// The set of participants with forwarding on is always `Room.forwardedSpeakers`.
    case forwardMedia(RoomParticipantID, Bool)
    /// Close this participant's connection; it is no longer in the room.
    case close(RoomParticipantID, reason: RoomLeaveReason)
}
