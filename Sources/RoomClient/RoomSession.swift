import RoomBase
import RoomMedia
import RoomMediaCrypto
import RoomModel
import RoomProtocol
import RoomSystem
import RoomTLS

/// roomd's membership of one voice room: the signalling client (TCP, docs/protocol.md) with
/// automatic recovery and failover, and the UDP media session bridging the audio engine's
/// rings to RTP. See docs/room-client.md.
///
/// Threading: lives on one `EventLoop` thread (the daemon's loop); create it, call it and
/// receive its events there. It is not `Sendable`. The only thing another thread touches is
/// `outgoingSignal` (the audio thread calls `signal()` after pushing to the outgoing ring)
/// and the two rings themselves (single producer / single consumer each).
public final class RoomSession {
    public let loop: EventLoop
    public private(set) var configuration: RoomSessionConfiguration
    /// Events, on the loop thread. Set before `start()`.
    public var onEvent: ((RoomSessionEvent) -> Void)?
    public private(set) var connectionState: RoomConnectionState = .idle
    public internal(set) var statistics = RoomSessionStatistics()

    // Local model (from `welcome`, kept up to date by events).
    public private(set) var participants: [RoomParticipantID: ParticipantInfo] = [:]
    public private(set) var attributes: [String: String] = [:]
    public private(set) var joinInfo: RoomJoinInfo?
    /// This participant as the server last described it.
    public var localParticipant: ParticipantInfo? {
        joinInfo.flatMap { participants[$0.participantID] }
    }
    /// Self mute as asked by `setMute` (applied locally at once, before the server answers).
    public private(set) var isSelfMuted = false
    /// Muted for the room, by itself or by a moderator: what the mute LED shows.
    public var isEffectivelyMuted: Bool { isSelfMuted || (localParticipant?.muted ?? false) }
    /// True when outgoing packets are sent (joined, on stage, not muted).
    /// The connection state counts too: a lost connection announces `reconnecting` before the
    /// phase moves on, and whoever follows the events must already read "not sending" then.
    public var isSendingMedia: Bool {
        guard phase == .joined, connectionState == .connected, let me = localParticipant else { return false }
        return me.stage == .onStage && !me.muted && !isSelfMuted
    }
    /// True once the server answered a binding datagram on this connection, until the media
    /// path goes silent.
    public internal(set) var isMediaPathUp = false

    // Media bridge.
    let outgoing: SPSCRing<MediaPacket>
    let incoming: SPSCRing<MediaPacket>
    private var signalSource: EventSignalSource?
    /// Hand this to the audio engine: it calls `signal()` after pushing to the outgoing ring.
    public let outgoingSignal: EventSignal

    // Connection.
    enum Phase: Equatable { case idle, connecting, awaitingWelcome, joined, leaving, waiting, stopped }
    var phase: Phase = .idle
    private var connection: (any StreamTransport)?
    /// Made from `configuration.tls` on the first attempt (the CA file is read then), and again
    /// after `reconfigure`.
    private var tlsContext: TLSClientContext?
    private var decoder: FrameDecoder
    private let encoder: FrameEncoder
    private var readBuffer: [UInt8]
    private var addressIndex = 0
    /// The address of the server connected to (or being tried), after name resolution.
    public internal(set) var serverAddress: SocketAddress?
    private var consecutiveFailures = 0
    private var disconnectedSinceNs: UInt64?
    private var reportedFailed = false
    private var askedRole: RoomRole
    private var previousParticipantID: RoomParticipantID?
    private var joinedBefore = false
    private var lastReceivedNs: UInt64 = 0
    private var lastPingNs: UInt64 = 0
    private var retryTimer: EventLoop.TimerID?
    private var handshakeTimer: EventLoop.TimerID?
    private var tickTimer: EventLoop.TimerID?
    private var leaveTimer: EventLoop.TimerID?
    private var nextRequestID = 1
    private var pending: [Int: (type: String, completion: RoomRequestCompletion?)] = [:]
    /// Everyone waiting for the leave under way (a second `leave` while leaving waits too).
    private var leaveCompletions: [RoomRequestCompletion] = []
    private var random = SystemRandomNumberGenerator()

