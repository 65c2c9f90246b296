import RoomAudio
import RoomBase
import RoomClient
import RoomControl
import RoomDSP
import RoomJSON
import RoomMedia
import RoomModel
import RoomProtocol
import RoomSettings
import RoomSIP
import RoomSystem

/// Maps the control API (docs/control-api.md) onto the room session and the engine, and room
/// events onto control events, so roomctl, scripts and the rig see what the room sees.
/// Lives on the event-loop thread with the session.
final class ControlBridge {
    private unowned let appliance: Appliance
    private var engine: AudioEngine { appliance.engine }
    private var session: (any RoomBackend)? { appliance.session }
    private var server: ControlServer?
    /// Per-participant playback volume in dB, applied to the participant's SSRC when known.
    /// Kept for the room session only: participant ids are new at every join (docs/config.md).
    private var volumes: [UInt32: Float] = [:]

    init(path: String, group: GroupID?, appliance: Appliance) throws(SystemError) {
        self.appliance = appliance
        server = try ControlServer(configuration: .init(path: path, group: group), loop: appliance.loop) { [weak self] request, reply in
            guard let self else { return reply(.failure(ControlError(.internal, "shutting down"))) }
            self.handle(request.command, reply: reply)
            self.appliance.noteMuteState()
        }
    }

    func close() { server?.close(); server = nil }

    func setAllowedGroup(_ group: GroupID?) throws(SystemError) { try server?.setAllowedGroup(group) }

    /// A reload (SIGHUP or roomctl) changed settings: subscribers see a `config` event.
    func reloaded(_ r: Appliance.ReloadReport) {
        guard !r.applied.isEmpty || !r.rejoined.isEmpty else { return }
        server?.broadcast(event: "config", ["what": .string("reload"), "keys": .array((r.applied + r.rejoined).map(JSONValue.string))])
    }

    /// The settings' room refused (a placement that does not verify, an unreadable token) →
    /// a `room_refused` event; the appliance stays where it was.
    func roomRefused(_ reason: String) {
        server?.broadcast(event: "room_refused", ["reason": .string(reason)])
    }

    // MARK: requests

