import RoomModel

/// The state of one voice room, as the room server keeps it: who is in, who is on stage,
/// raised hands, mutes, attributes, token deadlines and the active speakers.
///
/// A deterministic state machine with no I/O and no clock: the server feeds it commands
/// (`handle`), audio levels from the RTP forwarder (`updateAudioLevel`) and the time
/// (`tick`, every 200–300 ms), and carries out the effects it returns, in order. The same
/// inputs always give the same effects (iteration is in join order, never hash order).
///
/// A command either succeeds completely or throws a `RoomError` and changes nothing.
///
/// The forwarder asks `mayPublish(_:)` before accepting a participant's media (audience
/// members and muted participants are dropped) and sends the streams of
/// `forwardedSpeakers` (at most `config.topN`) to every listener except their own sender.
///
/// docs/room-semantics.md describes every rule and the reasons for the choices.
public struct Room: Sendable, Equatable {
    public let config: RoomConfig
    /// True after `close`; every later command throws `room_closed`.
    public private(set) var isClosed = false

    struct Member: Sendable, Equatable {
        var id: RoomParticipantID
        var userID: String
        var name: String
        var grants: RoomGrants
        var stage: RoomStageState
        var muted = false
        var hardMuted = false
        var tokenExpiresAt: RoomInstant
        var warnedExpiry = false
        /// Smoothed loudness, 0 (silence) ... 127 (loudest); 127 - dBov.
        var level: Double = 0
        var lastVoicedAt: RoomInstant?
        /// When it last entered the active-speaker set.
        var activeSince: RoomInstant?
        /// Since when it has been talking outside a full set (`RoomConfig.speakerTurnMs`).
        var waitingSince: RoomInstant?
        /// It lost its place to a turn while still talking: until it pauses, it comes back by
        /// its own turn or into a free place, not by claiming to be louder.
        var turnTaken = false

        var mayPublish: Bool { stage == .onStage && !muted }

        var info: RoomParticipantInfo {
            RoomParticipantInfo(id: id, userID: userID, name: name, stage: stage, muted: muted,
                                hardMuted: hardMuted, isModerator: grants.moderate,
                                mayPublishGrant: grants.publish)
        }
    }

    /// What is kept of a participant whose connection was lost, for a reconnect.
    struct Departed: Sendable, Equatable {
        var userID: String
        var stage: RoomStageState
        var muted: Bool
        var hardMuted: Bool
        var at: RoomInstant
    }

    var members: [RoomParticipantID: Member] = [:]
    /// Participant ids in join order: the order of every iteration.
    var order: [RoomParticipantID] = []
    /// Raised hands in the order they were raised (exactly the `hand_raised` participants).
    var queue: [RoomParticipantID] = []
    var attrs: [String: String]
    var departed: [RoomParticipantID: Departed] = [:]
    /// Active speakers, loudest first as of the last selection.
    var active: [RoomParticipantID] = []
    /// The active speakers last announced in an `active_speakers` event.
    var announcedActive: [RoomParticipantID] = []
    /// Participants whose media is forwarded, in the order they were added.
    var forwarded: [RoomParticipantID] = []

    /// Throws `invalid_config` / `attribute_limit` for a config that cannot work.
    public init(config: RoomConfig) throws(RoomError) {
        try config.validate()
        self.config = config
        attrs = config.attributes
    }

    // MARK: - Queries

    /// Participants in join order.
    public var participants: [RoomParticipantInfo] { order.map { members[$0]!.info } }

    public func participant(_ id: RoomParticipantID) -> RoomParticipantInfo? { members[id]?.info }

    /// The participant with this user id, if present.
    public func participant(userID: String) -> RoomParticipantInfo? {
        order.lazy.compactMap { self.members[$0] }.first { $0.userID == userID }?.info
    }

    public var count: Int { order.count }
    public var isEmpty: Bool { order.isEmpty }