    // Media state (RoomSessionMedia.swift).
    var udp: UDPSocket?
    var mediaDestination: SocketAddress?
    var mediaKey: MediaKey?
    /// SRTP for this connection's media (nil: plain RTP, the server sent no keys).
    var mediaCrypto: (uplink: SRTPSession, downlink: SRTPSession)?
    /// The keys `mediaCrypto` was made from (tests decrypt a capture with them; never logged).
    var mediaEncryption: MediaEncryption?
    var ssrc: UInt32 = 0
    /// The SSRC each participant was last shown with (the server shows one only while its
    /// participant is on stage; kept after a demotion, whose SSRC may still have been heard).
    var shownSSRCs: [RoomParticipantID: UInt32] = [:]
    /// SSRCs of participants who left, refused before SRTP looks at them: libsrtp's replay window
    /// for a stream goes when the stream is forgotten, and a departed sender's recorded packets
    /// then verified again under this connection's unchanged key (issue 27). The server never
    /// gives a departed SSRC to anyone else in the room. Emptied with each new key (a welcome).
    var departedSSRCs: Set<UInt32> = []
    /// RTP sequence of the packets actually sent. The engine numbers every frame it hands
    /// over, but frames dropped here (muted, off stage) never reach anyone: listeners would
    /// count them as lost and conceal. Timestamps keep their gap, as after DTX.
    var sequence: UInt16 = 0
    var lastBindingSentNs: UInt64 = 0
    /// The next binding retry before the first answer, and the wait that led to it.
    var bindingRetryTimer: EventLoop.TimerID?
    var bindingRetryWait: Duration = .zero
    var lastBindingAnswerNs: UInt64 = 0
    var mediaStartNs: UInt64 = 0
    var lastBindingTimestampMs: UInt64 = 0
    /// The address cookie from the server's last answer or challenge, echoed in every binding
    /// (docs/protocol.md, "Binding/keepalive datagram"); nil until the first answer.
    var bindingCookie: AddressCookie?
    /// Challenges answered at once since the last ordinary answer: a path on which the server
    /// never sees the cookie come back (a NAT that changes the port per datagram) must not
    /// turn into a ping-pong; after a few the client waits for its next scheduled binding.
    var challengesAnswered = 0
    let sendBuffer: UnsafeMutableRawBufferPointer
    let receiveBuffer: UnsafeMutableRawBufferPointer

    /// Sets the SRTP library up now rather than at the first `welcome` (its crypto kernel runs
    /// known-answer tests of every cipher, tens of milliseconds the first join would otherwise
    /// wait). roomd calls it at start; harmless to call again.
    public static func prepareMediaEncryption() {
        do { try SRTPLibrary.ready() } catch { Log.error("room: SRTP unavailable: \(error)") }
    }

    /// - Parameters:
    ///   - outgoing: encoded packets from the audio thread (it pushes, this session pops).
    ///   - incoming: received packets for the audio thread (this session pushes).
    ///   - externalSignal: the eventfd the audio thread already signals, when the owner keeps
    ///     one across sessions (roomd creates a session only when a room is configured, possibly
    ///     after the engine started); the owner then calls `drainOutgoingMedia()` on it. When
    ///     nil the session makes its own and exposes it as `outgoingSignal`.
    public init(
        loop: EventLoop, configuration: RoomSessionConfiguration,
        outgoing: SPSCRing<MediaPacket>, incoming: SPSCRing<MediaPacket>, externalSignal: EventSignal? = nil
    ) throws(SystemError) {
        guard !configuration.endpoints.isEmpty else { throw SystemError("room session: no server address configured") }
        self.loop = loop
        self.configuration = configuration
        self.outgoing = outgoing
        self.incoming = incoming
        askedRole = configuration.role
        decoder = FrameDecoder(maxFrameSize: configuration.maxFrameSize)
        encoder = FrameEncoder(maxFrameSize: configuration.maxFrameSize)
        readBuffer = [UInt8](repeating: 0, count: 16 * 1024)
        sendBuffer = .allocate(byteCount: 2048, alignment: 8)
        receiveBuffer = .allocate(byteCount: 2048, alignment: 8)
        if let externalSignal {
            outgoingSignal = externalSignal
            return
        }
        // The handler needs `self`, which is not complete yet: route through a box.
        let box = WeakSessionBox()
        let source = try EventSignalSource(loop: loop) { _ in box.session?.drainOutgoing() }
        signalSource = source
        outgoingSignal = source.signal
        box.session = self
    }

