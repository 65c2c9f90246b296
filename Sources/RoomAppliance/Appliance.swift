import RoomAudio
import RoomBase
import RoomClient
import RoomControl
import RoomDSP
import RoomJanusBackend
import RoomModel
import RoomProtocol
import RoomSettings
import RoomSystem

/// The running appliance's parts, and the operations that span several of them: changing a
/// setting (apply it, keep it across restarts, tell subscribers), joining, and reloading the
/// configuration file. On the event-loop thread.
final class Appliance {
    let loop: EventLoop
    let engine: AudioEngine
    let settings: SettingsStore
    let room: RoomLink
    /// Set once the control socket is up (it needs the appliance to exist).
    var control: ControlBridge?
    var panel: Panel?
    var ring: TalkerRing?
    let selfTest: SelfTestRunner
    /// The call-quality warnings (ticked once a second by the daemon).
    let quality: QualityMonitor
    /// SIP calls (roomd.conf `[sip]`).
    let calls: CallLink

    init(loop: EventLoop, engine: AudioEngine, settings: SettingsStore, room: RoomLink, calls: CallLink,
         selfTestArray: SelfTestArrayGeometry? = nil) {
        self.calls = calls
        selfTest = SelfTestRunner(engine: engine, loop: loop, array: selfTestArray)
        quality = QualityMonitor(engine: engine, room: room)
        self.loop = loop
        self.engine = engine
        self.settings = settings
        self.room = room
        engine.mixer.masterGain = linear(fromDB: Float(settings.effective.volumeDB))
    }

    var session: (any RoomBackend)? { room.session }

    // MARK: settings changed at run time

    func setMasterVolume(dB: Double) {
        engine.mixer.masterGain = linear(fromDB: Float(dB))
        settings.update { $0.volumeDB = dB }
    }

    func setProfile(_ profile: AudioProfile) {
        engine.control.setProfile(profile)
        settings.update { $0.profile = profile }
        Log.notice("audio profile \(profile.rawValue)")
    }

    func setLogLevel(_ name: String) -> Bool {
        guard let level = LogLevel(name: name) else { return false }
        Log.level = level
        settings.update { $0.logLevel = name }
        return true
    }

    /// The appliance's mute as people see it (the mute LED): the mic's, or the room's.
    var isMuted: Bool { engine.control.isMicMuted || (session?.isEffectivelyMuted ?? false) }

    /// Mutes or unmutes the appliance. In a room without a bridged caller that is the room's
    /// self mute (others see it; the mic follows). With a caller bridged in, or with a call and
    /// no room, it is the mic's alone: the room keeps hearing the caller, the caller the room.
    /// `done` gets the room's refusal, if any.
    func setMuted(_ on: Bool, done: @escaping (Result<Void, RoomRequestError>) -> Void) {
        if calls.bridged || session == nil {
            engine.control.setMicMuted(on)
            Log.notice("mic \(on ? "muted" : "unmuted")\(calls.bridged ? " (a caller is bridged into the room)" : "")")
            panel?.refresh()
            return done(.success(()))
        }
        session?.setMute(on, completion: done)
        room.followSending()
    }

    /// Puts the SIP caller into the room or takes them out, carrying the mute over: a muted
    /// appliance that bridges a caller unmutes in the room (the caller must be heard) and keeps
    /// its mic muted; taking the caller out mutes it in the room again.
    func bridge(_ on: Bool) throws(CallLink.Refusal) {
        let micMuted = isMuted
        try calls.bridge(on)
        if on, session?.isSelfMuted == true { session?.setMute(false) }
        if !on, micMuted { session?.setMute(true) }
        engine.control.setMicMuted(micMuted)
        room.followSending()
        panel?.refresh()
    }

    /// Self mute is recorded whenever it may have changed (button, roomctl, a rejoin), so
    /// the appliance comes back muted after a restart if it was muted before.
    func noteMuteState() {
        guard let session else { return }
        let muted = session.isSelfMuted
        if settings.runtime.muted ?? false != muted { settings.update { $0.muted = muted } }
    }

