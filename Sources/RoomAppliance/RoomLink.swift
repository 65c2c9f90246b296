import RoomAudio
import RoomBase
import RoomClient
import RoomJanusBackend
import RoomMedia
import RoomModel
import RoomProtocol
import RoomSettings
import RoomSystem
import RoomTLS

/// Which room to join, and on what kind of server (`room.backend`).
enum RoomTarget {
    case roomserver(servers: [HostPort], tls: TLSClientSettings?, token: String, role: RoomRole)
    case janus(JanusRoomConfiguration)

    var kind: RoomBackendKind {
        switch self {
        case .roomserver: .roomserver
        case .janus: .janus
        }
    }
}

/// roomd's membership of a room, which may start later than the audio (a `join` or a reload
/// that adds a server) and may move to other servers or to another kind of server (roomserver
/// or Janus: a `RoomBackend` either way). The engine's "packets waiting" eventfd
/// belongs here, not to a session, because the engine needs it before it starts and keeps it
/// for its whole life. On the event-loop thread.
final class RoomLink {
    private let loop: EventLoop
    private let engine: AudioEngine
    /// Which conversation this link carries: the room the appliance is in (it sends the
    /// microphones, takes the loss feedback) or a room it only listens to (`roomctl listen`:
    /// its packets go to the engine's listen ring; nothing is sent to it).
    let leg: MediaLeg
    /// A listened room's session takes its outgoing packets from here, and nothing is ever put
    /// in: the engine's one outgoing ring belongs to the room (a ring has one reader).
    private let silentOutgoing = SPSCRing<MediaPacket>(capacity: 2)
    private(set) var session: (any RoomBackend)?
    /// Room events of whichever session is current. Set before `connect`.
    var onEvent: ((RoomSessionEvent) -> Void)?
    private var wake: EventSignalSource?
    /// The receivers' half of loss-driven FEC: what this appliance lost of each sender, to
    /// the server (or, in loopback mode, straight to its own encoder) once per interval.
    private var lossWindow = ReceiveLossWindow()
    private var lossTimer: EventLoop.TimerID?
    /// Every SSRC each participant of the current room has published (the protocol shows a
    /// participant's SSRC only while it is on stage; a speaker who stepped down and then left
    /// still has a stream in the engine): what to release when it leaves.
    private var streamsByParticipant: [RoomParticipantID: UInt32] = [:]

    /// `enabled` false (loopback mode): the engine plays its own packets and no room is joined.
    /// Plain RTP accepted (`--plain-media`); otherwise a server without SRTP keys gets no media.
    let plainMedia: Bool

    init(loop: EventLoop, engine: AudioEngine, enabled: Bool, plainMedia: Bool = false, leg: MediaLeg = .room) throws(SystemError) {
        self.loop = loop
        self.engine = engine
        self.plainMedia = plainMedia
        self.leg = leg
        guard enabled else {
            // Loopback: this appliance is its own listener, its jitter buffer the report.
            lossTimer = loop.schedule(after: .seconds(1), repeating: .seconds(1)) { [weak self] in
                guard let self else { return }
                let worst = self.lossWindow.next(self.ownRows()).map(\.permille).max()
                if let worst { engine.lossFeedback.report(lostPermille: worst) }
            }
            return
        }
        // Not with --plain-media (development, the bench's plain run): nothing of SRTP is set
        // up until a server sends keys.
        if !plainMedia { RoomSession.prepareMediaEncryption() }
        let wake = try EventSignalSource(loop: loop) { [weak self] _ in self?.session?.drainOutgoingMedia() }
        self.wake = wake
        guard leg == .room else { return }
        engine.outgoingSignal = wake.signal
        engine.control.setTransmitting(false)
        // Every change of the sending state comes with a room event or a button or control
        // request, each followed by `followSending`; this catches one that would not, late
        // (and says so) rather than leaving the appliance silent.
        sendingCheck = loop.schedule(after: .seconds(1), repeating: .seconds(1)) { [weak self] in
            guard let self, self.followSending() else { return }
            Log.warning("room: sending state changed without an event (now \(self.engine.control.isTransmitting ? "sending" : "not sending")); followed a second late")
        }
    }