    /// Sends (or drops, with a reason counted) what the audio thread queued. Call it from the
    /// handler of an `externalSignal`.
    public func drainOutgoingMedia() { drainOutgoing() }

    /// Replaces the servers, token and role for the next `start()`. Only when not in a room
    /// (idle, or disconnected after `leave`/`stop`): a session is one membership at a time.
    public func reconfigure(servers: [SocketAddress], token: String, role: RoomRole) throws(SystemError) {
        try reconfigure(endpoints: servers.map(HostPort.init(address:)), token: token, role: role)
    }

    /// The same with servers that may be host names, and new TLS settings when `tls` is given:
    /// `.none` keeps the current ones, `.some(nil)` switches to plain signalling.
    public func reconfigure(endpoints: [HostPort], token: String, role: RoomRole, tls: TLSClientSettings?? = .none) throws(SystemError) {
        guard phase == .idle || phase == .stopped else { throw SystemError("room session: leave the room before changing its servers or role") }
        guard !endpoints.isEmpty else { throw SystemError("room session: no server address configured") }
        configuration.endpoints = endpoints
        if case .some(let tls) = tls { configuration.tls = tls }
        configuration.token = token
        configuration.role = role
        askedRole = role
        tlsContext = nil
        addressIndex = 0
        previousParticipantID = nil
        joinedBefore = false
    }

    deinit {
        pending = [:]  // no callbacks from a session being destroyed
        onEvent = nil
        teardownConnection()
        cancelTimer(&retryTimer)
        cancelTimer(&leaveTimer)
        signalSource?.close()
        sendBuffer.deallocate()
        receiveBuffer.deallocate()
    }

    // MARK: Life cycle

    /// Starts joining (from `idle`, or again after `disconnected`).
    public func start() {
        switch phase {
        case .idle, .stopped: break
        default: return
        }
        reportedFailed = false
        consecutiveFailures = 0
        disconnectedSinceNs = monotonicNanoseconds()
        setState(joinedBefore ? .reconnecting : .connecting)
        attempt()
    }

    /// Closes everything at once without telling the server (it sees the connection drop and
    /// keeps the participant for its grace period). State becomes `disconnected(.stopped)`.
    public func stop() {
        guard phase != .stopped && phase != .idle else { return }
        finish(.stopped)
    }

    /// Leaves the room: `leave`, then close after the server's `ok` (or `leaveTimeout`).
    /// No reconnect afterwards. State becomes `disconnected(.left)`.
    public func leave(completion: RoomRequestCompletion? = nil) {
        switch phase {
        case .joined:
            guard sendRequest(.leave, completion: nil) != nil else {
                finish(.left)
                completion?(.success(()))
                return
            }
            phase = .leaving
            if let completion { leaveCompletions.append(completion) }
            leaveTimer = loop.schedule(after: configuration.leaveTimeout) { [weak self] in
                self?.leaveTimer = nil
                self?.finish(.left)
            }
        case .leaving:
            if let completion { leaveCompletions.append(completion) }
        case .idle, .stopped:
            completion?(.success(()))
        default:
            finish(.left)
            completion?(.success(()))
        }
    }