    // MARK: room

    /// The token the settings gave at the last join or reload, when the room in use is the
    /// settings' room; nil while a `roomctl join` with its own server or token is in use (a
    /// reload must not send the file's token to another server).
    private var settingsToken: String?
    /// Where the token placed the room in use (nil: the configuration or a `roomctl join`
    /// placed it): a reload whose token places it elsewhere moves the appliance.
    private(set) var placement: TokenPlacement?
    /// Whether the room in use is the settings' (not a `roomctl join` with its own server or
    /// token): only then may a new token in the settings move it.
    private var inSettingsRoom = false
    /// Why the settings' room was last refused (a placement that does not verify, an unreadable
    /// token file), nil once a join or reload got through: `roomctl status` shows it, since the
    /// appliance stays in the room it was in and nothing else would say why.
    private(set) var roomRefusal: String?

    /// The settings' room (or their server with a token given), its refusal recorded for status.
    private func placeSettingsRoom(_ e: EffectiveSettings, token: String? = nil, role: RoomRole) throws(SystemError) -> PlacedRoom? {
        do {
            let placed = try RoomPlacer.place(e, token: token, role: role)
            roomRefusal = nil
            return placed
        } catch {
            roomRefusal = error.description
            control?.roomRefused(error.description)
            throw error
        }
    }

    /// Why a `join` with these overrides is refused, if it is: the configured token (roomserver)
    /// or room PIN and secret (Janus) are the configured server's, and go to no other. A
    /// `roomctl join --server X` to another server brings its own token (`--token-file`);
    /// a Janus room's PIN and secret cannot be given that way, so another Janus server is refused
    /// while they are configured. Same server: the same host text and port as a configured one.
    func secretsStayWithTheirServer(addresses requested: [HostPort]?, token: String?) -> String? {
        guard let requested else { return nil }
        let e = settings.effective
        let configured = Set((try? Self.addresses(e.servers)) ?? [])
        let others = requested.filter { !configured.contains($0) }
        guard !others.isEmpty else { return nil }
        let list = others.map(\.description).joined(separator: ", ")
        if e.backend == .janus {
            guard e.janusPin != nil || e.janusSecret != nil else { return nil }
            return "room.janus_pin and room.janus_secret are sent only to room.server (\(e.servers.joined(separator: ", "))), not to \(list)"
        }
        guard token == nil else { return nil }
        return "the configured token is sent only to room.server (\(e.servers.joined(separator: ", "))); give a token for \(list) (roomctl join --server \(list) --token-file FILE)"
    }

    /// Joins with the effective settings, or with what a `join` request overrides (`addresses`
    /// already parsed by the caller, so a bad one is reported as a bad argument).
    /// Without a server of its own the join goes where the token places the room (checked
    /// against `room.placement_key`), else to `room.server`.
    func join(addresses requested: [HostPort]? = nil, token: String? = nil, role: String? = nil) throws(SystemError) {
        let e = settings.effective
        let roomRole = RoomRole(rawValue: role ?? e.role) ?? .streamer
        guard let requested else {
            guard let placed = try placeSettingsRoom(e, token: token, role: roomRole) else {
                throw SystemError("no room server: give one (roomctl join --server host:port) or set room.server in the configuration file")
            }
            if let placement = placed.placement { Log.notice("room: placed by the token: \(placement)") }
            try room.connect(placed.target, muted: session?.isSelfMuted ?? e.muted)
            inSettingsRoom = token == nil
            settingsToken = inSettingsRoom ? placed.token : nil
            placement = placed.placement
            return
        }
        guard !requested.isEmpty else {
            throw SystemError("no room server: give one (roomctl join --server host:port) or set room.server in the configuration file")
        }
        inSettingsRoom = false
        placement = nil
        if e.backend == .janus {
            try room.connect(try Self.janusTarget(e, addresses: requested, role: roomRole), muted: session?.isSelfMuted ?? e.muted)
            settingsToken = nil
            return
        }
        let joinToken: String
        if let token { joinToken = token } else { joinToken = try Self.readToken(e) }
        try room.connect(.roomserver(servers: requested, tls: e.signalling.tlsSettings, token: joinToken, role: roomRole),
                         muted: session?.isSelfMuted ?? e.muted)
        settingsToken = nil
    }

