import RoomBase
import RoomJanus
import RoomMedia
import RoomModel
import RoomProtocol
import RoomSDP
import RoomSystem
import RoomWebRTC

/// roomd in a Janus AudioBridge room: the same `RoomBackend` the daemon drives for roomserver,
/// built from the WebSocket API client (`JanusConnection`), an SDP offer for one Opus stream and
/// the WebRTC media path (`WebRTCMediaTransport`: ICE, DTLS-SRTP, SRTP). It bridges the audio
/// engine's rings exactly as `RoomSession` does, so the engine, jitter buffer, meters and
/// stats are the same on both paths.
///
/// Recovery: whatever breaks (Janus restarts and the WebSocket closes, Janus hangs the
/// PeerConnection up, ICE consent is lost, the join times out), the session tears everything
/// down and joins again with a new offer after the same bounded back-off as roomserver's path;
/// after `failureTimeout` of trying it reports `failed` and keeps trying.
///
/// The appliance's states in an AudioBridge (docs/janus.md): on stage = unmuted in Janus;
/// audience, self mute and stepping down = `configure {muted: true}`; a raised hand is shown to
/// the room by the display name ("… (hand raised)") because AudioBridge has no hand; a
/// moderator's `unmute` (with the room's secret) puts a waiting appliance on the stage, and a
/// moderator's `mute` is a moderator mute. Requests AudioBridge has no equivalent for are
/// answered `unsupported`. Event-loop thread only.
public final class JanusRoomSession: RoomBackend {
    public let loop: EventLoop
    public private(set) var configuration: JanusRoomConfiguration
    public var onEvent: ((RoomSessionEvent) -> Void)?
    public private(set) var connectionState: RoomConnectionState = .idle
    /// The session's counters, with the media path's round trip from RTCP (Janus answers our
    /// reports; docs/webrtc.md, "RTCP").
    public var statistics: RoomSessionStatistics {
        var s = counters
        if let media = transport?.statistics {
            if let rtt = media.roundTripMs { s.lastMediaRTTMs = Int(rtt.rounded()) }
            s.srtpAuthenticationFailures = media.srtpRefused
        }
        return s
    }
    private var counters = RoomSessionStatistics()
    public private(set) var participants: [RoomParticipantID: ParticipantInfo] = [:]
    public private(set) var joinInfo: RoomJoinInfo?
    public private(set) var isSelfMuted = false
    public private(set) var isMediaPathUp = false
    public var backendName: String { "janus" }
    public var localParticipant: ParticipantInfo? { joinInfo.flatMap { participants[$0.participantID] } }
    public var isEffectivelyMuted: Bool { isSelfMuted || moderatorMuted }
    /// The Janus session's state, for tests and diagnostics.
    var janusState: JanusAudioBridgeSession.State? { connection?.session.state }

    private enum Phase: Equatable { case idle, joining, joined, waiting, stopped }
    private var phase = Phase.idle
    private let outgoing: SPSCRing<MediaPacket>
    private let incoming: SPSCRing<MediaPacket>
    private var connection: JanusConnection?
    private(set) var transport: WebRTCMediaTransport?
    private var localEndpoint: OpusAudioNegotiation.LocalEndpoint?
    private var stage = RoomStageState.off
    /// Janus says this appliance is muted although it asked to speak: a moderator's mute.
    private var moderatorMuted = false
    /// What was last asked of Janus, to tell a moderator's change from our own.
    private var askedJanusMuted = true
    /// `configure`s sent and not yet answered: until Janus has taken them, what it says of this
    /// appliance may be older than what was asked, and is not read as a moderator's doing.
    private var configuresPending = 0
    private var janusIDs: [UInt64: RoomParticipantID] = [:]
    private var nextLocalID: RoomParticipantID = 1
    private var ssrc: UInt32 = 0
    private var sequence: UInt16 = 0
    private var joinedBefore = false
    private var consecutiveFailures = 0
    private var failingSinceNs: UInt64?
    private var reportedFailed = false
    private var retryTimer: EventLoop.TimerID?
    private var joinTimer: EventLoop.TimerID?
    private var endpointIndex = 0
    private var random = SystemRandomNumberGenerator()
    private let sendBuffer: UnsafeMutableRawBufferPointer