    private func handle(_ command: ControlCommand, reply: @escaping (ControlResult) -> Void) {
        if [.mute, .unmute, .toggleMute].contains(command), appliance.calls.bridged || (session == nil && appliance.calls.hasCall) {
            // The mic alone: a caller is bridged into the room, or a call runs without a room.
            appliance.setMuted(command == .mute || (command == .toggleMute && !appliance.isMuted)) { _ in }
            return reply(.ok)
        }
        switch command {
        case .status: reply(.success(status()))
        case .version: reply(.success(["version": .string(roomdVersion)]))
        case .participants: reply(.success(["participants": .array(participants())]))
        case .stats: reply(.success(stats()))
        case .logLevel(let name):
            guard appliance.setLogLevel(name) else { return reply(.failure(ControlError(.badRequest, "args.level: unknown level \(name)"))) }
            server?.broadcast(event: "config", ["what": .string("log_level"), "value": .string(name)])
            reply(.ok)
        case .volume(let participant, let dB):
            if let participant {
                // Remembered by participant: its SSRC is known only once it is on stage.
                volumes[participant] = Float(dB)
                applyVolume(participant)
            } else {
                appliance.setMasterVolume(dB: dB)
            }
            var fields: [String: JSONValue] = ["what": .string("volume"), "db": .double(dB)]
            if let participant { fields["participant"] = .int(Int(participant)) }
            server?.broadcast(event: "config", fields)
            reply(.ok)
        case .profile(let profile):
            appliance.setProfile(profile)
            server?.broadcast(event: "config", ["what": .string("profile"), "value": .string(profile.rawValue)])
            reply(.ok)
        case .selfTest:
            appliance.selfTest.start(reply: reply)
        case .call, .answer, .decline, .hangUp, .hold, .resume, .dtmf, .bridge:
            reply(callCommand(command))

        case .reload:
            switch appliance.reloadAndLog(origin: "roomctl reload") {
            case .success(let r):
                reply(.success(["config": appliance.settings.configPath.map(JSONValue.string) ?? .null,
                                "applied": .array(r.applied.map(JSONValue.string)),
                                "rejoined": .array(r.rejoined.map(JSONValue.string)),
                                "restart_needed": .array(r.restartNeeded.map(JSONValue.string)),
                                "overridden": .array(r.unchangedInEffect.map(JSONValue.string))]))
            case .failure(let e):
                reply(.failure(ControlError(.configError, "\(e)")))
            }
        case .join(let servers, let token, let role):
            let addresses: [HostPort]?
            switch Self.serverAddresses(servers) {
            case .success(let parsed): addresses = parsed
            case .failure(let error): return reply(.failure(error))
            }
            if let problem = appliance.secretsStayWithTheirServer(addresses: addresses, token: token) {
                return reply(.failure(.badRequest(field: "args.server", problem)))
            }
            do {
                try appliance.join(addresses: addresses, token: token, role: role)
                reply(.ok)
            } catch {
                reply(.failure(.notInRoom(error.description)))
            }
        case .listen(let room, let servers, let token, let gainDB, let backend, let pin):
            if servers == nil, pin == nil, appliance.listening?.room == room {
                // The room listened to already: only the gain changes (no rejoin, no gap; a
                // token given again is not needed).
                appliance.setListenGain(dB: gainDB)
                return reply(.ok)
            }
            switch backend {
            case .roomserver:
                guard let token else {
                    return reply(.failure(.badRequest(field: "args.token", "a token for room \"\(room)\" is needed (roomctl listen \(room) --token-file FILE)")))
                }
                do {
                    let claims = try RoomTokenVerifier.unverifiedClaims(token)
                    guard claims.room == room else {
                        return reply(.failure(.badRequest(field: "args.room", "the token is for room \"\(claims.room)\", not \"\(room)\"")))
                    }
                } catch {
                    return reply(.failure(.badRequest(field: "args.token", "\(error)")))
                }
            case .janus:
                guard UInt64(room) != nil else {
                    return reply(.failure(.badRequest(field: "args.room", "a Janus AudioBridge room is a number, not \"\(room)\"")))
                }
                guard servers != nil || appliance.settings.effective.backend == .janus else {
                    return reply(.failure(.badRequest(field: "args.server", "the Janus server is needed (roomctl listen \(room) --backend janus --server host:port)")))
                }
            }
            let addresses: [HostPort]?
            switch Self.serverAddresses(servers) {
            case .success(let parsed): addresses = parsed
            case .failure(let error): return reply(.failure(error))
            }
            do {
                try appliance.listen(room: room, addresses: addresses, serverText: servers, token: token, gainDB: gainDB,
                                     backend: backend, pin: pin)
                reply(.ok)
            } catch {
                reply(.failure(.notInRoom(error.description)))
            }
        case .unlisten:
            guard appliance.unlisten() else { return reply(.failure(.notInRoom("not listening to a second room"))) }
            reply(.ok)
        default:
            roomCommand(command, reply: reply)
        }
    }

    /// `server` as `join` and `listen` take it: each comma-separated host:port parsed, or the
    /// `bad_request` naming the one that is not. nil stays nil (the configured servers).
    private static func serverAddresses(_ servers: String?) -> Result<[HostPort]?, ControlError> {
        guard let servers else { return .success(nil) }
        var addresses: [HostPort] = []
        for text in ApplianceConfiguration.serverList(servers) {
            do { addresses.append(try HostPort(parsing: text)) } catch {
                return .failure(.badRequest(field: "args.server", "\"\(text)\": \(error)"))
            }
        }
        return .success(addresses)
    }