    /// True when media from this participant may be forwarded at all: it is on stage
    /// (streamer) and not muted. Media from anyone else is dropped.
    public func mayPublish(_ id: RoomParticipantID) -> Bool { members[id]?.mayPublish ?? false }

    /// The streams the forwarder sends (each to every listener but its sender), sorted by
    /// id; at most `config.topN`, all of them `mayPublish`.
    public var forwardedSpeakers: [RoomParticipantID] { forwarded.sorted() }

    public func isForwarded(_ id: RoomParticipantID) -> Bool { forwarded.contains(id) }

    /// The active speakers (talking now, or within the hold time), loudest first as of the
    /// last `tick`; at most `config.topN`, all of them forwarded.
    public var activeSpeakers: [RoomParticipantID] { active }

    /// Raised hands, oldest first.
    public var handQueue: [RoomParticipantID] { queue }

    public var onStageCount: Int { order.reduce(0) { $0 + (members[$1]!.stage == .onStage ? 1 : 0) } }

    /// Attributes sorted by key.
    public var attributes: [RoomAttribute] {
        attrs.keys.sorted().map { RoomAttribute(key: $0, value: attrs[$0]!) }
    }

    /// What a newcomer (or a participant asking for a resync) receives.
    public func snapshot(for id: RoomParticipantID) -> RoomSnapshot {
        RoomSnapshot(you: id, policy: config.policy, speakerLimit: config.speakerLimit,
                     participants: participants, attributes: attributes,
                     activeSpeakers: active, handQueue: queue)
    }

    // MARK: - Commands

    /// Applies one command at time `now`. Returns the effects to carry out, in order, or
    /// throws and leaves the room exactly as it was.
    public mutating func handle(_ command: RoomCommand, now: RoomInstant) throws(RoomError) -> [RoomEffect] {
        if isClosed { throw RoomError(.roomClosed, "the room is closed") }
        // Work on a copy so a refusal half-way can never leave a partial change behind.
        var draft = self
        var out = Effects()
        try draft.apply(command, now: now, out: &out)
        draft.settle(now: now, out: &out)
        self = draft
        return out.list
    }

    /// Advances time: token warnings and expiries, reconnect grace, active-speaker
    /// selection. Call every 200–300 ms.
    public mutating func tick(now: RoomInstant) -> [RoomEffect] {
        if isClosed { return [] }
        var out = Effects()
        var expired: [RoomParticipantID] = []
        for id in order {
            let m = members[id]!
            if now >= m.tokenExpiresAt {
                expired.append(id)
            } else if !m.warnedExpiry, case let left = m.tokenExpiresAt.subtractingReportingOverflow(now),
                      !left.overflow && left.partialValue <= config.tokenWarningMs {
                members[id]!.warnedExpiry = true
                out.send(.tokenWillExpire(expiresAt: m.tokenExpiresAt), to: [id])
            }
        }
        for id in expired { remove(id, reason: .tokenExpired, now: now, out: &out) }
        departed = departed.filter { now - $0.value.at <= config.reconnectGraceMs }
        selectSpeakers(now: now)
        settle(now: now, out: &out)
        return out.list
    }

    /// Feeds one RFC 6464 client-to-mixer audio level (`level` in -dBov, 0 loudest,
    /// 127 silence) with its voice-activity flag. Reports for participants that may not
    /// publish are ignored. Produces no effects; `tick` acts on it.
    public mutating func updateAudioLevel(_ id: RoomParticipantID, level: UInt8, voice: Bool, now: RoomInstant) {
        guard let m = members[id], m.mayPublish else { return }
        let loudness = Double(127 - Int(min(level, 127)))
        members[id]!.level = m.level + (loudness - m.level) * config.levelSmoothing
        if voice { members[id]!.lastVoicedAt = now }
    }

    // MARK: - Applying commands