    private var sendingCheck: EventLoop.TimerID?
    /// Whether a SIP caller is bridged into the room (`CallLink.bridged`).
    var callerBridged: () -> Bool = { false }

    /// Tells the engine whether the room takes our audio now, so that it encodes only then
    /// (docs/audio-engine.md, "The encoder idles while not sending"). Call after anything that
    /// may change it: room events (done here), button presses, control requests. True when
    /// the engine's setting changed.
    @discardableResult
    func followSending() -> Bool {
        guard leg == .room else { return false }
        // The mic's mute follows the room's, except while a caller is bridged in: then the
        // appliance's mute is the mic's alone and the room keeps hearing the caller (`Appliance.setMuted`).
        if let session, !callerBridged() { engine.control.setMicMuted(session.isEffectivelyMuted) }
        let sending = session?.isSendingMedia ?? false
        guard sending != engine.control.isTransmitting else { return false }
        engine.control.setTransmitting(sending)
        return true
    }

    var isEnabled: Bool { wake != nil }

    /// Joins `target`: creates the session on first use, otherwise leaves the current room
    /// properly first (others see "left", not a timeout). Self mute is carried over, so a muted
    /// appliance never speaks into the new room. A change of backend replaces the session.
    func connect(_ target: RoomTarget, muted: Bool) throws(SystemError) {
        guard wake != nil else { throw SystemError("roomd runs in loopback mode: no room") }
        guard let session else {
            try create(target, muted: muted)
            return
        }
        // While a leave is under way the newest request wins: a second join or reload before
        // the first room is left replaces the target instead of queueing a second restart.
        let leaving = pendingTarget != nil
        pendingTarget = (target, muted)
        if leaving { return }
        switch session.connectionState {
        case .idle, .disconnected: joinPending()
        default: session.leave(completion: { [weak self] _ in self?.joinPending() })
        }
    }

    /// The room a `connect` waits to join once the current one is left.
    private var pendingTarget: (target: RoomTarget, muted: Bool)?

    private func joinPending() {
        guard let (target, muted) = pendingTarget else { return }
        pendingTarget = nil
        guard let session else { return }
        do {
            switch target {
            case .roomserver(let servers, let tls, let token, let role):
                guard let s = session as? RoomSession else { return try replace(target, muted: muted) }
                try s.reconfigure(endpoints: servers, token: token, role: role, tls: .some(tls))
                s.start()
            case .janus(let configuration):
                guard let s = session as? JanusRoomSession else { return try replace(target, muted: muted) }
                try s.reconfigure(configuration)
                s.start()
            }
        } catch {
            Log.error("room: \(error)")
        }
    }

    private func replace(_ target: RoomTarget, muted: Bool) throws(SystemError) {
        session?.onEvent = nil
        session?.stop()
        session = nil
        try create(target, muted: muted)
    }

    /// This leg's streams in the engine's statistics.
    private func ownRows() -> [StreamStatistics.Row] { engine.streamStatistics.rows().filter { $0.leg == leg } }

    private var incoming: SPSCRing<MediaPacket> { leg == .room ? engine.incomingMedia : engine.listenMedia }
    private var outgoing: SPSCRing<MediaPacket> { leg == .room ? engine.outgoingMedia : silentOutgoing }