    private func roomCommand(_ command: ControlCommand, reply: @escaping (ControlResult) -> Void) {
        guard let session else { return reply(.failure(.notInRoom("no room: no server configured (room.server, or roomctl join --server)"))) }
        let done: RoomRequestCompletion = { result in
            switch result {
            case .success: reply(.ok)
            case .failure(let e): reply(.failure(.room(code: e.code.rawValue, e.message)))
            }
        }
        switch command {
        case .mute: session.setMute(true, completion: done)
        case .unmute: session.setMute(false, completion: done)
        case .toggleMute: session.setMute(!session.isEffectivelyMuted, completion: done)
        case .raiseHand: session.raiseHand(completion: done)
        case .lowerHand: session.lowerHand(completion: done)
        case .stepDown: session.stepDown(completion: done)
        case .acceptInvite: session.acceptInvite(completion: done)
        case .declineInvite: session.declineInvite(completion: done)
        case .moderate(let action, let participant, let reason):
            switch action {
            case .approve: session.approve(participant, completion: done)
            case .deny: session.deny(participant, completion: done)
            case .invite: session.invite(participant, completion: done)
            case .demote: session.demote(participant, completion: done)
            case .muteParticipant: session.muteParticipant(participant, completion: done)
            case .kick: session.kick(participant, reason: reason, completion: done)
            }
        case .sendMessage(let to, let data): session.sendMessage(to: to, data: data, completion: done)
        case .setAttribute(let key, let value): session.setAttribute(key: key, value: value, completion: done)
        case .leave: session.leave { _ in reply(.ok) }
        default:
            reply(.failure(ControlError(.internal, "\(command) is not implemented yet")))
        }
        appliance.room.followSending()
    }

    private func applyVolume(_ participant: UInt32) {
        guard let dB = volumes[participant], let ssrc = session?.participants[participant]?.ssrc else { return }
        engine.streamGains.set(ssrc: ssrc, linear: linear(fromDB: dB))
    }

    /// A call command carried out by the appliance's `CallLink`; refusals are `call_error`.
    private func callCommand(_ command: ControlCommand) -> ControlResult {
        let calls = appliance.calls
        do throws(CallLink.Refusal) {
            switch command {
            case .call(let target): try calls.dial(target)
            case .answer: try calls.answer()
            case .decline: try calls.decline()
            case .hangUp: try calls.hangUp()
            case .hold: try calls.hold(true)
            case .resume: try calls.hold(false)
            case .dtmf(let digits): try calls.sendDigits(digits)
            case .bridge(let on):
                try appliance.bridge(on)
            default: break
            }
            return .ok
        } catch {
            return .failure(ControlError(.callError, error.description))
        }
    }

    /// The call's state as `status` and the `call` event give it.
    static func callFields(_ calls: CallLink) -> [String: JSONValue] {
        var o: [String: JSONValue] = ["state": .string(calls.phaseName)]
        switch calls.phase {
        case .idle:
            if let end = calls.lastEnd { o["reason"] = .string(end) }
        case .ringing(let from, let name):
            o["peer"] = .string(from)
            if let name { o["name"] = .string(name) }
        case .dialing(let to):
            o["peer"] = .string(to)
        case .active(let peer):
            o["peer"] = .string(peer)
            o["bridged"] = .bool(calls.bridged)
            o["held"] = .bool(calls.held)
            if let a = calls.agreement {
                o["codec"] = .string(a.codec.rawValue)
                o["srtp"] = .bool(a.security != .plain)
                o["held_by_far_end"] = .bool(a.isHeldByRemote)
            }
        }
        return o
    }

    /// The call's changes → `call` events.
    func forwardCall(_ calls: CallLink) {
        server?.broadcast(event: "call", Self.callFields(calls))
    }

    func forwardDigit(_ digit: Character) {
        server?.broadcast(event: "dtmf", ["digit": .string(String(digit))])
    }

    // MARK: state