    public init(loop: EventLoop, configuration: JanusRoomConfiguration, outgoing: SPSCRing<MediaPacket>,
                incoming: SPSCRing<MediaPacket>) throws(SystemError) {
        guard !configuration.endpoints.isEmpty else { throw SystemError("janus: no server address configured (room.server)") }
        self.loop = loop
        self.configuration = configuration
        self.outgoing = outgoing
        self.incoming = incoming
        sendBuffer = .allocate(byteCount: 2048, alignment: 8)
    }

    deinit {
        onEvent = nil
        teardown(politely: false)
        cancel(&retryTimer)
        sendBuffer.deallocate()
    }

    /// The servers, room and role for the next `start()` (only when not in a room).
    public func reconfigure(_ next: JanusRoomConfiguration) throws(SystemError) {
        guard phase == .idle || phase == .stopped else { throw SystemError("janus: leave the room before changing its server or role") }
        guard !next.endpoints.isEmpty else { throw SystemError("janus: no server address configured (room.server)") }
        configuration = next
        endpointIndex = 0
        joinedBefore = false
    }

    // MARK: Life cycle

    public func start() {
        guard phase == .idle || phase == .stopped else { return }
        stage = configuration.role == .streamer ? .onStage : .off
        moderatorMuted = false
        consecutiveFailures = 0
        reportedFailed = false
        failingSinceNs = monotonicNanoseconds()
        setState(joinedBefore ? .reconnecting : .connecting)
        attempt()
    }

    public func stop() {
        guard phase != .idle && phase != .stopped else { return }
        finish(.stopped, politely: false)
    }

    public func leave(completion: RoomRequestCompletion?) {
        guard phase != .idle && phase != .stopped else { completion?(.success(())); return }
        finish(.left, politely: true)
        // The leave/detach/destroy are queued on the WebSocket; give them a moment to go.
        loop.schedule(after: configuration.leaveLinger) { completion?(.success(())) }
    }

    private func finish(_ reason: RoomDisconnectReason, politely: Bool) {
        teardown(politely: politely)
        cancel(&retryTimer)
        phase = .stopped
        participants = [:]
        joinInfo = nil
        setState(.disconnected(reason))
    }

    private func attempt() {
        retryTimer = nil
        counters.connectAttempts += 1
        let endpoint = configuration.endpoints[endpointIndex % configuration.endpoints.count]
        let server: SocketAddress
        do {
            let addresses = try endpoint.resolve()
            server = addresses[consecutiveFailures % addresses.count]
        } catch {
            return attemptFailed("\(error)")
        }
        guard let host = LocalAddress.hostCandidate(toward: server) else {
            return attemptFailed("no IPv4 address to offer Janus as an ICE host candidate (no interface besides loopback is up)")
        }
        let media: WebRTCMediaTransport
        do { media = try WebRTCMediaTransport(loop: loop, address: try SocketAddress(ip: host, port: 0)) } catch {
            return attemptFailed("media socket on \(host): \(error)")
        }
        ssrc = UInt32.random(in: 1 ... .max, using: &random)
        media.onRTP = { [weak self] packet in self?.received(packet) }
        media.onState = { [weak self] state in self?.mediaStateChanged(state) }
        // Janus's receiver reports tell what it lost of our stream: the encoder's FEC follows it
        // (RoomLink passes `receiverLoss` on), as the roomserver's loss reports do there.
        media.onRemoteReport = { [weak self] report in
            guard let self, let lost = report.remoteFractionLost else { return }
            self.emit(.receiverLoss(lostPermille: Int((lost * 1000).rounded()), receivers: 1))
        }
        transport = media
        phase = .joining
        // With a STUN server: the NAT's address for this socket joins the offer (a Janus outside
        // the appliance's network checks it); without an answer the host candidate goes alone.
        if let stun = configuration.stunServer {
            let family = media.socket.localAddress.family
            guard let stunAddress = (try? stun.resolve())?.first(where: { $0.family == family }) else {
                Log.warning("janus: STUN server \(stun) does not resolve; offering the host candidate only")
                return offer(media, endpoint: endpoint, server: server, extra: [])
            }
            media.gatherServerReflexive(from: stunAddress) { [weak self, weak media] candidate in
                guard let self, let media, media === self.transport else { return }
                if candidate == nil { Log.warning("janus: no answer from STUN server \(stun); offering the host candidate only") }
                self.offer(media, endpoint: endpoint, server: server, extra: candidate.map { [$0] } ?? [])
            }
            return
        }
        offer(media, endpoint: endpoint, server: server, extra: [])
    }