    private mutating func apply(_ command: RoomCommand, now: RoomInstant, out: inout Effects) throws(RoomError) {
        switch command {
        case .join(let request):
            try join(request, now: now, out: &out)

        case .leave(let id):
            _ = try member(id)
            remove(id, reason: .left, now: now, out: &out)

        case .connectionLost(let id):
            _ = try member(id)
            remove(id, reason: .timeout, now: now, out: &out)

        case .raiseHand(let id):
            let m = try member(id)
            guard m.grants.publish else { throw RoomError(.missingGrant, "participant \(id) has no publish grant") }
            try expect(m, .off, "raise a hand")
            if autoApproved(m) && onStageCount < config.speakerLimit {
                setStage(id, .onStage, out: &out)
            } else {
                raiseHand(id, out: &out)
            }

        case .lowerHand(let id):
            try expect(member(id), .handRaised, "lower a hand")
            setStage(id, .off, out: &out)

        case .acceptInvitation(let id):
            try expect(member(id), .invited, "accept an invitation")
            try requireSlot()
            setStage(id, .onStage, out: &out)

        case .declineInvitation(let id):
            try expect(member(id), .invited, "decline an invitation")
            setStage(id, .off, out: &out)

        case .stepDown(let id):
            try expect(member(id), .onStage, "step down")
            setStage(id, .off, out: &out)

        case .setMute(let id, let muted):
            let m = try member(id)
            if !muted && m.hardMuted {
                throw RoomError(.invalidState, "participant \(id) is hard-muted by a moderator and cannot unmute")
            }
            if m.muted != muted {
                members[id]!.muted = muted
                updated(id, out: &out)
            }

        case .approve(let by, let target):
            let t = try moderatorAndTarget(by, target)
            try expect(t, .handRaised, "be approved")
            try requireSlot()
            setStage(target, .onStage, out: &out)

        case .deny(let by, let target):
            let t = try moderatorAndTarget(by, target)
            try expect(t, .handRaised, "be denied")
            setStage(target, .off, out: &out)

        case .invite(let by, let target):
            let t = try moderatorAndTarget(by, target)
            try expect(t, .off, "be invited")
            guard t.grants.publish else {
                throw RoomError(.missingGrant, "participant \(target) has no publish grant and cannot be invited")
            }
            setStage(target, .invited, out: &out)
            out.send(.invited(by: by), to: [target])

        case .demote(let by, let target):
            let t = try moderatorAndTarget(by, target)
            try expect(t, .onStage, "be demoted")
            setStage(target, .off, out: &out)

        case .muteParticipant(let by, let target, let hard):
            let t = try moderatorAndTarget(by, target)
            if !t.muted || t.hardMuted != hard {
                members[target]!.muted = true
                members[target]!.hardMuted = hard
                updated(target, out: &out)
            }

        case .kick(let by, let target):
            _ = try moderatorAndTarget(by, target)
            remove(target, reason: .kicked, now: now, out: &out)

        case .sendMessage(let from, let to, let payload):
            _ = try member(from)
            if let to {
                _ = try member(to)
                out.send(.message(from: from, payload: payload, broadcast: false), to: [to])
            } else {
                out.send(.message(from: from, payload: payload, broadcast: true), to: order.filter { $0 != from })
            }

        case .setAttribute(let by, let key, let value):
            try mayChangeAttributes(by)
            try RoomConfig.checkAttribute(key: key, value: value)
            if attrs[key] == nil && attrs.count >= RoomConfig.maxAttributes {
                throw RoomError(.attributeLimit, "the room already has \(attrs.count) attributes, at most \(RoomConfig.maxAttributes)")
            }
            if attrs[key] != value {
                attrs[key] = value
                out.send(.attributeChanged(key: key, value: value), to: order)
            }

        case .deleteAttribute(let by, let key):
            try mayChangeAttributes(by)
            if attrs.removeValue(forKey: key) != nil {
                out.send(.attributeChanged(key: key, value: nil), to: order)
            }

        case .refreshToken(let id, let expiresAt, let grants):
            let m = try member(id)
            members[id]!.tokenExpiresAt = expiresAt
            members[id]!.warnedExpiry = false
            // The new token's grants replace the old ones (a service that revokes a grant by
            // issuing a token without it: before, the old grants stayed in force for the session).
            if let grants, grants != m.grants {
                members[id]!.grants = grants
                if !grants.publish && m.stage != .off {
                    setStage(id, .off, out: &out)   // sends the update
                } else {
                    updated(id, out: &out)
                }
            }

        case .close(let by):
            if let by {
                let m = try member(by)
                guard m.grants.moderate else { throw RoomError(.notModerator, "participant \(by) may not close the room") }
            }
            for id in order { remove(id, reason: .roomClosed, now: now, out: &out) }
            departed = [:]
            isClosed = true
        }
    }

