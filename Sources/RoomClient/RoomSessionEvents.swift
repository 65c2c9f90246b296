import RoomModel
import RoomProtocol
import RoomSystem

/// Messages from the server after `welcome`: answers to requests, the room's changes applied
/// to the local model and reported as events, and removal.
extension RoomSession {
    func handleMessage(_ message: SignalMessage) {
        switch message.body {
        case .ok(let requestID):
            if let request = pending.remove(id: requestID) {
                if request.type == "leave" {
                    finish(.left)
                    return
                }
                request.completion?(.success(()))
            }
        case .error(let info):
            let error = RoomRequestError(code: info.code, message: info.message)
            if let requestID = info.requestID, let request = pending.remove(id: requestID) {
                fail(id: requestID, type: request.type, completion: request.completion, error)
            } else {
                Log.warning("room: server error: \(error)")
            }
        case .pong(let t):
            let nowMs = Int64(monotonicNanoseconds() / 1_000_000)
            if t <= nowMs { statistics.lastSignalRTTMs = Int(nowMs - t) }
        case .participantJoined(let info):
            participants[info.id] = info
            if let s = info.ssrc { shownSSRCs[info.id] = s }
            emit(.participantJoined(info))
        case .participantLeft(let id, let reason):
            let old = participants.removeValue(forKey: id)
            // Its SRTP stream state goes with it, and its SSRC is refused from now on (see
            // departedSSRCs).
            if let ssrc = shownSSRCs.removeValue(forKey: id) {
                departedSSRCs.insert(ssrc)
                mediaCrypto?.downlink.forget(ssrc: ssrc)
            }
            emit(.participantLeft(id: id, reason: reason, participant: old))
        case .participantUpdated(let info):
            let old = participants[info.id]
            participants[info.id] = info
            if let s = info.ssrc { shownSSRCs[info.id] = s }
            emit(.participantUpdated(info))
            if info.id == joinInfo?.participantID { noteLocalChange(from: old, to: info, force: false) }
        case .stageRequest(let id):
            emit(.stageRequest(participantID: id))
        case .invited(let by):
            emit(.invited(by: by))
        case .activeSpeakers(let speakers):
            emit(.activeSpeakers(ids: speakers.ids, levels: speakers.levels))
        case .receiverLoss(let loss):
            emit(.receiverLoss(lostPermille: Int(loss.lostPermille), receivers: loss.receivers))
        case .appMessage(let m):
            emit(.appMessage(from: m.from, to: m.to, data: m.data))
        case .attributeChanged(let key, let value):
            if let value { attributes[key] = value } else { attributes.removeValue(forKey: key) }
            emit(.attributeChanged(key: key, value: value))
        case .tokenWillExpire(let expiresAt):
            emit(.tokenWillExpire(expiresAt: expiresAt))
        case .removed(let reason, let text):
            removed(reason, text)
        case .welcome:
            Log.warning("room: ignored a second welcome")
        default:
            // Client-only types coming from the server are ignored (protocol section 3).
            Log.debug("room: ignored \(message.body.typeName) from the server")
        }
    }

    /// Tracks this participant's role for the next hello and reports stage and mute changes.
    func noteLocalChange(from old: ParticipantInfo?, to new: ParticipantInfo, force: Bool) {
        askedRole = new.stage == .onStage ? .streamer : .audience
        if force || old?.stage != new.stage { emit(.localStageChanged(new.stage)) }
        if force || old?.muted != new.muted { emit(.localMuteChanged(new.muted)) }
    }

    private func removed(_ reason: RoomLeaveReason, _ text: String) {
        Log.warning("room: removed by the server: \(reason.rawValue)\(text.isEmpty ? "" : ": \(text)")")
        emit(.removed(reason: reason, message: text))
        switch reason {
        case .kicked, .replaced:
            finish(.removed(reason, message: text))
        case .tokenExpired:
            finish(.tokenExpired(message: text))
        case .roomClosed where configuration.rejoinAfterRoomClosed:
            // Usually a server shutting down for a restart: come back when it does. The
            // server forgot us, so join afresh (asking for the role held last).
            previousParticipantID = nil
            connectionLost("room closed")
        case .roomClosed:
            finish(.removed(reason, message: text))
        case .left, .timeout:
            connectionLost("removed: \(reason.rawValue)")
        }
    }
}