    /// The offer (host candidate, and `extra`), then the WebSocket and the join.
    private func offer(_ media: WebRTCMediaTransport, endpoint: HostPort, server: SocketAddress, extra: [ICECandidate]) {
        var local = media.localEndpoint(ssrc: ssrc, cname: configuration.display, sends: true, receives: true)
        local.candidates += extra
        localEndpoint = local
        let offer = OpusAudioNegotiation.offer(local, sessionID: "\(UInt32.random(in: 1 ... .max, using: &random))")
        let c = JanusConnection(loop: loop, endpoint: endpoint, tls: configuration.tls,
                                session: JanusAudioBridgeSession(room: configuration.room, display: displayName, pin: configuration.pin))
        c.onOutput = { [weak self, weak c] output in
            guard let self, let c, c === self.connection else { return }
            self.handle(output)
        }
        connection = c
        askedJanusMuted = janusMuted
        do { try c.join(offer: offer.text, muted: askedJanusMuted) } catch {
            return attemptFailed("Janus at \(server): \(error)")
        }
        joinTimer = loop.schedule(after: configuration.joinTimeout) { [weak self] in
            guard let self else { return }
            self.joinTimer = nil
            self.attemptFailed("no PeerConnection with Janus at \(server) within \(self.configuration.joinTimeout) (Janus: \(self.connection.map { "\($0.session.state)" } ?? "-"), media: \(self.transport.map { "\($0.state)" } ?? "-"))")
        }
    }

    /// A join attempt that did not get as far as a working PeerConnection.
    private func attemptFailed(_ reason: String) {
        teardown(politely: true)
        consecutiveFailures += 1
        endpointIndex += 1
        Log.warning("janus: join attempt failed: \(reason)")
        // Janus may have said `joined` before the media failed: that was not a working room.
        if connectionState == .connected { setState(.reconnecting) }
        let now = monotonicNanoseconds()
        if !reportedFailed, now &- (failingSinceNs ?? now) >= configuration.failureTimeout.monotonicNanosecondCount {
            reportedFailed = true
            setState(.failed(reason: reason))
        }
        scheduleRetry()
    }

    /// A joined room that broke: join again at once (then back off).
    private func connectionLost(_ reason: String) {
        Log.warning("janus: room lost: \(reason); joining again")
        teardown(politely: true)
        counters.reconnects += 1
        failingSinceNs = monotonicNanoseconds()
        consecutiveFailures = 0
        reportedFailed = false
        setState(.reconnecting)
        scheduleRetry()
    }

    private func scheduleRetry() {
        phase = .waiting
        cancel(&retryTimer)
        let wait = consecutiveFailures == 0 ? .zero
            : configuration.backoff.delay(afterFailures: consecutiveFailures - 1, random: Double.random(in: 0 ... 1, using: &random))
        retryTimer = loop.schedule(after: wait) { [weak self] in self?.attempt() }
    }