    /// Ends the membership, whatever the reason; a leave under way is answered (it is over,
    /// even if a kick or a stop ended it first).
    private func finish(_ reason: RoomDisconnectReason) {
        teardownConnection()
        cancelTimer(&retryTimer)
        cancelTimer(&leaveTimer)
        phase = .stopped
        setState(.disconnected(reason))
        let waiting = leaveCompletions
        leaveCompletions = []
        for completion in waiting { completion(.success(())) }
    }

    // MARK: Connecting

    private func attempt() {
        retryTimer = nil
        let endpoint = configuration.endpoints[addressIndex % configuration.endpoints.count]
        let address: SocketAddress
        do {
            let addresses = try endpoint.resolve()
            address = addresses[consecutiveFailures % addresses.count]  // a failure moves to the next one
        } catch {
            statistics.connectAttempts += 1
            attemptFailed("\(error)")
            return
        }
        serverAddress = address
        statistics.connectAttempts += 1
        phase = .connecting
        decoder = FrameDecoder(maxFrameSize: configuration.maxFrameSize)
        let connection: any StreamTransport
        do {
            let stream = try StreamConnection.connect(to: address, loop: loop)
            if let tls = configuration.tls {
                let context: TLSClientContext
                if let tlsContext { context = tlsContext } else {
                    do {
                        context = try TLSClientContext(settings: tls)
                    } catch {
                        // A missing or broken CA file does not mend itself: say so at once.
                        stream.close()
                        attemptFailed("\(error)", fatal: true)
                        return
                    }
                    tlsContext = context
                }
                connection = try TLSConnection(stream: stream, role: .client(context, serverName: endpoint.host), loop: loop)
            } else {
                connection = stream
            }
        } catch {
            attemptFailed("\(error)")
            return
        }
        connection.setEventHandler { [weak self, weak connection] event in
            guard let self, let connection else { return }
            self.handle(connection, event)
        }
        self.connection = connection
        handshakeTimer = loop.schedule(after: configuration.handshakeTimeout) { [weak self] in
            guard let self else { return }
            self.handshakeTimer = nil
            self.attemptFailed("no welcome from \(address) within \(self.configuration.handshakeTimeout)")
        }
    }

    /// A connection attempt that did not end in `welcome`.
    private func attemptFailed(_ reason: String, fatal: Bool = false) {
        teardownConnection()
        consecutiveFailures += 1
        addressIndex += 1  // failover: the next attempt goes to the next address
        Log.warning("room: connection attempt failed: \(reason)")
        let now = monotonicNanoseconds()
        let since = disconnectedSinceNs ?? now
        if (!reportedFailed
            && (fatal || consecutiveFailures >= configuration.failureThreshold
                || now &- since >= configuration.failureTimeout.monotonicNanosecondCount))
            // A certificate problem replaces an earlier reason (the server was down, then came
            // back with the wrong certificate): the installer must see the current one.
            || (reportedFailed && fatal)
        {
            reportedFailed = true
            setState(.failed(reason: reason))
        }
        scheduleRetry()
    }

    private func scheduleRetry() {
        phase = .waiting
        let r = Double.random(in: 0 ... 1, using: &random)
        let delay = reportedFailed
            ? configuration.backoff.slowest(random: r)
            : configuration.backoff.delay(afterFailures: consecutiveFailures, random: r)
        cancelTimer(&retryTimer)
        retryTimer = loop.schedule(after: delay) { [weak self] in self?.attempt() }
    }

    /// A joined connection ended without a removal: recover.
    private func connectionLost(_ reason: String) {
        if phase == .leaving {
            finish(.left)
            return
        }
        guard phase == .joined else {
            attemptFailed(reason)
            return
        }
        Log.warning("room: connection to \(serverAddress.map { "\($0)" } ?? "?") lost: \(reason)")
        teardownConnection()
        statistics.reconnects += 1
        consecutiveFailures = 0
        reportedFailed = false
        disconnectedSinceNs = monotonicNanoseconds()
        // The first retry goes to the same server: it keeps our participant (and stage) for
        // its grace period. Failures from then on rotate through the list.
        setState(.reconnecting)
        scheduleRetry()
    }