    private func status() -> [String: JSONValue] {
        var o: [String: JSONValue] = [
            "version": .string(roomdVersion),
            "mic_dbfs": Self.tenths(engine.stats.inputLevel),
            "speaker_dbfs": Self.tenths(engine.stats.playbackLevel),
            // What the audio thread has applied, so a script sees a switch take effect.
            "profile": .string((engine.stats.appliedProfile ?? engine.control.profile).rawValue),
            "volume_db": .double(appliance.settings.effective.volumeDB),
        ]
        // The talker's direction (board frame), when the array has found one.
        if let talker = engine.stats.talker {
            o["talker_azimuth_deg"] = .double(talker.azimuthDegrees)
            o["talker_locked"] = .bool(talker.locked)
        }
        // Where the beam points (absent while the chain hears mic 0 alone) and how much
        // dereverberation the room gets (absent without the array).
        if let beam = engine.stats.beamAzimuthDegrees { o["beam_azimuth_deg"] = .double(beam) }
        if let r = engine.stats.reverberance { o["reverberance"] = .double(r) }
        // What the array corrects each mic by to match mic 0 (absent without the array).
        if let c = engine.stats.micCorrectionsDB { o["mic_corrections_db"] = .array(c.map { .double($0) }) }
        // The second room listened to, if any.
        if let l = appliance.listening {
            o["listening"] = .object(["room": .string(l.room), "backend": .string(l.link.session?.backendName ?? "none"), "gain_db": .double(l.gainDB),
                                      "connection": .string(l.link.session?.connectionState.name ?? "idle")])
        }
        // The SIP account and the call, when an account is configured.
        if appliance.calls.isConfigured {
            var call = Self.callFields(appliance.calls)
            call["registration"] = .string(Self.registrationName(appliance.calls.registration))
            o["call"] = .object(call)
        }
        // The call-quality warnings raised now (empty: none; docs/control-api.md, "Call quality").
        o["quality_warnings"] = .array(appliance.quality.active.map { .string($0.rawValue) })
        // Where the token placed the room (docs/scaling.md), and why the settings' room was
        // last refused, if it was.
        if let p = appliance.placement {
            o["placement"] = .object(["backend": .string(p.backend.rawValue), "server": .string(p.server), "room": .string(p.room)])
        }
        if let refusal = appliance.roomRefusal { o["room_refused"] = .string(refusal) }
        guard let session else {
            o["connection"] = .string("idle")
            o["joined"] = .bool(false)
            o["role"] = .string("none")   // no room: neither listening nor speaking in one
            o["stage"] = .string("off")
            o["muted"] = .bool(false)
            return o
        }
        let state = session.connectionState
        o["backend"] = .string(session.backendName)
        o["connection"] = .string(state.name)
        if case .failed(let reason) = state { o["reason"] = .string(reason) }
        if case .disconnected(let reason) = state { o["reason"] = .string("\(reason)") }
        let me = session.localParticipant
        let joined: Bool = { if case .connected = state { return session.joinInfo != nil }; return false }()
        o["joined"] = .bool(joined)
        if let info = session.joinInfo {
            o["room"] = .string(info.room)
            // Which tenant's room it is: one server serves several applications, and a room
            // name means a different room in each.
            if let app = info.app { o["app"] = .string(app) }
            o["participant"] = .int(Int(info.participantID))
        }
        o["role"] = .string(joined ? me?.role.rawValue ?? "audience" : "none")
        o["stage"] = .string(me?.stage.rawValue ?? "off")
        let serverMuted = me?.muted ?? false
        o["self_muted"] = .bool(session.isSelfMuted)
        o["server_muted"] = .bool(serverMuted)
        o["muted"] = .bool(session.isEffectivelyMuted)
        o["media_path"] = .bool(session.isMediaPathUp)
        return o
    }

    private func participantJSON(_ p: ParticipantInfo) -> JSONValue {
        .object(["id": .int(Int(p.id)), "name": .string(p.name), "role": .string(p.role.rawValue),
                 "stage": .string(p.stage.rawValue), "muted": .bool(p.muted), "moderator": .bool(p.moderator)])
    }

    private func participants() -> [JSONValue] {
        (session?.participants.values.sorted { $0.id < $1.id } ?? []).map(participantJSON)
    }