    /// Closes the PeerConnection and the WebSocket. `politely`: leave, detach and destroy the
    /// Janus session first, so the room does not show a ghost until Janus's session timeout.
    private func teardown(politely: Bool) {
        cancel(&joinTimer)
        configuresPending = 0
        if let connection {
            connection.onOutput = nil
            if politely && connection.isOpen { connection.leave() } else { connection.close() }
        }
        connection = nil
        if let transport {
            transport.onState = nil
            transport.onRTP = nil
            transport.onRemoteReport = nil
            transport.close()
        }
        transport = nil
        if isMediaPathUp {
            isMediaPathUp = false
            emit(.mediaPathChanged(up: false))
        }
    }

    // MARK: Janus → appliance

    private func handle(_ output: JanusAudioBridgeSession.Output) {
        switch output {
        case .answer(let sdp):
            guard let transport, let localEndpoint else { return }
            do {
                let agreement = try OpusAudioNegotiation.accept(answer: try SessionDescription(parsing: sdp), to: localEndpoint)
                guard agreement.payloadType == RTPPacket.opusPayloadType else {
                    return attemptFailed("Janus answered Opus with payload type \(agreement.payloadType); roomd sends \(RTPPacket.opusPayloadType)")
                }
                transport.start(agreement, controlling: true)
                connection?.trickle(.end)
            } catch {
                attemptFailed("Janus's SDP answer: \(error)")
            }
        case .remoteCandidate(let trickle):
            if let text = trickle.candidate, let candidate = try? ICECandidate(parsing: text) { transport?.addRemoteCandidate(candidate) }
        case .joined(let id, let others):
            joined(janusID: id, others: others)
        case .participantsChanged(let list):
            for p in list { update(p) }
        case .participantLeft(let janusID):
            guard let id = janusIDs.removeValue(forKey: janusID) else { return }
            let info = participants.removeValue(forKey: id)
            emit(.participantLeft(id: id, reason: .left, participant: info))
        case .mediaUp:
            Log.info("janus: Janus reports the PeerConnection up")
        case .configured:
            configuresPending = max(0, configuresPending - 1)
        case .kicked:
            Log.notice("janus: a moderator removed this appliance from the room")
            emit(.removed(reason: .kicked, message: "removed by a moderator of the Janus room"))
            finish(.removed(.kicked, message: "removed by a moderator of the Janus room"), politely: false)
        case .refused(let why):
            Log.warning("janus: \(why)")
            emit(.requestFailed(RoomRequestFailure(requestID: 0, request: "moderate",
                                                   error: RoomRequestError(code: "refused", message: why))))
        case .janusReceivesAudio(let receiving):
            Log.info("janus: Janus \(receiving ? "receives" : "stopped receiving") this appliance's audio")
        case .hangup(let reason):
            phase == .joined ? connectionLost("Janus hung up: \(reason)") : attemptFailed("Janus hung up: \(reason)")
        case .failed(let reason):
            phase == .joined ? connectionLost(reason) : attemptFailed(reason)
        }
    }

    /// Janus's `joined`. Local participant ids are never reused within the session (a rejoin
    /// keeps those of the people still there and numbers newcomers on), so an id a moderator
    /// holds never names someone else. The failure counters are reset only when the media is up
    /// too: a join whose ICE or DTLS fails is a failed attempt.
    private func joined(janusID: UInt64, others: [PluginEvent.Participant]) {
        participants = [:]
        let me = localID(janusID)
        participants[me] = ParticipantInfo(id: me, userID: "janus:\(janusID)", name: configuration.display, role: configuration.role,
                                           stage: stage, muted: isEffectivelyMuted, moderator: configuration.secret != nil, ssrc: ssrc)
        for p in others where p.id != janusID { participants[localID(p.id)] = info(p) }
        let restored = joinedBefore
        joinInfo = RoomJoinInfo(room: "janus:\(configuration.room)", participantID: me, ssrc: ssrc, policy: .moderated,
                                speakerLimit: 0, participants: Array(participants.values), attributes: [:], tokenExpiresAt: 0,
                                restored: false, isRejoin: restored)
        joinedBefore = true
        phase = .joined
        counters.joins += 1
        setState(.connected)
        emit(.joined(joinInfo!))
        Log.notice("janus: joined AudioBridge room \(configuration.room) as \(janusID) with \(others.count) other(s)")
    }

