import RoomModel
import RoomProtocol
import RoomSystem

// Room effects to the world: the events a `Room` returns become protocol messages (encoded once
// when everyone gets the same bytes, per recipient when personal), and a participant the room
// closed is detached from the server's maps and its connection closed after its last frames.

extension RoomServer {
    func execute(_ effects: [RoomEffect], in state: RoomState) {
        for effect in effects {
            switch effect {
            case let .send(event, recipients):
                send(event, to: recipients, in: state)
            case let .forwardMedia(id, on):
                Log.debug("roomserver: room \(state.key): forwarding of participant \(id) \(on ? "on" : "off")")
            case let .close(id, reason):
                guard let p = participants[id] else { continue }
                Log.info("roomserver: participant \(id) (\(p.claims.sub)) left room \(state.key): \(reason.rawValue)")
                detach(p)
            }
        }
        if state.room.isEmpty, state.emptySinceMs == nil { state.emptySinceMs = nowMs() }
    }

    /// Forgets a participant that is no longer in its room and closes its connection after
    /// its last frames (the `removed` event) are flushed.
    func detach(_ p: Participant) {
        participants[p.id] = nil
        if let address = p.mediaAddress, byAddress[address] === p { byAddress[address] = nil }
        p.mediaAddress = nil
        usedSSRCs.remove(p.ssrc)
        p.room.retiredSSRCs.insert(p.ssrc)
        p.room.members.removeAll { $0 === p }
        // Each listener's downlink session keeps a stream (replay window, cipher) per SSRC it
        // forwarded; a room with many comers and goers would pile them up for its whole life.
        for other in p.room.members { other.crypto?.downlink.forget(ssrc: p.ssrc) }
        if let s = p.session {
            s.participant = nil
            p.session = nil
            closeSession(s, flush: true)
        }
    }

    private func info(_ info: RoomParticipantInfo) -> ParticipantInfo {
        ParticipantInfo(info, ssrc: participants[info.id]?.ssrc)
    }

    func send(_ event: RoomEvent, to recipients: [RoomParticipantID], in state: RoomState) {
        func body(for id: RoomParticipantID) -> SignalMessage.Body? {
            switch event {
            case let .stateSync(snapshot):
                guard let p = participants[id] else { return nil }
                var attributes: [String: String] = [:]
                for a in snapshot.attributes { attributes[a.key] = a.value }
                return .welcome(.init(
                    participantID: id, room: state.key.name, ssrc: p.ssrc, udpPort: media?.localPort ?? 0,
                    mediaKey: p.mediaKey, policy: snapshot.policy, speakerLimit: snapshot.speakerLimit,
                    participants: snapshot.participants.map(info), attributes: attributes,
                    tokenExpiresAt: p.claims.exp, lossReportIntervalMs: Int(options.lossReportIntervalMs),
                    mediaEncryption: p.crypto?.keys, app: state.key.app))
            case let .participantJoined(i): return .participantJoined(info(i))
            case let .participantLeft(pid, reason): return .participantLeft(participantID: pid, reason: reason)
            case let .participantUpdated(i): return .participantUpdated(info(i))
            case let .stageRequest(pid): return .stageRequest(participantID: pid)
            case let .invited(by): return .invited(by: by)
            case let .activeSpeakers(ids):
                return .activeSpeakers(.init(ids: ids, levels: ids.map { participants[$0]?.level ?? 127 }))
            case let .message(from, payload, broadcast):
                return .appMessage(.init(from: from, to: broadcast ? nil : id, data: String(decoding: payload, as: UTF8.self)))
            case let .attributeChanged(key, value): return .attributeChanged(key: key, value: value)
            case .tokenWillExpire:
                guard let p = participants[id] else { return nil }
                return .tokenWillExpire(expiresAt: p.claims.exp)
            case let .removed(reason):
                let message = participants[id]?.kickMessage ?? Self.removalText(reason)
                return .removed(reason: reason, message: message)
            }
        }
        let personal: Bool
        switch event {
        case .stateSync, .message, .tokenWillExpire, .removed: personal = true
        default: personal = false
        }
        var shared: [UInt8]?
        for id in recipients {
            guard let s = participants[id]?.session else { continue }
            if personal || shared == nil {
                guard let b = body(for: id) else { continue }
                do {
                    let bytes = try FrameEncoder(maxFrameSize: options.maxFrameSize).encode(SignalMessage(b))
                    if !personal { shared = bytes }
                    write(bytes, to: s)
                } catch {
                    Log.error("roomserver: cannot encode \(b.typeName) for participant \(id): \(error)")
                }
            } else if let shared {
                write(shared, to: s)
            }
        }
    }

    static func removalText(_ reason: RoomLeaveReason) -> String {
        switch reason {
        case .kicked: "removed by a moderator"
        case .replaced: "the same user joined from another connection"
        case .tokenExpired: "the token expired"
        case .roomClosed: "the room was closed"
        case .left: "left"
        case .timeout: "connection lost"
        }
    }
}