    // MARK: a second room, listened to

    /// The room listened to beside the room (`roomctl listen`), nil when none.
    private(set) var listening: (link: RoomLink, room: String, gainDB: Double)?
    /// Changes of the listened room's connection (the control bridge tells subscribers).
    var onListenEvent: ((String, RoomSessionEvent) -> Void)?

    /// Listens to `room` as audience through roomserver at `gainDB`: its talkers play on the
    /// speaker; nothing from here is sent to it, and the room the appliance is in does not hear
    /// it (the microphones are all it sends, and the canceller takes the speaker out). A second
    /// `listen` moves to the new room; the gain changes at once (`setListenGain` alone for the
    /// room listened to already).
    func listen(room: String, addresses requested: [HostPort]?, serverText: String?, token: String?, gainDB: Double,
                backend: RoomBackendKind = .roomserver, pin: String? = nil) throws(SystemError) {
        guard self.room.isEnabled else { throw SystemError("roomd runs in loopback mode: no room") }
        let e = settings.effective
        let addresses: [HostPort]
        if let requested {
            addresses = requested
        } else if backend == e.backend {
            addresses = try Self.addresses(e.servers)
        } else {
            throw SystemError("the room's servers are \(e.backend.rawValue)'s: give the \(backend.rawValue) server (roomctl listen ROOM --backend \(backend.rawValue) --server host:port)")
        }
        guard !addresses.isEmpty else {
            throw SystemError("no server for the room to listen to: give one (roomctl listen ROOM --server host:port)")
        }
        // The second room's server is checked as the room's is (the same CA, pins or plain).
        let target: RoomTarget
        switch backend {
        case .roomserver:
            guard let token else { throw SystemError("a token for room \(room) is needed") }
            target = .roomserver(servers: addresses, tls: e.signalling.tlsSettings, token: token, role: .audience)
        case .janus:
            guard let number = UInt64(room) else { throw SystemError("a Janus room is a number, not \"\(room)\"") }
            target = try Self.janusTarget(e, addresses: addresses, room: number, pin: pin, secret: nil,
                                          display: e.displayName + " (listening)", role: .audience)
        }
        engine.streamGains.set(leg: .listen, linear: linear(fromDB: Float(gainDB)))
        if let current = listening {
            try current.link.connect(target, muted: true)
            listening = (current.link, room, gainDB)
        } else {
            let link = try RoomLink(loop: loop, engine: engine, enabled: true, plainMedia: self.room.plainMedia, leg: .listen)
            link.onEvent = { [weak self] event in self?.onListenEvent?(room, event) }
            try link.connect(target, muted: true)
            listening = (link, room, gainDB)
        }
        Log.notice("listening to room \(room) at \(fixedDecimalText(gainDB, 1)) dB")
        // Kept, so a restart listens again (nothing the user set is lost).
        settings.update {
            $0.listen = RuntimeSettings.Listen(room: room, server: serverText, token: token, gainDB: gainDB, backend: backend, pin: pin)
        }
        panel?.refresh()
    }

    /// After a restart: the room listened to before, again. A failure is logged; the appliance
    /// runs without it (an expired token, a server gone).
    func listenAgain() {
        guard let kept = settings.runtime.listen else { return }
        do {
            let addresses = try kept.server.map { (text) throws(SystemError) in try Self.addresses(ApplianceConfiguration.serverList(text)) }
            try listen(room: kept.room, addresses: addresses, serverText: kept.server, token: kept.token, gainDB: kept.gainDB,
                       backend: kept.backend, pin: kept.pin)
        } catch {
            Log.warning("listen: room \(kept.room) again after the restart: \(error); not listening (roomctl listen to try again)")
        }
    }