    private func stats() -> [String: JSONValue] {
        let now = mediaClockSamples(nanoseconds: monotonicNanoseconds())
        let s = engine.stats.snapshot(now: now)
        var o: [String: JSONValue] = [
            "periods": .int(s.periods), "capture_xruns": .int(s.captureXruns), "playback_xruns": .int(s.playbackXruns),
            "device_losses": .int(s.deviceLosses), "drift_corrections": .int(s.driftCorrections),
            "packets_encoded": .int(s.packetsEncoded), "dtx_suppressed": .int(s.packetsSuppressedByDTX),
            "received_lost": .int(s.receivedLost), "late": .int(s.receivedLate), "fec": .int(s.fecRecovered),
            "plc": .int(s.concealedFrames), "jitter_delay_ms": .int(s.jitterBufferDelayMs),
            "dropped_outgoing": .int(engine.stats.packetsDroppedOutgoing.load(ordering: .relaxed)),
        ]
        // Per remote stream, named by participant when the SSRC is known.
        let bySSRC = Dictionary((session?.participants.values ?? [:].values).compactMap { p in p.ssrc.map { ($0, p) } },
                                uniquingKeysWith: { a, _ in a })
        // Streams whose sender left are gone from here (RoomLink releases their slots).
        o["streams"] = .array(engine.streamStatistics.rows().map { r in
            var f: [String: JSONValue] = [
                "ssrc": .int(Int(r.ssrc)), "received": .int(r.received), "lost": .int(r.lost), "late": .int(r.late),
                "fec": .int(r.fecRecovered), "plc": .int(r.concealed), "jitter_ms": .double(r.jitterMs), "delay_ms": .double(r.delayMs),
                // How the jitter buffer steers: its target now, drops made to lower the delay and
                // the audio they removed, frames inserted to raise it, backlog packets.
                "target_ms": .double(r.targetMs), "skipped": .int(r.skipped), "shed_ms": .double(r.shedMs),
                "stretched": .int(r.stretched), "backlog": .int(r.backlog),
                // Since its last packet: a stream idle over 2 s is not in `jitter_delay_ms`.
                "idle_ms": .int(r.idleMilliseconds(now: now)),
            ]
            if let p = bySSRC[r.ssrc] { f["participant"] = .int(Int(p.id)); f["name"] = .string(p.name) }
            return .object(f)
        })
        // Loss-driven FEC: what the encoder protects against now, at which bitrate.
        if let applied = engine.lossFeedback.applied {
            o["opus_expected_loss_pct"] = .int(applied.expectedLossPercent)
            o["opus_bitrate"] = .int(applied.bitrate)
        }
        if let layer = engine.stats.opusLayer { o["opus_layer"] = .string(layer.name) }
        if let ms = engine.stats.opusLookaheadMilliseconds { o["opus_lookahead_ms"] = .double(ms) }
        if let st = session?.statistics {
            o["rtp_sent"] = .int(st.packetsSent)
            o["rtp_received"] = .int(st.packetsReceived)
        }
        return o
    }

    // MARK: events

    /// Room events → control events (names and fields: docs/control-api.md).
    func forward(_ event: RoomSessionEvent) {
        guard let server else { return }
        switch event {
        case .stateChanged(let state):
            server.broadcast(event: "connection", Self.connectionFields(state))
        case .joined(let info):
            // Ids are the new room's (or a new membership's): volumes set for the old ones go.
            if !info.restored { volumes.removeAll() }
            server.broadcast(event: "joined", ["room": .string(info.room), "participant": .int(Int(info.participantID)),
                                               "restored": .bool(info.restored)])
        case .participantJoined(let p):
            applyVolume(p.id)
            server.broadcast(event: "participant_joined", ["participant": participantJSON(p)])
        case .participantLeft(let id, let reason, _):
            server.broadcast(event: "participant_left", ["participant": .int(Int(id)), "reason": .string(reason.rawValue)])
        case .participantUpdated(let p):
            applyVolume(p.id)
            server.broadcast(event: "participant_updated", ["participant": participantJSON(p)])
        case .localStageChanged(let stage): server.broadcast(event: "stage", ["stage": .string(stage.rawValue)])
        case .localMuteChanged(let muted): server.broadcast(event: "mute", ["muted": .bool(muted)])
        case .invited(let by): server.broadcast(event: "invited", ["by": .int(Int(by))])
        case .stageRequest(let id): server.broadcast(event: "stage_request", ["participant": .int(Int(id))])
        case .activeSpeakers(let ids, let levels):
            server.broadcast(event: "active_speakers", ["participants": .array(ids.map { .int(Int($0)) }),
                                                        "levels": .array(levels.map { .int(Int($0)) })])
        case .appMessage(let from, let to, let data):
            var f: [String: JSONValue] = ["data": .string(data)]
            if let from { f["from"] = .int(Int(from)) }
            if let to { f["to"] = .int(Int(to)) }
            server.broadcast(event: "message", f)
        case .attributeChanged(let key, let value):
            server.broadcast(event: "attribute", ["key": .string(key), "value": value.map { .string($0) } ?? .null])
        case .tokenWillExpire(let at): server.broadcast(event: "token_will_expire", ["expires_at": .int(at)])
        case .removed(let reason, let message):
            server.broadcast(event: "removed", ["reason": .string(reason.rawValue), "message": .string(message)])
        case .requestFailed(let failure):
            server.broadcast(event: "request_failed", ["message": .string("\(failure)")])
        case .mediaPathChanged(let up): server.broadcast(event: "media_path", ["up": .bool(up)])
        case .receiverLoss: break   // seen in `stats` (opus_expected_loss_pct, opus_bitrate)
        }
    }