    /// Closes the TCP connection and the media socket, cancels per-connection timers and
    /// fails the requests still waiting for an answer. Silent (no state change).
    private func teardownConnection() {
        if let connection {
            connection.setEventHandler(nil)
            connection.close()
        }
        connection = nil
        cancelTimer(&handshakeTimer)
        cancelTimer(&tickTimer)
        closeMedia()
        let waiting = pending
        pending = [:]
        for (id, request) in waiting.sorted(by: { $0.key < $1.key }) {
            fail(id: id, type: request.type, completion: request.completion,
                 RoomRequestError(code: RoomRequestError.connectionLost, message: "the connection closed before an answer"))
        }
    }

    private func cancelTimer(_ timer: inout EventLoop.TimerID?) {
        if let t = timer { loop.cancel(t) }
        timer = nil
    }

    private func setState(_ state: RoomConnectionState) {
        guard state != connectionState else { return }
        connectionState = state
        Log.info("room: \(state)")
        emit(.stateChanged(state))
    }

    func emit(_ event: RoomSessionEvent) { onEvent?(event) }

    // MARK: Signalling I/O

    private func handle(_ c: any StreamTransport, _ event: StreamConnection.Event) {
        guard c === connection else { return }
        switch event {
        case .connected:
            lastReceivedNs = monotonicNanoseconds()
            phase = .awaitingWelcome
            if let tls = c as? TLSConnection {
                let ms = tls.handshakeDuration.map { " in \(formatMilliseconds($0))" } ?? ""
                Log.info("room: signalling to \(c.peerAddress) over \(tls.sessionDescription), server certificate checked\(ms)")
            }
            let hello = SignalMessage.Hello(
                client: configuration.clientName, token: configuration.token, role: askedRole,
                previousParticipantID: previousParticipantID)
            if !send(SignalMessage(.hello(hello))) { attemptFailed("cannot send hello") }
        case .readable:
            readAvailable(c)
        case .drained:
            break
        case .closed(let error):
            // A certificate that fails its checks will fail the same way next time: report
            // `failed` with the reason now, so `roomctl status` shows it (the session keeps
            // trying, for the installer who is fixing the server meanwhile).
            if let tls = c as? TLSConnection, tls.failedCertificateChecks, phase != .joined {
                attemptFailed("\(error)", fatal: true)
            } else {
                connectionLost("\(error)")
            }
        }
    }

    private func readAvailable(_ c: any StreamTransport) {
        var frames: [[UInt8]] = []
        var ended = false
        var framingError: FrameError?
        for _ in 0 ..< 16 {
            let result: StreamConnection.ReadResult
            do {
                result = try readBuffer.withUnsafeMutableBytes { (raw) throws(SystemError) in try c.read(into: raw) }
            } catch {
                connectionLost("\(error)")
                return
            }
            guard case .bytes(let n) = result else {
                ended = result == .endOfStream
                break
            }
            do {
                try decoder.feed(readBuffer[0 ..< n], into: &frames)
            } catch {
                framingError = error
                break
            }
        }
        if !frames.isEmpty { lastReceivedNs = monotonicNanoseconds() }
        for frame in frames {
            // A handler may have closed or replaced the connection (removed, welcome error).
            guard c === connection else { return }
            handleFrame(frame)
        }
        guard c === connection else { return }
        if let framingError {
            connectionLost("framing error from server: \(framingError)")
        } else if ended {
            connectionLost("the server closed the connection")
        }
    }

    @discardableResult
    private func send(_ message: SignalMessage) -> Bool {
        guard let connection else { return false }
        do {
            let bytes = try encoder.frame(try message.encode())
            return connection.write(bytes) == .accepted
        } catch {
            Log.error("room: cannot encode \(message.body.typeName): \(error)")
            return false
        }
    }

    private func handleFrame(_ frame: [UInt8]) {
        let message: SignalMessage
        do {
            message = try SignalMessage.decode(frame)
        } catch {
            statistics.malformedFrames += 1
            Log.warning("room: dropped a frame from the server: \(error)")
            return
        }
        if phase == .awaitingWelcome {
            handleHandshake(message)
        } else {
            handleMessage(message)
        }
    }