    private func localID(_ janusID: UInt64) -> RoomParticipantID {
        if let id = janusIDs[janusID] { return id }
        let id = nextLocalID
        nextLocalID &+= 1
        janusIDs[janusID] = id
        return id
    }

    /// Another participant as roomd shows it. A name ending in " (hand raised)" is another
    /// appliance's raised hand (the convention `displayName` writes; browsers read it as text).
    private func info(_ p: PluginEvent.Participant) -> ParticipantInfo {
        let muted = p.muted ?? false
        var name = p.display ?? ""
        var stage = RoomStageState.onStage
        if name.hasSuffix(Self.handSuffix) {
            name.removeLast(Self.handSuffix.count)
            stage = .handRaised
        }
        return ParticipantInfo(id: localID(p.id), userID: "janus:\(p.id)", name: name, role: .streamer,
                               stage: stage, muted: muted, moderator: false)
    }

    static let handSuffix = " (hand raised)"

    /// Someone's display or mute changed, someone joined — or Janus tells this appliance that a
    /// moderator muted or unmuted it.
    private func update(_ p: PluginEvent.Participant) {
        if let me = joinInfo?.participantID, janusIDs[p.id] == me {
            guard configuresPending == 0, let muted = p.muted, muted != askedJanusMuted else { return }
            askedJanusMuted = muted
            if !muted {
                // A moderator unmuted this appliance: a raised hand (or the audience) is on
                // stage. The appliance's own mute stays (privacy wins): refreshSelf mutes it in
                // Janus again until someone in the room unmutes it here.
                let wasMuted = isEffectivelyMuted
                moderatorMuted = false
                setStage(.onStage)
                if wasMuted != isEffectivelyMuted { emit(.localMuteChanged(isEffectivelyMuted)) }
            } else if stage == .onStage && !moderatorMuted {
                moderatorMuted = true
                emit(.localMuteChanged(true))
            }
            refreshSelf()
            return
        }
        let known = janusIDs[p.id] != nil
        var next = info(p)
        if known, let old = participants[next.id] {
            if p.display == nil { next.name = old.name; next.stage = old.stage }
            if p.muted == nil { next.muted = old.muted }
            guard next != old else { return }
            participants[next.id] = next
            emit(.participantUpdated(next))
            if next.stage == .handRaised && old.stage != .handRaised && configuration.secret != nil {
                emit(.stageRequest(participantID: next.id))
            }
        } else {
            participants[next.id] = next
            emit(.participantJoined(next))
            if next.stage == .handRaised && configuration.secret != nil { emit(.stageRequest(participantID: next.id)) }
        }
    }

    // MARK: Media

    private func mediaStateChanged(_ state: WebRTCMediaTransport.State) {
        switch state {
        case .connected(let profile):
            cancel(&joinTimer)
            consecutiveFailures = 0
            reportedFailed = false
            failingSinceNs = nil
            isMediaPathUp = true
            Log.notice("janus: media up (ICE, DTLS, \(profile))")
            emit(.mediaPathChanged(up: true))
        case .failed(let why):
            if why == "closed" { return }
            phase == .joined && isMediaPathUp ? connectionLost("media: \(why)") : attemptFailed("media: \(why)")
        default:
            break
        }
    }

    /// A decrypted RTP packet from Janus (the room's mix) to the engine's incoming ring.
    private func received(_ packet: UnsafeMutableRawBufferPointer) {
        let arrival = mediaClockSamples(nanoseconds: monotonicNanoseconds())
        guard let p = try? MediaPacket(rtp: UnsafeRawBufferPointer(packet), arrivalSamples: arrival) else {
            counters.garbageDatagrams += 1
            return
        }
        if incoming.push(p) { counters.packetsReceived += 1 } else { counters.droppedIncomingRingFull += 1 }
    }

