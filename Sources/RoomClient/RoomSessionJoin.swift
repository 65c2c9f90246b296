import RoomModel
import RoomProtocol
import RoomSystem

/// Joining: the server's answer to `hello` (`welcome`, or an error that decides how to retry),
/// the `welcome` applied to the local model and media, and the joined connection's tick
/// (ping, silence).
extension RoomSession {
    func handleHandshake(_ message: SignalMessage) {
        switch message.body {
        case .welcome(let welcome):
            joined(welcome)
        case .error(let info):
            let reason = "hello refused: \(info.code.rawValue): \(info.message)"
            switch info.code {
            case .tokenExpired:
                finish(.tokenExpired(message: info.message))
            case .missingGrant where askedRole == .streamer:
                // Asking for the previous role is "when allowed": fall back to audience.
                askedRole = .audience
                attemptFailed(reason)
            case .badSignature, .unknownKey, .malformedToken, .wrongRoom, .tokenNotYetValid, .missingGrant,
                .unsupportedVersion:
                // Retrying the same hello at once will not help; say so now, keep trying slowly
                // (server keys may be rotated, clocks corrected, a new token given).
                attemptFailed(reason, fatal: true)
            default:
                attemptFailed(reason)
            }
        case .pong, .appMessage:
            break
        default:
            Log.debug("room: ignored \(message.body.typeName) before welcome")
        }
    }

    private func joined(_ welcome: SignalMessage.Welcome) {
        cancelTimer(&handshakeTimer)
        let restored = previousParticipantID == welcome.participantID
        let info = RoomJoinInfo(
            room: welcome.room, participantID: welcome.participantID, ssrc: welcome.ssrc, policy: welcome.policy,
            speakerLimit: welcome.speakerLimit, participants: welcome.participants, attributes: welcome.attributes,
            tokenExpiresAt: welcome.tokenExpiresAt, restored: restored, isRejoin: joinedBefore,
            lossReportIntervalMs: welcome.lossReportIntervalMs, app: welcome.app)
        let oldMe = localParticipant
        phase = .joined
        joinInfo = info
        participants = Dictionary(welcome.participants.map { ($0.id, $0) }, uniquingKeysWith: { _, b in b })
        shownSSRCs = [:]
        for p in welcome.participants { if let s = p.ssrc { shownSSRCs[p.id] = s } }
        attributes = welcome.attributes
        previousParticipantID = welcome.participantID
        joinedBefore = true
        reconnect.joined()
        statistics.joins += 1
        let now = monotonicNanoseconds()
        lastReceivedNs = now
        lastPingNs = now
        startMedia(welcome)
        let tick = min(configuration.pingInterval, configuration.silenceTimeout / 4, configuration.bindingInterval)
        tickTimer = loop.schedule(after: tick, repeating: tick) { [weak self] in self?.tick() }
        Log.notice("room: joined \(welcome.room) as participant \(welcome.participantID)\(restored ? " (restored)" : "") via \(serverAddress.map { "\($0)" } ?? "?")")
        setState(.connected)
        emit(.joined(info))
        if let me = localParticipant {
            noteLocalChange(from: oldMe, to: me, force: true)
            // A fresh join lost any self mute: ask again.
            if isSelfMuted && !me.muted { sendRequest(.setMute(muted: true), completion: nil) }
        }
    }

    private func tick() {
        let now = monotonicNanoseconds()
        guard phase == .joined || phase == .leaving else { return }
        if now &- lastReceivedNs >= configuration.silenceTimeout.monotonicNanosecondCount {
            connectionLost("server silent for \(configuration.silenceTimeout)")
            return
        }
        if now &- lastPingNs >= configuration.pingInterval.monotonicNanosecondCount {
            lastPingNs = now
            send(SignalMessage(.ping(t: Int64(now / 1_000_000))))
        }
        mediaTick(now: now)
    }
}