    private mutating func join(_ r: RoomJoinRequest, now: RoomInstant, out: inout Effects) throws(RoomError) {
        let id = r.participantID
        if members[id] != nil { throw RoomError(.invalidState, "participant \(id) is already in the room") }
        if r.desiredRole == .streamer && !r.grants.publish {
            throw RoomError(.missingGrant, "the streamer role needs the publish grant")
        }
        // A reconnect: the previous session is still here (the server has not noticed the
        // loss yet) or was lost within the grace period; same user only.
        var restore: Departed?
        if let prev = r.previousParticipantID {
            if let old = members[prev], old.userID == r.userID {
                restore = Departed(userID: old.userID, stage: old.stage, muted: old.muted,
                                   hardMuted: old.hardMuted, at: now)
            } else if let d = departed[prev], d.userID == r.userID, now - d.at <= config.reconnectGraceMs {
                restore = d
            }
            if restore != nil { departed[prev] = nil }
        }
        // One session per user: the older one is replaced. Its stage slot is not handed to
        // the queue (settle runs after the newcomer is placed), so a reconnect keeps it.
        if let old = order.first(where: { members[$0]!.userID == r.userID }) {
            remove(old, reason: .replaced, now: now, out: &out)
        }

        var m = Member(id: id, userID: r.userID, name: r.name, grants: r.grants, stage: .off,
                       tokenExpiresAt: r.tokenExpiresAt)
        let wanted: RoomStageState
        if let restore {
            m.muted = restore.muted
            m.hardMuted = restore.hardMuted
            wanted = restore.stage
        } else {
            wanted = r.desiredRole == .streamer ? .onStage : .off
        }
        // A restored on-stage participant was already allowed on stage (approved, in a
        // moderated room); a fresh one needs auto-approval.
        let approved = autoApproved(m) || (restore?.stage == .onStage)
        var requestStage = false
        if m.grants.publish {
            switch wanted {
            case .off: m.stage = .off
            case .invited: m.stage = .invited
            case .onStage where approved && onStageCount < config.speakerLimit: m.stage = .onStage
            case .onStage, .handRaised:
                m.stage = .handRaised
                requestStage = true
            }
        }
        members[id] = m
        order.append(id)
        if m.stage == .handRaised { queue.append(id) }

        out.send(.stateSync(snapshot(for: id)), to: [id])
        out.send(.participantJoined(m.info), to: order.filter { $0 != id })
        if requestStage && config.policy == .moderated { out.send(.stageRequest(id), to: moderators) }
    }

    // MARK: - Helpers

    private func member(_ id: RoomParticipantID) throws(RoomError) -> Member {
        guard let m = members[id] else { throw RoomError(.unknownParticipant, "participant \(id) is not in the room") }
        return m
    }

    private func moderatorAndTarget(_ by: RoomParticipantID, _ target: RoomParticipantID) throws(RoomError) -> Member {
        let actor = try member(by)
        guard actor.grants.moderate else { throw RoomError(.notModerator, "participant \(by) is not a moderator") }
        return try member(target)
    }

    private func expect(_ m: Member, _ state: RoomStageState, _ action: String) throws(RoomError) {
        guard m.stage == state else {
            throw RoomError(.invalidState,
                            "participant \(m.id) is \(m.stage.rawValue); only a participant \(state.rawValue) can \(action)")
        }
    }