    /// `connectionState` as well as the phase: see RoomSession's.
    public var isSendingMedia: Bool {
        phase == .joined && connectionState == .connected && isMediaPathUp && stage == .onStage && !isSelfMuted && !moderatorMuted
    }

    public func drainOutgoingMedia() {
        let sending = isSendingMedia
        while var packet = outgoing.pop() {
            guard sending, let transport else {
                if phase != .joined || !isMediaPathUp { counters.droppedNotConnected += 1 }
                else if stage != .onStage { counters.droppedNotOnStage += 1 }
                else { counters.droppedMuted += 1 }
                continue
            }
            packet.ssrc = ssrc
            packet.sequenceNumber = sequence
            sequence &+= 1
            guard let n = try? packet.serializeRTP(into: sendBuffer),
                  transport.sendRTP(UnsafeRawBufferPointer(rebasing: sendBuffer[0 ..< n])) else {
                counters.droppedSendFailed += 1
                continue
            }
            counters.packetsSent += 1
        }
    }

    /// AudioBridge takes no loss reports; Janus's RTCP reports reach the encoder instead.
    public func reportLoss(ssrcs: [UInt32], lostPermille: [UInt16]) -> Bool { false }

    // MARK: Appliance → Janus

    /// Unmuted in Janus only when on stage and not muted by anyone.
    private var janusMuted: Bool { !(stage == .onStage && !isSelfMuted && !moderatorMuted) }

    /// What browsers see as this appliance's name: the hand, which AudioBridge has no flag
    /// for, is shown in it.
    private var displayName: String {
        stage == .handRaised ? configuration.display + Self.handSuffix : configuration.display
    }

    /// Sends the mute and the name to Janus when they changed, and tells the daemon.
    private func refreshSelf() {
        let muted = janusMuted
        if let connection, muted != askedJanusMuted || connection.session.display != displayName {
            askedJanusMuted = muted
            connection.configure(muted: muted, display: displayName)
            if connection.session.state == .joined { configuresPending += 1 }
        }
        guard let me = joinInfo?.participantID, var info = participants[me] else { return }
        info.stage = stage
        info.muted = isEffectivelyMuted
        if info != participants[me] {
            participants[me] = info
            emit(.participantUpdated(info))
        }
    }

    private func setStage(_ next: RoomStageState) {
        guard next != stage else { return }
        stage = next
        emit(.localStageChanged(next))
    }

    private func done(_ completion: RoomRequestCompletion?, _ error: RoomRequestError? = nil, request: String) -> Int? {
        loop.schedule(after: .zero) { [weak self] in
            if let error {
                if let completion { completion(.failure(error)) } else {
                    self?.emit(.requestFailed(RoomRequestFailure(requestID: 0, request: request, error: error)))
                }
            } else {
                completion?(.success(()))
            }
        }
        return nil
    }

    private func unsupported(_ what: String, _ completion: RoomRequestCompletion?, request: String) -> Int? {
        done(completion, RoomRequestError(code: RoomRequestError.unsupported,
                                          message: "a Janus AudioBridge room has no \(what) (docs/janus.md)"), request: request)
    }

    private var notJoined: RoomRequestError {
        RoomRequestError(code: RoomRequestError.notConnected, message: "not in a Janus room")
    }

    public func setMute(_ muted: Bool, completion: RoomRequestCompletion?) -> Int? {
        isSelfMuted = muted
        if !muted { moderatorMuted = false }
        refreshSelf()
        emit(.localMuteChanged(isEffectivelyMuted))
        return done(completion, request: "set_mute")
    }

    public func raiseHand(completion: RoomRequestCompletion?) -> Int? {
        guard phase == .joined else { return done(completion, notJoined, request: "raise_hand") }
        guard stage == .off else {
            return done(completion, RoomRequestError(code: "invalid_state", message: "the hand is already raised or the appliance is on stage"), request: "raise_hand")
        }
        setStage(.handRaised)
        refreshSelf()
        return done(completion, request: "raise_hand")
    }