    /// A new gain for the room listened to (no rejoin, no gap).
    func setListenGain(dB: Double) {
        guard let current = listening else { return }
        engine.streamGains.set(leg: .listen, linear: linear(fromDB: Float(dB)))
        listening = (current.link, current.room, dB)
        settings.update { $0.listen?.gainDB = dB }
        Log.notice("listening to room \(current.room) at \(fixedDecimalText(dB, 1)) dB")
    }

    /// Stops listening: the second room is left properly (others see "left").
    func unlisten() -> Bool {
        guard let (link, room, _) = listening else { return false }
        listening = nil
        settings.update { $0.listen = nil }
        // The leave's completion holds the link until the room has seen it go.
        if let session = link.session {
            session.leave(completion: { _ in link.close() })
        } else {
            link.close()
        }
        Log.notice("stopped listening to room \(room)")
        panel?.refresh()
        return true
    }

    /// Measured: with 10 ms packets the browsers in the room hear half of every 20 ms (PESQ-WB
    /// 1.06 against 3.3-3.9 with 20 ms frames), so the appliance refuses to join that way.
    static let janusFrameProblem = "audio.opus_frame_ms = 10: a Janus AudioBridge mixes one packet per participant every 20 ms and drops the rest; use 20 (the default with room.backend = janus; restart roomd after changing either)"

    /// A Janus AudioBridge room from the settings: `room.server` is Janus's WebSocket transport,
    /// TLS (wss) with the same checks as roomserver's signalling unless plaintext is asked for.
    static func janusTarget(_ e: EffectiveSettings, addresses: [HostPort], role: RoomRole) throws(SystemError) -> RoomTarget {
        guard let room = e.janusRoom else { throw SystemError("room.backend = janus needs room.janus_room (the AudioBridge room number)") }
        guard e.opusFrameMilliseconds == 20 else { throw SystemError(janusFrameProblem) }
        return try janusTarget(e, addresses: addresses, room: room, pin: e.janusPin, secret: e.janusSecret, display: e.displayName, role: role)
    }

    /// A Janus AudioBridge room, checked as the settings check signalling, with their STUN server.
    static func janusTarget(_ e: EffectiveSettings, addresses: [HostPort], room: UInt64, pin: String?, secret: String?,
                            display: String, role: RoomRole) throws(SystemError) -> RoomTarget {
        var configuration = JanusRoomConfiguration(endpoints: addresses, tls: e.signalling.tlsSettings, room: room, pin: pin,
                                                   secret: secret, display: display, role: role)
        configuration.stunServer = try e.stunServer.map { (text) throws(SystemError) in try HostPort(parsing: text) }
        return .janus(configuration)
    }

    /// Host names stay names: the session resolves them at each attempt.
    static func addresses(_ servers: [String]) throws(SystemError) -> [HostPort] {
        var addresses: [HostPort] = []
        for text in servers { addresses.append(try HostPort(parsing: text)) }
        return addresses
    }

    /// The control group's gid, checked to be one roomd can give the socket to.
    static func controlGroup(_ name: String?) throws(SystemError) -> GroupID? {
        guard let name else { return nil }
        let gid = try Groups.id(of: name)
        guard Groups.processMayUse(gid) else {
            throw SystemError("roomd (uid \(ProcessIdentity.effectiveUserID)) is not a member of group \(name), so it cannot give it the control socket (systemd: SupplementaryGroups=\(name))")
        }
        return gid
    }

    static func readToken(_ e: EffectiveSettings) throws(SystemError) -> String {
        if let token = e.token { return token }
        guard let path = e.tokenFile else { throw SystemError("no room token: set room.token_file (or --token-file)") }
        do {
            return String(try Files.readText(path).filter { !$0.isWhitespace })
        } catch {
            throw SystemError("token file: \(error)")
        }
    }

    // MARK: reload

