import RoomClient
import RoomModel
import RoomProtocol
import RoomSystem

/// Room events as log lines: what an installer reads in the journal to see the appliance join,
/// go on stage, lose the server and come back.
enum RoomEventLog {
    static func log(_ event: RoomSessionEvent) {
        switch event {
        // The session logs its own connection states and the join itself.
        case .stateChanged, .joined: break
        case .participantJoined(let p): Log.info("room: \(p.name) joined as \(p.role.rawValue)")
        case .participantLeft(let id, let reason, let p): Log.info("room: \(p?.name ?? "participant \(id)") left (\(reason.rawValue))")
        case .participantUpdated(let p): Log.debug("room: \(p.name): \(p.role.rawValue), \(p.stage.rawValue)\(p.muted ? ", muted" : "")")
        case .localStageChanged(let stage): Log.notice("room: we are now \(stage.rawValue)")
        case .localMuteChanged(let muted): Log.notice("room: \(muted ? "muted" : "unmuted")")
        case .invited(let by): Log.notice("room: invited on stage by participant \(by)")
        case .stageRequest(let id): Log.info("room: participant \(id) asks to speak")
        case .activeSpeakers(let ids, _): Log.debug("room: active speakers \(ids)")
        case .appMessage(let from, _, let data): Log.info("room: message from \(from.map { "\($0)" } ?? "server"): \(data.prefix(200))")
        case .attributeChanged(let key, let value): Log.info("room: attribute \(key) = \(value ?? "(deleted)")")
        case .tokenWillExpire(let at): Log.warning("room: token expires at \(at); refresh it")
        case .removed: break  // logged by the session
        case .requestFailed(let failure): Log.warning("room: request failed: \(failure)")
        case .receiverLoss(let permille, let receivers):
            Log.debug("room: listeners lose \(Double(permille) / 10) % of our packets (worst of \(receivers))")
        case .mediaPathChanged(let up): if up { Log.info("room: media path up") }  // silence is logged by the session
        }
    }
}