    private func create(_ target: RoomTarget, muted: Bool) throws(SystemError) {
        guard let wake else { throw SystemError("roomd runs in loopback mode: no room") }
        let s: any RoomBackend
        switch target {
        case .roomserver(let servers, let tls, let token, let role):
            var configuration = RoomSessionConfiguration(servers: [], token: token, role: role)
            configuration.endpoints = servers
            configuration.tls = tls
            configuration.requireMediaEncryption = !plainMedia
            s = try RoomSession(loop: loop, configuration: configuration, outgoing: outgoing,
                                incoming: incoming, externalSignal: wake.signal)
        case .janus(let configuration):
            // DTLS-SRTP needs the SRTP library whatever --plain-media says.
            RoomSession.prepareMediaEncryption()
            s = try JanusRoomSession(loop: loop, configuration: configuration, outgoing: outgoing,
                                     incoming: incoming)
        }
        s.onEvent = { [weak self] event in
            self?.followLoss(event)
            self?.followStreams(event)
            self?.followSending()
            self?.onEvent?(event)
        }
        if muted { s.setMute(true) }
        session = s
        s.start()
        followSending()
    }

    /// Starts the current session again after a leave (or a removal), with its configuration.
    func rejoin() -> Bool {
        guard let session else { return false }
        session.start()
        return true
    }

    /// Leaves properly, waiting at most `timeout` on the loop; then stops for good.
    func shutdown(timeout: Duration = .seconds(3)) {
        if let session {
            var left = false
            session.leave(completion: { _ in left = true })
            let deadline = monotonicNanoseconds() + timeout.monotonicNanosecondCount
            while !left && monotonicNanoseconds() < deadline { _ = try? loop.runOnce(timeout: .milliseconds(50)) }
        }
    }

    /// Reports at the interval the server asked for in its `welcome` (none if it asked for
    /// none); passes the server's `receiver_loss` for our own stream to the encoder.
    private func followLoss(_ event: RoomSessionEvent) {
        switch event {
        case .joined(let info):
            if let lossTimer { loop.cancel(lossTimer) }
            lossTimer = nil
            guard let interval = info.lossReportIntervalMs else { return }
            lossWindow = ReceiveLossWindow()
            let every = Duration.milliseconds(Int64(interval))
            lossTimer = loop.schedule(after: every, repeating: every) { [weak self] in self?.reportLoss() }
        case .receiverLoss(let permille, _):
            if leg == .room { engine.lossFeedback.report(lostPermille: permille) }
        default:
            break
        }
    }

    /// Frees the engine's jitter-buffer slot (and `stats.streams` row) of a stream whose sender
    /// is gone: it left (`participant_left`), or is not in the room we (re)joined (a server
    /// restart hands out new SSRCs), or we left the room. The release goes to the audio thread
    /// through the engine's SPSC ring; this is the thread that feeds its packet ring too.
    private func followStreams(_ event: RoomSessionEvent) {
        func note(_ p: ParticipantInfo) { if let ssrc = p.ssrc { streamsByParticipant[p.id] = ssrc } }
        switch event {
        case .joined(let info):
            streamsByParticipant = [:]
            for p in info.participants where p.id != info.participantID { note(p) }
            let present = Set(streamsByParticipant.values)
            for row in ownRows() where !present.contains(row.ssrc) {
                engine.releaseStream(ssrc: row.ssrc, leg: leg)
            }
        case .participantJoined(let p), .participantUpdated(let p):
            note(p)
        case .participantLeft(let id, _, let p):
            if let ssrc = streamsByParticipant.removeValue(forKey: id) ?? p?.ssrc { engine.releaseStream(ssrc: ssrc, leg: leg) }
        case .stateChanged(.disconnected):
            streamsByParticipant = [:]
            for row in ownRows() { engine.releaseStream(ssrc: row.ssrc, leg: leg) }
        default:
            break
        }
    }

    private func reportLoss() {
        let streams = lossWindow.next(ownRows())
        guard let session, !streams.isEmpty else { return }
        session.reportLoss(ssrcs: streams.map(\.ssrc), lostPermille: streams.map { UInt16($0.permille) })
    }

    /// After the engine stopped: nothing signals the eventfd any more.
    func close() {
        pendingTarget = nil
        if let lossTimer { loop.cancel(lossTimer) }
        lossTimer = nil
        if let sendingCheck { loop.cancel(sendingCheck) }
        sendingCheck = nil
        session?.stop()
        session = nil
        wake?.close()
        wake = nil
    }
}