    public func lowerHand(completion: RoomRequestCompletion?) -> Int? {
        guard stage == .handRaised else {
            return done(completion, RoomRequestError(code: "invalid_state", message: "no hand raised"), request: "lower_hand")
        }
        setStage(.off)
        refreshSelf()
        return done(completion, request: "lower_hand")
    }

    public func stepDown(completion: RoomRequestCompletion?) -> Int? {
        guard stage == .onStage else {
            return done(completion, RoomRequestError(code: "invalid_state", message: "not on stage"), request: "step_down")
        }
        setStage(.off)
        refreshSelf()
        return done(completion, request: "step_down")
    }

    public func acceptInvite(completion: RoomRequestCompletion?) -> Int? { unsupported("invitations", completion, request: "accept_invite") }
    public func declineInvite(completion: RoomRequestCompletion?) -> Int? { unsupported("invitations", completion, request: "decline_invite") }
    /// Moderation with the room's secret: AudioBridge `unmute` (approve a raised hand), `mute`
    /// (demote, mute) and `kick`. Janus tells everyone the outcome; a refusal (a wrong secret)
    /// comes back as a `requestFailed` event.
    private func moderate(_ request: String, _ id: RoomParticipantID, _ completion: RoomRequestCompletion?, wire: String) -> Int? {
        guard phase == .joined, let connection else { return done(completion, notJoined, request: wire) }
        guard let secret = configuration.secret else {
            return done(completion, RoomRequestError(code: "not_moderator",
                                                     message: "moderating a Janus room needs its secret (room.janus_secret)"), request: wire)
        }
        guard let janusID = janusIDs.first(where: { $0.value == id && $0.value != joinInfo?.participantID })?.key else {
            return done(completion, RoomRequestError(code: "unknown_participant", message: "no participant \(id) in the room"), request: wire)
        }
        connection.moderate(request, participant: janusID, secret: secret)
        return done(completion, request: wire)
    }

    public func approve(_ id: RoomParticipantID, completion: RoomRequestCompletion?) -> Int? {
        moderate("unmute", id, completion, wire: "approve")
    }
    public func deny(_ id: RoomParticipantID, completion: RoomRequestCompletion?) -> Int? {
        unsupported("way to lower someone else's hand", completion, request: "deny")
    }
    public func invite(_ id: RoomParticipantID, completion: RoomRequestCompletion?) -> Int? {
        unsupported("invitations", completion, request: "invite")
    }
    public func demote(_ id: RoomParticipantID, completion: RoomRequestCompletion?) -> Int? {
        moderate("mute", id, completion, wire: "demote")
    }
    public func muteParticipant(_ id: RoomParticipantID, completion: RoomRequestCompletion?) -> Int? {
        moderate("mute", id, completion, wire: "mute_participant")
    }
    public func kick(_ id: RoomParticipantID, reason: String?, completion: RoomRequestCompletion?) -> Int? {
        moderate("kick", id, completion, wire: "kick")
    }
    public func sendMessage(to: RoomParticipantID?, data: String, completion: RoomRequestCompletion?) -> Int? {
        unsupported("messages", completion, request: "app_message")
    }
    public func setAttribute(key: String, value: String?, completion: RoomRequestCompletion?) -> Int? {
        unsupported("room attributes", completion, request: "set_attribute")
    }
    public func refreshToken(_ token: String, completion: RoomRequestCompletion?) -> Int? {
        unsupported("tokens", completion, request: "refresh_token")
    }

    // MARK: Plumbing

    private func setState(_ state: RoomConnectionState) {
        guard state != connectionState else { return }
        connectionState = state
        emit(.stateChanged(state))
    }

    private func emit(_ event: RoomSessionEvent) { onEvent?(event) }

    private func cancel(_ timer: inout EventLoop.TimerID?) {
        if let t = timer { loop.cancel(t) }
        timer = nil
    }
}