    struct ReloadReport {
        /// Keys now in effect without interrupting anything.
        var applied: [String] = []
        /// Keys whose change needed the room to be joined again.
        var rejoined: [String] = []
        /// Keys that take effect only when roomd restarts (board, socket, codec frame, AEC level).
        var restartNeeded: [String] = []
        /// Changed in the file but overridden by the command line or unchanged in effect.
        var unchangedInEffect: [String] = []
    }

    enum ReloadFailure: Error, CustomStringConvertible {
        case config(ConfigError)
        case system(String)
        var description: String {
            switch self {
            case .config(let e): "\(e)"
            case .system(let s): s
            }
        }
    }

    /// Re-reads the configuration file (SIGHUP, `roomctl reload`). Everything is checked before
    /// anything changes: the file, the control group, the servers and the token; on any error the
    /// appliance runs on exactly as before. The call is dropped only when the room itself
    /// changes (servers, role).
    func reload() -> Result<ReloadReport, ReloadFailure> {
        let next: ApplianceConfiguration
        do { next = try settings.readAgain() } catch { return .failure(.config(error)) }
        let before = settings.effective
        let after = settings.effective(file: next)
        var group: GroupID??
        if after.controlGroup != before.controlGroup {
            do { group = .some(try Self.controlGroup(after.controlGroup)) } catch {
                return .failure(.system("control.group: \(error)"))
            }
        }
        let roomChanged = after.servers != before.servers || after.role != before.role || after.signalling != before.signalling
            || after.backend != before.backend || after.janusRoom != before.janusRoom || after.janusPin != before.janusPin || after.janusSecret != before.janusSecret || after.stunServer != before.stunServer
            || (after.backend == .janus && after.displayName != before.displayName)
            || after.placementKey != before.placementKey
        // The token file is compared by content: rotating a token is rewriting that file and
        // reloading, with the path unchanged. A token that places the room is checked here,
        // before anything changes: refused, the appliance stays where it is.
        var placed: PlacedRoom?
        if room.isEnabled && after.placesRoom {
            do {
                placed = try placeSettingsRoom(after, role: RoomRole(rawValue: after.role) ?? .streamer)
            } catch {
                return .failure(.system("room: \(error)"))
            }
        }
        let token = placed?.target.kind == .roomserver ? placed?.token : nil
        // Only a change of the settings' own token is refreshed, and only in the settings' room.
        let tokenChanged = placed?.token != nil && settingsToken != nil && placed?.token != settingsToken
        // A new token that places the room on another instance (or no longer places it) moves
        // the settings' room there: leave, then join the new place.
        let moved = inSettingsRoom && placed.map { $0.placement != placement } ?? false
        // No room yet because the start's token was refused: the first good one joins.
        let firstJoin = session == nil && placed != nil
        // A new SIP account is checked (its password file, its registrar) before anything changes.
        let sipChanged = next.sip != settings.file.sip
        if sipChanged, let sip = next.sip {
            do throws(CallLink.Refusal) { _ = try CallLink.account(sip) } catch { return .failure(.system("\(error)")) }
        }

        let changedFileKeys = settings.commit(next)
        let now = settings.effective
        var report = ReloadReport()
        if now.logLevel != before.logLevel, let level = LogLevel(name: now.logLevel) {
            Log.level = level
            report.applied.append("log.level")
        }
        if now.volumeDB != before.volumeDB {
            engine.mixer.masterGain = linear(fromDB: Float(now.volumeDB))
            report.applied.append("audio.volume_db")
        }
        if now.profile != before.profile {
            engine.control.setProfile(now.profile)
            report.applied.append("audio.profile")
        }
        if let group {
            do {
                try control?.setAllowedGroup(group)
                report.applied.append("control.group")
            } catch {
                Log.warning("control.group: \(error)")
                report.restartNeeded.append("control.group")
            }
        }
        let roomKeys = ["room.server", "room.role", "room.tls_ca_file", "room.tls_pin", "room.tls_server_name",
                        "room.plaintext_signalling", "room.backend", "room.janus_room", "room.janus_pin", "room.janus_secret", "room.stun_server", "room.display_name"]
        if roomChanged || moved || firstJoin, let placed {
            do {
                if firstJoin, let next = placed.placement {
                    Log.notice("room: placed by the token: \(next)")
                } else if moved, let next = placed.placement {
                    Log.notice("room: moved by the token: \(next) (was \(placement.map(\.description) ?? "room.server"))")
                }
                try room.connect(placed.target, muted: session?.isSelfMuted ?? now.muted)
                inSettingsRoom = true
                settingsToken = placed.token
                placement = placed.placement
                report.rejoined += (roomKeys + ["room.placement_key"]).filter { changedFileKeys.contains($0) }
                if (moved || firstJoin) && !report.rejoined.contains("room.token") { report.rejoined.append("room.token") }
            } catch {
                Log.error("room: \(error)")
            }
        } else if roomChanged && now.servers.isEmpty {
            report.restartNeeded.append("room.server")
        } else if tokenChanged, let placed, let session {
            settingsToken = placed.token
            if let token {
                // The token is refreshed in place: the call goes on (protocol `refresh_token`).
                session.refreshToken(token) { result in
                    if case .failure(let e) = result { Log.warning("reload: token refresh refused: \(e.message)") }
                }
            }
            // A Janus room takes no token: the new one is kept for the next reload to compare.
            report.applied.append("room.token")
        }
        // The token's source moved (`room.token_file` renamed, or the token now written in the
        // file instead): the new source is what is read from now on, so the key is in effect,
        // whether or not the token itself changed (same content: nothing to send, the call goes
        // on). Only a command-line token, which leaves the effective source as it was, makes
        // the file's change "not in effect".
        if token != nil && (now.tokenFile != before.tokenFile || now.token != before.token) {
            for key in ["room.token_file", "room.token"] where changedFileKeys.contains(key) && !report.applied.contains(key) {
                report.applied.append(key)
            }
        }
        if now.boardPath != before.boardPath { report.restartNeeded.append("board.path") }
        if now.controlSocket != before.controlSocket { report.restartNeeded.append("control.socket") }
        if now.opusFrameMilliseconds != before.opusFrameMilliseconds { report.restartNeeded.append("audio.opus_frame_ms") }
        if now.aecSuppression != before.aecSuppression { report.restartNeeded.append("audio.aec_suppression") }
        if changedFileKeys.contains("state.directory") { report.restartNeeded.append("state.directory") }
        if sipChanged {
            do throws(CallLink.Refusal) {
                try calls.configure(settings.file.sip)
                report.applied.append("sip")
            } catch {
                Log.error("\(error)")
                report.restartNeeded.append("sip")
            }
        }
        let handled = Set(report.applied + report.rejoined + report.restartNeeded)
        report.unchangedInEffect = changedFileKeys.filter { !handled.contains($0) }
        return .success(report)
    }

    /// Runs a reload and says what happened in the journal, for SIGHUP and roomctl alike.
    func reloadAndLog(origin: String) -> Result<ReloadReport, ReloadFailure> {
        let result = reload()
        switch result {
        case .success(let r):
            var parts: [String] = []
            if !r.applied.isEmpty { parts.append("applied " + r.applied.joined(separator: ", ")) }
            if !r.rejoined.isEmpty { parts.append("rejoining for " + r.rejoined.joined(separator: ", ")) }
            if !r.restartNeeded.isEmpty { parts.append("restart needed for " + r.restartNeeded.joined(separator: ", ")) }
            if !r.unchangedInEffect.isEmpty { parts.append("not in effect (set on the command line, or no room in loopback mode): " + r.unchangedInEffect.joined(separator: ", ")) }
            Log.notice("\(origin): configuration \(settings.configPath ?? "(none)") reloaded: \(parts.isEmpty ? "no change" : parts.joined(separator: "; "))")
            control?.reloaded(r)
        case .failure(let e):
            Log.error("\(origin): configuration not reloaded, nothing changed: \(e)")
        }
        return result
    }
}