    private func requireSlot() throws(RoomError) {
        let n = onStageCount
        guard n < config.speakerLimit else {
            throw RoomError(.speakerLimit, "the stage is full (\(n) of \(config.speakerLimit) speakers)")
        }
    }

    private func mayChangeAttributes(_ by: RoomParticipantID?) throws(RoomError) {
        guard let by else { return }
        let m = try member(by)
        if config.policy == .moderated && !m.grants.moderate {
            throw RoomError(.notModerator, "in a moderated room only moderators change attributes")
        }
    }

    /// Goes on stage without asking anyone: anyone with the publish grant in an open
    /// room, a moderator in a moderated room.
    private func autoApproved(_ m: Member) -> Bool {
        m.grants.publish && (config.policy == .open || m.grants.moderate)
    }

    private var moderators: [RoomParticipantID] { order.filter { members[$0]!.grants.moderate } }

    private mutating func raiseHand(_ id: RoomParticipantID, out: inout Effects) {
        setStage(id, .handRaised, out: &out)
        if config.policy == .moderated { out.send(.stageRequest(id), to: moderators) }
    }

    /// Changes a stage state, keeps the hand queue in step and tells everyone.
    private mutating func setStage(_ id: RoomParticipantID, _ stage: RoomStageState, out: inout Effects) {
        let old = members[id]!.stage
        if old == stage { return }
        if old == .handRaised { queue.removeAll { $0 == id } }
        if stage == .handRaised { queue.append(id) }
        members[id]!.stage = stage
        updated(id, out: &out)
    }

    private func updated(_ id: RoomParticipantID, out: inout Effects) {
        out.send(.participantUpdated(members[id]!.info), to: order)
    }

    private mutating func remove(_ id: RoomParticipantID, reason: RoomLeaveReason, now: RoomInstant, out: inout Effects) {
        guard let m = members.removeValue(forKey: id) else { return }
        order.removeAll { $0 == id }
        queue.removeAll { $0 == id }
        active.removeAll { $0 == id }
        if reason.isServerInitiated { out.send(.removed(reason: reason), to: [id]) }
        if forwarded.contains(id) {
            forwarded.removeAll { $0 == id }
            out.list.append(.forwardMedia(id, false))
        }
        out.list.append(.close(id, reason: reason))
        if reason != .roomClosed { out.send(.participantLeft(id, reason: reason), to: order) }
        if reason == .timeout {
            departed[id] = Departed(userID: m.userID, stage: m.stage, muted: m.muted, hardMuted: m.hardMuted, at: now)
        }
    }

    /// Runs after every command and tick: promotes queued hands into free slots, drops
    /// speaker state of participants that may no longer publish, brings the forwarded set
    /// in line and announces active-speaker changes.
    private mutating func settle(now: RoomInstant, out: inout Effects) {
        // FIFO promotion of auto-approved raised hands.
        while onStageCount < config.speakerLimit,
              let next = queue.first(where: { autoApproved(members[$0]!) }) {
            setStage(next, .onStage, out: &out)
        }
        for id in order where !members[id]!.mayPublish {
            let m = members[id]!
            if m.level != 0 || m.lastVoicedAt != nil || m.activeSince != nil || m.waitingSince != nil || m.turnTaken {
                members[id]!.level = 0
                members[id]!.lastVoicedAt = nil
                members[id]!.activeSince = nil
                members[id]!.waitingSince = nil
                members[id]!.turnTaken = false
            }
        }
        active.removeAll { !members[$0]!.mayPublish }
        updateForwarding(out: &out)
        if Set(active) != Set(announcedActive) {
            announcedActive = active
            out.send(.activeSpeakers(active), to: order)
        }
    }
}

/// Collects effects; drops sends with no recipient.
struct Effects {
    var list: [RoomEffect] = []

    mutating func send(_ event: RoomEvent, to recipients: [RoomParticipantID]) {
        if !recipients.isEmpty { list.append(.send(event, to: recipients)) }
    }
}