    /// `levels` events, ten a second, only while someone asked for them (meters for a rig or
    /// an installer's terminal; nobody pays for them otherwise).
    func publishLevels() {
        guard let server, server.hasLevelSubscribers else { return }
        let s = engine.stats
        server.broadcast(event: "levels", ["mic_dbfs": Self.tenths(s.inputLevel), "out_dbfs": Self.tenths(s.outputLevel),
                                           "speaker_dbfs": Self.tenths(s.playbackLevel), "voice": .bool(s.voiceActive.load(ordering: .relaxed))])
    }

    /// A level in dBFS to a tenth, rounded as a Double: a Float rounded to tenths and then
    /// widened printed as -69.9000015258789.
    static func tenths(_ level: Float) -> JSONValue {
        .double((Double(max(level, -120)) * 10).rounded() / 10)
    }

    /// The listened room's connection → `listen` events.
    func forwardListen(room: String, _ event: RoomSessionEvent) {
        guard let server else { return }
        switch event {
        case .stateChanged(let state):
            var f = Self.connectionFields(state)
            f["room"] = .string(room)
            server.broadcast(event: "listen", f)
        default: break
        }
    }

    /// A connection state as the `connection` and `listen` events give it: `state`, and
    /// `reason` when it failed.
    private static func connectionFields(_ state: RoomConnectionState) -> [String: JSONValue] {
        var f: [String: JSONValue] = ["state": .string(state.name)]
        if case .failed(let reason) = state { f["reason"] = .string(reason) }
        return f
    }

    /// A call-quality warning raised or cleared → a `quality` event.
    func forward(_ change: QualityChange) {
        guard let server else { return }
        var f: [String: JSONValue] = ["warning": .string(change.warning.rawValue), "raised": .bool(change.raised)]
        if let value = change.value { f["value"] = .double((value * 10).rounded() / 10) }
        server.broadcast(event: "quality", f)
    }

    /// Audio device exceptions → `device` events.
    func forward(_ event: EngineEvent) {
        guard let server else { return }
        switch event {
        case .xrun(let capture): server.broadcast(event: "device", ["kind": .string("xrun"), "device": .string(capture ? "capture" : "playback")])
        case .deviceLost(let capture, _): server.broadcast(event: "device", ["kind": .string("lost"), "device": .string(capture ? "capture" : "playback")])
        case .reopenFailed(let attempt, _): server.broadcast(event: "device", ["kind": .string("reopen_failed"), "message": .string("attempt \(attempt)")])
        case .deviceRestored: server.broadcast(event: "device", ["kind": .string("restored")])
        case .talkerChanged(let tenths): server.broadcast(event: "talker", ["azimuth_deg": .double(Double(tenths) / 10)])
        default: break
        }
    }
}

extension ControlBridge {
    /// A registration as status gives it: registered, registering, unregistered, or failed: why.
    static func registrationName(_ state: SIPRegistrationState) -> String {
        switch state {
        case .unregistered: "unregistered"
        case .registering: "registering"
        case .registered: "registered"
        case .failed(let why): "failed: \(why)"
        }
    }
}