    private func handleHandshake(_ message: SignalMessage) {
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
        consecutiveFailures = 0
        reportedFailed = false
        disconnectedSinceNs = nil
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

    // MARK: Messages after welcome

    private func handleMessage(_ message: SignalMessage) {
        switch message.body {
        case .ok(let requestID):
            if let request = pending.removeValue(forKey: requestID) {
                if request.type == "leave" {
                    finish(.left)
                    return
                }
                request.completion?(.success(()))
            }
        case .error(let info):
            let error = RoomRequestError(code: info.code, message: info.message)
            if let requestID = info.requestID, let request = pending.removeValue(forKey: requestID) {
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
    private func noteLocalChange(from old: ParticipantInfo?, to new: ParticipantInfo, force: Bool) {
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

    // MARK: Requests

    @discardableResult
    private func sendRequest(_ body: SignalMessage.Body, completion: RoomRequestCompletion?) -> Int? {
        let id = nextRequestID
        nextRequestID += 1
        guard phase == .joined, connection != nil else {
            failLater(id: id, type: body.typeName, completion: completion,
                      RoomRequestError(code: RoomRequestError.notConnected, message: "not joined to a room (\(connectionState))"))
            return nil
        }
        let message = SignalMessage(id: id, body)
        let bytes: [UInt8]
        do {
            bytes = try encoder.frame(try message.encode())
        } catch let error as SignalMessageError {
            failLater(id: id, type: body.typeName, completion: completion,
                      RoomRequestError(code: error.code, message: error.description))
            return nil
        } catch {
            failLater(id: id, type: body.typeName, completion: completion,
                      RoomRequestError(code: .invalidField, message: "\(error)"))
            return nil
        }
        switch connection!.write(bytes) {
        case .accepted:
            pending[id] = (body.typeName, completion)
            return id
        case .backpressure:
            failLater(id: id, type: body.typeName, completion: completion,
                      RoomRequestError(code: RoomRequestError.backpressure, message: "the server is not reading"))
            return nil
        case .closed:
            failLater(id: id, type: body.typeName, completion: completion,
                      RoomRequestError(code: RoomRequestError.connectionLost, message: "the connection is closed"))
            return nil
        }
    }

    /// Never calls back re-entrantly from inside the request call.
    private func failLater(id: Int, type: String, completion: RoomRequestCompletion?, _ error: RoomRequestError) {
        loop.schedule(after: .zero) { [weak self] in
            self?.fail(id: id, type: type, completion: completion, error)
        }
    }

    private func fail(id: Int, type: String, completion: RoomRequestCompletion?, _ error: RoomRequestError) {
        if let completion {
            completion(.failure(error))
        } else {
            emit(.requestFailed(RoomRequestFailure(requestID: id, request: type, error: error)))
        }
    }

    // Each request returns its id (nil when it could not be sent; the failure still arrives,
    // asynchronously, through `completion` or a `requestFailed` event).

    @discardableResult public func raiseHand(completion: RoomRequestCompletion? = nil) -> Int? {
        sendRequest(.raiseHand, completion: completion)
    }
    @discardableResult public func lowerHand(completion: RoomRequestCompletion? = nil) -> Int? {
        sendRequest(.lowerHand, completion: completion)
    }
    @discardableResult public func stepDown(completion: RoomRequestCompletion? = nil) -> Int? {
        sendRequest(.stepDown, completion: completion)
    }
    @discardableResult public func acceptInvite(completion: RoomRequestCompletion? = nil) -> Int? {
        sendRequest(.acceptInvite, completion: completion)
    }
    @discardableResult public func declineInvite(completion: RoomRequestCompletion? = nil) -> Int? {
        sendRequest(.declineInvite, completion: completion)
    }
    /// Tells the server how many packets of each sender were lost since the previous report
    /// (`lostPermille[i]` for `ssrcs[i]`), so the senders protect their streams only when
    /// someone loses packets. A fire-and-forget event: false when not joined, or when the
    /// server takes no reports (its `welcome` had no `loss_report_interval_ms`).
    @discardableResult public func reportLoss(ssrcs: [UInt32], lostPermille: [UInt16]) -> Bool {
        guard phase == .joined, joinInfo?.lossReportIntervalMs != nil, !ssrcs.isEmpty else { return false }
        return send(SignalMessage(.lossReport(.init(ssrcs: ssrcs, lostPermille: lostPermille))))
    }

    /// Self mute. Takes effect locally at once (no packet leaves after this call when
    /// muting); the server's `participant_updated` confirms it to everyone. Remembered across
    /// reconnects.
    @discardableResult public func setMute(_ muted: Bool, completion: RoomRequestCompletion? = nil) -> Int? {
        isSelfMuted = muted
        return sendRequest(.setMute(muted: muted), completion: completion)
    }
    @discardableResult public func approve(_ id: RoomParticipantID, completion: RoomRequestCompletion? = nil) -> Int? {
        sendRequest(.approve(participantID: id), completion: completion)
    }
    @discardableResult public func deny(_ id: RoomParticipantID, completion: RoomRequestCompletion? = nil) -> Int? {
        sendRequest(.deny(participantID: id), completion: completion)
    }
    @discardableResult public func invite(_ id: RoomParticipantID, completion: RoomRequestCompletion? = nil) -> Int? {
        sendRequest(.invite(participantID: id), completion: completion)
    }
    @discardableResult public func demote(_ id: RoomParticipantID, completion: RoomRequestCompletion? = nil) -> Int? {
        sendRequest(.demote(participantID: id), completion: completion)
    }
    @discardableResult public func muteParticipant(_ id: RoomParticipantID, completion: RoomRequestCompletion? = nil) -> Int? {
        sendRequest(.muteParticipant(participantID: id), completion: completion)
    }
    @discardableResult public func kick(
        _ id: RoomParticipantID, reason: String? = nil, completion: RoomRequestCompletion? = nil
    ) -> Int? {
        sendRequest(.kick(participantID: id, reason: reason), completion: completion)
    }
    /// `to` nil: everyone else in the room.
    @discardableResult public func sendMessage(
        to: RoomParticipantID? = nil, data: String, completion: RoomRequestCompletion? = nil
    ) -> Int? {
        sendRequest(.appMessage(SignalMessage.AppMessage(to: to, data: data)), completion: completion)
    }
    /// `value` nil deletes the attribute.
    @discardableResult public func setAttribute(
        key: String, value: String?, completion: RoomRequestCompletion? = nil
    ) -> Int? {
        sendRequest(.setAttribute(key: key, value: value), completion: completion)
    }

    /// Replaces the token used for every later `hello`. While joined it is also sent to the
    /// server (`refresh_token`). After `disconnected(.tokenExpired)` it reconnects.
    @discardableResult public func refreshToken(_ token: String, completion: RoomRequestCompletion? = nil) -> Int? {
        configuration.token = token
        if case .disconnected(.tokenExpired) = connectionState {
            start()
            loop.schedule(after: .zero) { completion?(.success(())) }
            return nil
        }
        if phase != .joined {
            // Not joined: the new token goes into the next hello.
            loop.schedule(after: .zero) { completion?(.success(())) }
            return nil
        }
        return sendRequest(.refreshToken(token: token), completion: completion)
    }
}

/// Lets the event-signal handler, created before `self` is complete, reach the session.
private final class WeakSessionBox {
    weak var session: RoomSession?
}

/// "2.4 ms": a duration for a log line, to a tenth of a millisecond.
func formatMilliseconds(_ d: Duration) -> String {
    let tenths = (d.components.seconds * 10_000) + d.components.attoseconds / 100_000_000_000_000
    return "\(tenths / 10).\(tenths % 10) ms"
}

extension RoomSession: RoomBackend {
    public var backendName: String { "roomserver" }
}
