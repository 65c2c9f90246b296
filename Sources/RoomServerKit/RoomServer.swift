import FoundationEssentials
import RoomBase
import RoomMedia
import RoomMediaCrypto
import RoomModel
import RoomProtocol
import RoomSystem
import RoomTLS

/// The room service: signalling over TCP (docs/protocol.md), one `Room` per room
/// name, and selective forwarding of RTP over one UDP socket.
///
/// Lives on one `EventLoop` thread: create it, `start()` it and drop it on the thread that
/// runs the loop (it is not `Sendable`, like the loop). All sockets, timers and rooms are
/// driven by that loop; nothing here blocks.
///
/// ```swift
/// let loop = try EventLoop()
/// let server = try RoomServer(configuration: config, loop: loop)
/// try server.start()
/// try loop.run()
/// ```
public final class RoomServer {
    /// Timing and limits; the defaults are protocol 1's numbers. Tests shorten them.
    public struct Options {
        /// A connection from which nothing arrived for this long is closed; its participant
        /// keeps its seat for the reconnect grace and is then removed with reason `timeout`
        /// (protocol: 15 s).
        public var keepaliveTimeoutMs: Int64 = 15_000
        /// How often rooms are ticked (active speakers, token warnings and expiry).
        public var tickIntervalMs: Int64 = 250
        /// More frames than this within one second cut the connection off.
        public var maxRequestsPerSecond = 100
        public var maxFrameSize = SignalFraming.defaultMaxFrameSize
        /// Outgoing buffer per connection; a peer that lets it fill is cut off.
        public var outgoingLimit = 1 << 20
        /// No media is forwarded to an address silent for this long.
        public var mediaIdleTimeoutMs: Int64 = 15_000
        /// "error, then close": how long a refused peer gets to read the error.
        public var closeFlushTimeoutMs: Int64 = 2_000
        /// How often participants report the loss they see per sender (`welcome`'s
        /// `loss_report_interval_ms`), and how long a report counts towards a sender's
        /// `receiver_loss` (a receiver that stopped reporting, or left, stops counting).
        public var lossReportIntervalMs: Int64 = 1_000
        public var lossReportMaxAgeMs: Int64 = 3_000
        /// Seconds since the epoch, for token times.
        public var wallClock: @Sendable () -> Int = RoomTokenVerifier.systemClock
        /// Where a new participant's SSRC candidates come from (a test gives the same one twice
        /// to show what a collision does); one in use or retired in the room is drawn again.
        public var ssrcCandidate: @Sendable () -> UInt32 = { UInt32.random(in: 1 ... UInt32.max) }

        public init() {}
    }

    /// The configuration in effect: the one given at init, then each `reload`'s.
    public private(set) var configuration: RoomServerConfiguration
    public let options: Options
    public private(set) var statistics = RoomServerStatistics()

    let loop: EventLoop
    private(set) var verifier: RoomTokenVerifier
    private var listeners: [TCPListener] = []
    /// The bound listeners that speak plain signalling (`server.plain_listen`, development).
    private var plainListeners: [TCPListener] = []
    /// The certificate new TLS connections are served with; `reload` replaces it when the files
    /// load, and connections already open keep the one they started with.
    public private(set) var tlsContext: TLSServerContext?
    private var media: UDPSocket?
    private var sessions: [ObjectIdentifier: Session] = [:]
    /// Rooms by tenant and name: two applications (keys in `[keys]`) may both have a "lobby",
    /// and neither's token reaches the other's.
    private var rooms: [RoomKey: RoomState] = [:]
    /// `tenantStatistics` of the rooms closed so far, per application.
    private var closedRoomsStatistics: [String: TenantStatistics] = [:]
    private var participants: [RoomParticipantID: Participant] = [:]
    private var byAddress: [SocketAddress: Participant] = [:]
    private var usedSSRCs: Set<UInt32> = []
    /// Connections accepted and not yet joined, per peer IP address, and all of them in the
    /// order they came (`waitingHead` the first still in the queue; see `oldestWaiting`).
    private var waitingByHost: [String: Int] = [:]
    private var waitingQueue: [Session] = []
    private var waitingHead = 0
    private var lastHelloTimeoutLogMs: Int64 = -100_000
    /// Connections closed for want of a hello in one round (20 rounds a second): more than a
    /// silent flood renews (4000 connections every 5 s deadline is 800 a second).
    static let helloTimeoutsPerRound = 50
    /// Keys the address cookies of binding datagrams; drawn at start, never sent.
    private let cookieSecret = MediaKey.random()
    /// A cookie is good for the minute it was made in and the next.
    static let cookieEpochMs: UInt64 = 60_000
    /// Binding budgets by source address, hashed into a fixed table: spoofed sources cost
    /// no memory, and an address that shares a slot shares its budget (rarely: 4096 slots).
    private var sourceBindingBudgets = [BindingBudget](repeating: BindingBudget(BindingBudget.perSource), count: 4096)
    private var nextParticipantID: RoomParticipantID = 1
    /// Participants to remove at once with reason `timeout` (cut off by the server), drained
    /// outside any effect loop.
    private var lostQueue: [RoomParticipantID] = []
    private var tickTimer: EventLoop.TimerID?
    private var helloDeadlineTimer: EventLoop.TimerID?
    private var isShuttingDown = false
    /// `limits.max_connections`, lowered at start to fit the file descriptor limit.
    private var connectionCapacity: Int
    private var lastRefusalLogMs: Int64 = -1_000_000

    private let readBuffer: UnsafeMutableRawBufferPointer
    private let datagramBuffer: UnsafeMutableRawBufferPointer
    private let replyBuffer: UnsafeMutableRawBufferPointer
    /// Each forwarded copy is re-protected here for its listener (the decrypted packet in
    /// `datagramBuffer` is the source of every copy).
    private let forwardBuffer: UnsafeMutableRawBufferPointer

    public init(configuration: RoomServerConfiguration, loop: EventLoop, options: Options = Options()) {
        self.configuration = configuration
        self.options = options
        self.loop = loop
        connectionCapacity = configuration.limits.maxConnections
        verifier = RoomTokenVerifier(
            secretKeys: configuration.keys.mapValues(\.secret), leeway: configuration.tokenLeeway, clock: options.wallClock)
        readBuffer = .allocate(byteCount: 64 * 1024, alignment: 8)
        datagramBuffer = .allocate(byteCount: 2048, alignment: 8)
        replyBuffer = .allocate(byteCount: 64, alignment: 8)
        forwardBuffer = .allocate(byteCount: 2048 + SRTPSession.trailerRoom, alignment: 8)
    }

    deinit {
        if let tickTimer { loop.cancel(tickTimer) }
        if let helloDeadlineTimer { loop.cancel(helloDeadlineTimer) }
        for s in sessions.values { s.connection.close() }
        readBuffer.deallocate()
        datagramBuffer.deallocate()
        replyBuffer.deallocate()
        forwardBuffer.deallocate()
    }

    // MARK: - Starting and stopping

    /// Binds the signalling listeners and the media socket and starts the room tick.
    public func start() throws(SystemError) {
        // Each connection is a file descriptor: take the hard limit (the usual soft 1024 let
        // 1100 idle connections block every join), and keep a reserve below it for the
        // listeners, the media socket, the event loop and log output.
        let descriptors = FileDescriptorLimit.raiseToHard()
        let reserve = 32
        connectionCapacity = max(1, min(configuration.limits.maxConnections, descriptors.soft - reserve))
        Log.info("roomserver: file descriptor limit \(descriptors.soft) (hard \(descriptors.hard)); up to \(connectionCapacity) connections")
        if !configuration.listen.isEmpty {
            guard let files = configuration.tls else {
                throw SystemError("server.listen is TLS: [tls] cert_file and key_file are required (server.plain_listen serves plain signalling, for development only)")
            }
            let context = try TLSServerContext(certificateChainFile: files.certFile, keyFile: files.keyFile)
            tlsContext = context
            Log.info("roomserver: TLS certificate \(files.certFile) (\(context.pin))")
        }
        for address in configuration.listen {
            let listener = try TCPListener(address: address, loop: loop, outgoingLimit: options.outgoingLimit) {
                [unowned self] connection in self.accept(connection, tls: true)
            }
            listeners.append(listener)
        }
        for address in configuration.plainListen {
            let listener = try TCPListener(address: address, loop: loop, outgoingLimit: options.outgoingLimit) {
                [unowned self] connection in self.accept(connection, tls: false)
            }
            plainListeners.append(listener)
            Log.warning("roomserver: plain signalling on \(listener.localAddress): tokens and media keys cross the network in clear (development only)")
        }
        let socket = try UDPSocket(bindingTo: configuration.media)
        // One socket carries every participant's media: give bursts room (roomload showed
        // keepalive bursts overflowing the default buffer and starving listeners).
        socket.setBufferSizes(receive: 4 << 20, send: 4 << 20)
        try socket.onReadable(loop: loop) { [unowned self] socket in self.mediaReadable(socket) }
        media = socket
        tickTimer = loop.schedule(
            after: .milliseconds(options.tickIntervalMs), repeating: .milliseconds(options.tickIntervalMs)
        ) { [weak self] in self?.tick() }
        helloDeadlineTimer = loop.schedule(after: .milliseconds(50), repeating: .milliseconds(50)) { [weak self] in
            self?.closeSilentConnections()
        }
        Log.info("roomserver: signalling on \((signallingAddresses + plainSignallingAddresses).map(\.description).joined(separator: ", ")), media on \(socket.localAddress)")
        if configuration.srtp {
            // Now, not at the first join: libsrtp's set-up runs known-answer tests of every cipher.
            do { try SRTPLibrary.ready() } catch { Log.error("roomserver: SRTP unavailable (joins will be refused): \(error)") }
            Log.info("roomserver: media encrypted (SRTP \(MediaEncryption.profileName) by \(SRTPLibrary.gcmBackend), keys per participant)")
        } else {
            Log.warning("roomserver: media is NOT encrypted (media.srtp = no): anyone on the network path hears the rooms")
        }
    }

    /// The bound TLS signalling addresses (port 0 in the configuration resolved).
    public var signallingAddresses: [SocketAddress] { listeners.map(\.localAddress) }
    /// The bound plain signalling addresses (`server.plain_listen`).
    public var plainSignallingAddresses: [SocketAddress] { plainListeners.map(\.localAddress) }
    /// The bound media address.
    public var mediaAddress: SocketAddress? { media?.localAddress }

    /// Rooms currently held (including empty ones kept for the reconnect grace period).
    public var roomKeys: [RoomKey] { rooms.keys.sorted() }
    /// A copy of a room's state, for status and tests.
    public func room(named name: String, app: String) -> Room? { rooms[RoomKey(app: app, name: name)]?.room }
    public var participantCount: Int { participants.count }

    /// A closing room's figures, kept in its application's totals.
    private func keepStatistics(of state: RoomState) {
        closedRoomsStatistics[state.key.app, default: TenantStatistics()].add(state.statistics)
    }

    /// Per application (tenant): the figures of its closed rooms plus its open ones.
    public var tenantStatistics: [String: TenantStatistics] {
        var result = closedRoomsStatistics
        for (key, state) in rooms {
            var live = state.statistics
            live.participants = state.members.count
            result[key.app, default: TenantStatistics()].add(live)
        }
        return result
    }
    public var connectionCount: Int { sessions.count }

    /// Stops listening, closes every room with reason `room_closed` and closes all
    /// connections after their last frames are flushed; `completion` runs on the loop
    /// once every connection is closed (or after `closeFlushTimeoutMs`).
    public func shutdown(completion: @escaping () -> Void = {}) {
        guard !isShuttingDown else { return }
        isShuttingDown = true
        for listener in listeners { listener.close() }
        listeners = []
        let now = nowMs()
        for key in rooms.keys.sorted() {
            guard let state = rooms[key] else { continue }
            if let effects = try? state.room.handle(.close(by: nil), now: now) { execute(effects, in: state) }
            keepStatistics(of: state)
        }
        rooms = [:]
        for s in Array(sessions.values) { closeSession(s, flush: true) }
        drainLost()
        media?.close()
        media = nil
        if let tickTimer { loop.cancel(tickTimer) }
        tickTimer = nil
        if let helloDeadlineTimer { loop.cancel(helloDeadlineTimer) }
        helloDeadlineTimer = nil
        let deadline = now + options.closeFlushTimeoutMs + 100
        func poll() {
            reapSessions()
            if sessions.isEmpty || nowMs() >= deadline {
                for s in sessions.values { s.connection.close() }
                sessions = [:]
                completion()
            } else {
                loop.schedule(after: .milliseconds(20)) { poll() }
            }
        }
        poll()
    }

    /// What `reload` did with a new configuration: the keys now in effect, and those that
    /// need a restart (the sockets are bound once).
    public struct ReloadReport: Sendable, Equatable {
        public var applied: [String] = []
        public var restartNeeded: [String] = []
        /// Why a part of the new configuration was not taken (the old one stays in effect).
        public var refused: [String] = []
    }

    /// Takes a new configuration (SIGHUP; docs/roomserver.md, "Reload") without closing a room:
    /// signing keys and `server.token_leeway` apply to the next `hello` and `refresh_token`
    /// (participants already in keep their seats: their tokens were checked when they came);
    /// `rooms.max_participants` to the next join; the other `[rooms]` settings to rooms
    /// opened from now on (a room keeps the settings it was opened with: changing the
    /// speaker limit or the policy under a running call would reshuffle its stage).
    /// `server.listen` and `server.media` are reported as needing a restart and stay as they
    /// were. `server.log_level` is the caller's (the command line may override it). The
    /// configuration was validated by whoever parsed it; this cannot fail half-way.
    @discardableResult
    public func reload(_ new: RoomServerConfiguration) -> ReloadReport {
        let old = configuration
        var report = ReloadReport()
        if new.listen != old.listen { report.restartNeeded.append("server.listen") }
        if new.plainListen != old.plainListen { report.restartNeeded.append("server.plain_listen") }
        // The certificate is read again even when the file names did not change: a renewal
        // replaces the files in place. New connections get the new one; open ones keep theirs.
        var tls = old.tls
        var tlsApplied: String?
        if !listeners.isEmpty {
            if let files = new.tls {
                do {
                    let context = try TLSServerContext(certificateChainFile: files.certFile, keyFile: files.keyFile)
                    if context.chainText != tlsContext?.chainText || files != old.tls {
                        tlsApplied = "tls (certificate \(files.certFile), \(context.pin))"
                    }
                    tlsContext = context
                    tls = files
                } catch {
                    report.refused.append("tls: \(error); the certificate loaded before stays in use")
                }
            } else {
                report.refused.append("tls: [tls] is gone but server.listen is TLS; the certificate loaded before stays in use")
            }
        } else if new.tls != old.tls {
            tls = new.tls
        }
        if new.media != old.media { report.restartNeeded.append("server.media") }
        // Every participant's keys and sessions follow this; switching under a call would
        // leave the room half encrypted.
        if new.srtp != old.srtp { report.restartNeeded.append("media.srtp") }
        if new.logLevel != old.logLevel { report.applied.append("server.log_level") }
        if new.keys != old.keys { report.applied.append("keys") }
        if new.tokenLeeway != old.tokenLeeway { report.applied.append("server.token_leeway") }
        if new.room.policy != old.room.policy { report.applied.append("rooms.policy") }
        if new.room.speakerLimit != old.room.speakerLimit { report.applied.append("rooms.speaker_limit") }
        if new.room.topN != old.room.topN { report.applied.append("rooms.top_n") }
        if new.room.reconnectGraceMs != old.room.reconnectGraceMs { report.applied.append("rooms.reconnect_grace_ms") }
        if new.maxParticipants != old.maxParticipants { report.applied.append("rooms.max_participants") }
        if let tlsApplied { report.applied.append(tlsApplied) }
        var kept = new
        kept.listen = old.listen
        kept.plainListen = old.plainListen
        kept.tls = tls
        kept.media = old.media
        kept.srtp = old.srtp
        configuration = kept
        if new.keys != old.keys || new.tokenLeeway != old.tokenLeeway {
            verifier = RoomTokenVerifier(secretKeys: kept.keys.mapValues(\.secret), leeway: kept.tokenLeeway, clock: options.wallClock)
        }
        return report
    }

    // MARK: - Connections

    final class Session {
        let connection: any StreamTransport
        var decoder: FrameDecoder
        var lastHeardMs: Int64
        var participant: Participant?
        var windowStartMs: Int64
        var windowCount = 0
        var closing = false
        /// When it was accepted: the `hello` deadline counts from here.
        let acceptedMs: Int64
        /// The peer's IP address as text, made once (the per-address count of waiting connections).
        let host: String
        /// Accepted, not joined, not closing: counted in `waitingByHost` and queued in
        /// `waitingQueue` until `stopWaiting`.
        var waitingToJoin = true

        init(connection: any StreamTransport, maxFrameSize: Int, now: Int64) {
            self.connection = connection
            host = connection.peerAddress.host
            decoder = FrameDecoder(maxFrameSize: maxFrameSize)
            lastHeardMs = now
            windowStartMs = now
            acceptedMs = now
        }
    }

    final class Participant {
        let id: RoomParticipantID
        let room: RoomState
        let ssrc: UInt32
        /// Replaced when a new connection resumes the seat: the old connection's key dies with it.
        var mediaKey: MediaKey
        /// Its SRTP keys and sessions (nil when `media.srtp = no`), replaced with the media key.
        var crypto: ParticipantCrypto?
        /// Forwarded sequence numbers continue across a resume and across the packets the room
        /// chose not to forward (see `rebaseSequence`).
        var sequenceOffset: UInt16 = 0
        var lastForwardedSequence: UInt16?
        /// Set when the seat is resumed: a restarted client numbers from anywhere again, and
        /// each listener's SRTP stream for this SSRC would refuse numbers behind the ones it saw
        /// (replay), so the next packet's number is rebased to follow the last one forwarded.
        /// Set too when a packet is dropped on purpose (not forwarded, not allowed to publish):
        /// the listeners see no gap there, only the timestamps' jump, as after DTX. Loss
        /// between the publisher and the server still shows as a gap everywhere else.
        var rebaseSequence = false
        var claims: RoomTokenClaims
        weak var session: Session?
        /// When its connection was lost (monotonic ms), while it waits out the reconnect grace
        /// with its seat kept and nothing said to the room; nil while connected.
        var lostAtMs: Int64?
        var replayGuard = BindingReplayGuard()
        /// Bindings this participant may still send (`BindingBudget.perParticipant`).
        var bindingBudget = BindingBudget(BindingBudget.perParticipant)
        /// App messages it may still send (`limits.app_messages_*`).
        var messageBudget: AppMessageBudget
        var mediaAddress: SocketAddress?
        var lastMediaMs: Int64 = 0
        /// What this publisher may still have forwarded (`limits.media_*_per_second`).
        var mediaAllowance = MediaAllowance()
        /// Last RFC 6464 level received, for `active_speakers`.
        var level: UInt8 = 127
        /// The reason text of a kick in progress, for `removed.message`.
        var kickMessage: String?
        /// What each receiver last reported about this participant's stream (permille lost,
        /// when), and the `receiver_loss` last sent to it.
        var lossByReceiver: [RoomParticipantID: (permille: UInt16, atMs: Int64)] = [:]
        var lossSent: (permille: UInt16, atMs: Int64)?

        init(id: RoomParticipantID, room: RoomState, ssrc: UInt32, mediaKey: MediaKey, crypto: ParticipantCrypto?,
             claims: RoomTokenClaims, messageLimit: AppMessageBudget.Limit) {
            messageBudget = AppMessageBudget(messageLimit)
            self.id = id
            self.room = room
            self.ssrc = ssrc
            self.mediaKey = mediaKey
            self.crypto = crypto
            self.claims = claims
        }
    }

    /// One participant session's SRTP: its keys (sent in `welcome`), the session that
    /// unprotects what it publishes and the one that protects what is forwarded to it.
    final class ParticipantCrypto {
        let keys: MediaEncryption
        let uplink: SRTPSession
        let downlink: SRTPSession

        init() throws(SRTPError) {
            keys = .random()
            uplink = try SRTPSession(key: keys.uplink, direction: .unprotect)
            downlink = try SRTPSession(key: keys.downlink, direction: .protect)
        }
    }

    /// Fresh SRTP for a participant session, or nil when `media.srtp = no`.
    private func newCrypto() throws(SRTPError) -> ParticipantCrypto? {
        configuration.srtp ? try ParticipantCrypto() : nil
    }

    final class RoomState {
        let key: RoomKey
        var room: Room
        /// Participants in join order, for the media fan-out.
        var members: [Participant] = []
        var emptySinceMs: Int64?
        /// SSRCs of participants who left this room: never given to anyone in it again. Each
        /// listener's downlink key outlives the senders it heard, so a reused SSRC would reuse
        /// that key's nonces (SSRC + packet index) and let a listener take a departed sender's
        /// recorded packets for the newcomer's. 4 bytes (and the set's overhead) per departure,
        /// for the room's life.
        var retiredSSRCs: Set<UInt32> = []
        /// App messages the room may still carry, whoever sends them (`limits.room_app_*`).
        var messageBudget: AppMessageBudget
        /// This room's share of its application's figures (`tenantStatistics`): one room opened.
        var statistics: TenantStatistics = { var s = TenantStatistics(); s.roomsOpened = 1; return s }()

        init(key: RoomKey, room: Room, messageLimit: AppMessageBudget.Limit) {
            self.key = key
            self.room = room
            messageBudget = AppMessageBudget(messageLimit)
        }
    }

    private func nowMs() -> Int64 { Int64(monotonicNanoseconds() / 1_000_000) }

    private func accept(_ stream: StreamConnection, tls: Bool) {
        if isShuttingDown { stream.close(); return }
        if let refusal = refusal(of: stream) {
            statistics.connectionsRefused += 1
            // Once per burst: a flood must not turn into a flood of log lines.
            let now = nowMs()
            if now - lastRefusalLogMs > 10_000 {
                lastRefusalLogMs = now
                Log.warning("roomserver: refusing connections (\(refusal)); \(statistics.connectionsRefused) refused so far")
            }
            stream.close()
            return
        }
        let connection: any StreamTransport
        if tls {
            guard let tlsContext else { stream.close(); return }
            do {
                connection = try TLSConnection(stream: stream, role: .server(tlsContext), loop: loop)
            } catch {
                Log.warning("roomserver: \(stream.peerAddress): \(error)")
                stream.close()
                return
            }
        } else {
            connection = stream
        }
        statistics.connectionsAccepted += 1
        let session = Session(connection: connection, maxFrameSize: options.maxFrameSize, now: nowMs())
        sessions[ObjectIdentifier(connection)] = session
        waitingByHost[session.host, default: 0] += 1
        waitingQueue.append(session)
        connection.setEventHandler { [unowned self, weak session] event in
            guard let session else { return }
            switch event {
            case .readable: self.readAvailable(session)
            case let .closed(error): self.connectionEnded(session, why: "\(error)")
            case .connected, .drained: break
            }
            self.drainLost()
        }
    }

    /// Why a new connection is turned away, if it is: the server is full (or near its file
    /// descriptor limit), or the peer's address already has as many connections waiting to
    /// join as one host may.
    /// Why `connection` cannot be taken, or nil. At capacity the oldest connection that has not
    /// joined gives way instead (`statistics.connectionsEvicted`): otherwise whoever opens the
    /// most connections first — 1100 that never say hello — would hold every slot, and an
    /// appliance reconnecting after a blip could not join until the flood stopped. Joined
    /// participants are never evicted; only when every slot holds one is the newcomer refused.
    /// The per-address cap is checked first, so one address cannot evict the others' waits.
    ///
    /// Constant time: the counts per address and the queue of waiting connections (oldest first)
    /// are kept as connections come, join and close. (Scanning every session here made 4000
    /// silent connections cost the server 6.3 s of CPU, a real join 3.5 s and a live call 250
    /// late packets: issue 27.)
    private func refusal(of connection: any StreamTransport) -> String? {
        let host = connection.peerAddress.host
        let waiting = waitingByHost[host] ?? 0
        if waiting >= configuration.limits.maxUnjoinedPerAddress {
            return "\(host) has \(waiting) connections that have not joined"
        }
        // Closing sessions count: they hold their descriptor until flushed.
        let open = sessions.count
        if open >= connectionCapacity {
            guard let victim = oldestWaiting() else { return "\(open) connections open and joined, the most this server takes" }
            statistics.connectionsEvicted += 1
            closeSession(victim, flush: false)
        }
        return nil
    }

    /// The connection that has waited longest without joining (the queue's front, once those
    /// that joined or closed meanwhile are dropped from it).
    private func oldestWaiting() -> Session? {
        while waitingHead < waitingQueue.count, !waitingQueue[waitingHead].waitingToJoin { waitingHead += 1 }
        if waitingHead > 1024 && waitingHead * 2 > waitingQueue.count {
            waitingQueue.removeFirst(waitingHead)
            waitingHead = 0
        }
        return waitingHead < waitingQueue.count ? waitingQueue[waitingHead] : nil
    }

    /// `s` joined or is closing: no longer counted as waiting.
    private func stopWaiting(_ s: Session) {
        guard s.waitingToJoin else { return }
        s.waitingToJoin = false
        if let n = waitingByHost[s.host], n > 1 { waitingByHost[s.host] = n - 1 } else { waitingByHost[s.host] = nil }
    }

    private func readAvailable(_ s: Session) {
        guard !s.closing else { return }
        let result: StreamConnection.ReadResult
        do {
            result = try s.connection.read(into: readBuffer)
        } catch {
            connectionEnded(s, why: "\(error)")
            return
        }
        switch result {
        case .wouldBlock:
            return
        case .endOfStream:
            connectionEnded(s, why: "closed by the peer")
        case let .bytes(n):
            s.lastHeardMs = nowMs()
            var frames: [[UInt8]] = []
            var framingError: FrameError?
            do {
                try s.decoder.feed(UnsafeRawBufferPointer(rebasing: readBuffer[0 ..< n]), into: &frames)
            } catch {
                framingError = error
            }
            for frame in frames {
                if s.closing { return }
                process(frame, from: s)
            }
            if let framingError, !s.closing {
                statistics.framingErrors += 1
                Log.info("roomserver: \(s.connection.peerAddress): \(framingError); closing")
                refuse(s, .malformedMessage, framingError.description, requestID: nil, close: true)
            }
        }
    }

    /// The peer closed or reset the connection.
    private func connectionEnded(_ s: Session, why: String) {
        if let p = s.participant {
            Log.info("roomserver: participant \(p.id) connection lost: \(why)")
        } else if let tls = s.connection as? TLSConnection, !tls.isHandshakeComplete {
            // Debug only: a scan or a flood of bad handshakes must not flood the log.
            Log.debug("roomserver: \(s.connection.peerAddress): \(why)")
        }
        closeSession(s, flush: false, grace: true)
    }

    /// Closes a connection (after flushing what is queued, when `flush`). A participant still
    /// attached loses its connection: with `grace` (the network lost it: reset, end of stream,
    /// silence) it keeps its seat, unannounced, for the reconnect grace
    /// (`RoomConfig.reconnectGraceMs`; docs/protocol.md, "Keepalive and dead peers"): a blip
    /// must not flash "left" on every screen. Without it (the server cut the peer off for
    /// what it sent or failed to read) it is removed at once with reason `timeout`.
    private func closeSession(_ s: Session, flush: Bool, grace: Bool = false) {
        guard !s.closing else { return }
        s.closing = true
        stopWaiting(s)
        if let p = s.participant {
            s.participant = nil
            p.session = nil
            if grace && p.room.room.config.reconnectGraceMs > 0 && !isShuttingDown {
                p.lostAtMs = nowMs()
                // Nothing is sent to the dead address meanwhile; a resume binds a new one.
                if let address = p.mediaAddress, byAddress[address] === p { byAddress[address] = nil }
                p.mediaAddress = nil
            } else {
                lostQueue.append(p.id)
            }
        }
        if flush {
            s.connection.closeAfterFlush()
            if s.connection.isOpen {
                loop.schedule(after: .milliseconds(options.closeFlushTimeoutMs)) { [weak s] in s?.connection.close() }
            }
        } else {
            s.connection.close()
        }
        if !s.connection.isOpen { sessions[ObjectIdentifier(s.connection)] = nil }
    }

    private func reapSessions() {
        for (key, s) in sessions where s.closing && !s.connection.isOpen { sessions[key] = nil }
    }

    /// Removes participants whose connections were lost, outside any effect loop.
    private func drainLost() {
        while !lostQueue.isEmpty {
            let id = lostQueue.removeFirst()
            guard let p = participants[id] else { continue }
            let effects: [RoomEffect]
            do {
                effects = try p.room.room.handle(.connectionLost(id), now: nowMs())
            } catch {
                // Closed room: drop the bookkeeping only.
                detach(p)
                continue
            }
            execute(effects, in: p.room)
        }
    }

    /// Seats whose reconnect grace ran out (checked on the tick): now the room hears of it,
    /// `participant_left {reason: "timeout"}`. In id order, so the effects are deterministic.
    private func expireGrace(now: Int64) {
        for p in participants.values.sorted(by: { $0.id < $1.id }) where p.session == nil {
            guard let lost = p.lostAtMs, now - lost >= p.room.room.config.reconnectGraceMs else { continue }
            p.lostAtMs = nil
            Log.info("roomserver: participant \(p.id) did not come back within \(p.room.room.config.reconnectGraceMs) ms")
            lostQueue.append(p.id)
        }
    }

    // MARK: - Frames

    private func process(_ payload: [UInt8], from s: Session) {
        statistics.framesReceived += 1
        let now = nowMs()
        if now - s.windowStartMs >= 1000 {
            s.windowStartMs = now
            s.windowCount = 0
        }
        s.windowCount += 1
        if s.windowCount > options.maxRequestsPerSecond {
            statistics.floodDisconnects += 1
            Log.warning("roomserver: \(s.connection.peerAddress): more than \(options.maxRequestsPerSecond) requests/s; cut off")
            refuse(s, .rateLimited, "more than \(options.maxRequestsPerSecond) requests per second", requestID: nil, close: true)
            return
        }

        let message: SignalMessage
        do {
            message = try SignalMessage.decode(payload)
        } catch {
            let peek = SignalMessage.peek(payload)
            if s.participant == nil, peek.type == "hello", let version = peek.protocolVersion, version != roomProtocolVersion {
                refuseVersion(s, version, requestID: peek.id)
                return
            }
            statistics.badMessages += 1
            refuse(s, error.code, error.description, requestID: peek.id, close: false)
            return
        }
        if message.body.direction == .serverToClient {
            refuse(s, .unexpectedMessage, "\"\(message.body.typeName)\" is sent by servers only", requestID: message.id, close: false)
            return
        }
        if case let .hello(hello) = message.body {
            if s.participant != nil {
                refuse(s, .alreadyJoined, "this connection has joined already", requestID: message.id, close: false)
            } else {
                join(s, hello, requestID: message.id)
            }
            return
        }
        guard let p = s.participant else {
            refuse(s, .notJoined, "send hello first", requestID: message.id, close: false)
            return
        }
        request(message, from: p, session: s)
    }

    private func write(_ message: SignalMessage, to s: Session) {
        let bytes: [UInt8]
        do {
            bytes = try FrameEncoder(maxFrameSize: options.maxFrameSize).encode(message)
        } catch {
            Log.error("roomserver: cannot encode \(message.body.typeName): \(error)")
            return
        }
        write(bytes, to: s)
    }

    private func write(_ bytes: [UInt8], to s: Session) {
        guard !s.closing else { return }
        switch s.connection.write(bytes) {
        case .accepted:
            break
        case .backpressure:
            statistics.backpressureDisconnects += 1
            Log.warning("roomserver: \(s.connection.peerAddress) does not read (\(s.connection.bufferedByteCount) bytes queued); cut off")
            closeSession(s, flush: false)
        case .closed:
            closeSession(s, flush: false, grace: true)
        }
    }

    private func refuse(_ s: Session, _ code: ErrorCode, _ text: String, requestID: Int?, close: Bool) {
        statistics.requestsRefused += 1
        write(SignalMessage(.error(.init(code: code, message: text, requestID: requestID))), to: s)
        if close { closeSession(s, flush: true) }
    }

    /// The same with the error frame already encoded (one refusal sent to many), then closed.
    private func refuseAndClose(_ s: Session, encodedError frame: [UInt8]) {
        statistics.requestsRefused += 1
        write(frame, to: s)
        closeSession(s, flush: true)
    }

    private func refuseVersion(_ s: Session, _ version: Int, requestID: Int?) {
        statistics.joinsRefused += 1
        refuse(s, .unsupportedVersion, "this server speaks protocol \(roomProtocolVersion), not \(version)",
               requestID: requestID, close: true)
    }

    // MARK: - Join

    private func join(_ s: Session, _ hello: SignalMessage.Hello, requestID: Int?) {
        if hello.protocolVersion != roomProtocolVersion {
            refuseVersion(s, hello.protocolVersion, requestID: requestID)
            return
        }
        func refuseJoin(_ code: ErrorCode, _ text: String) {
            statistics.joinsRefused += 1
            Log.info("roomserver: \(s.connection.peerAddress): join refused: \(code): \(text)")
            refuse(s, code, text, requestID: requestID, close: true)
        }
        let claims: RoomTokenClaims
        do {
            // The hello names no room: the token's own room is the one joined (its
            // signature is checked before the claim is believed).
            let room = try verifier.verifySignatureAndTime(hello.token).room
            claims = try verifier.verify(hello.token, room: room, wantsRole: hello.role)
            try checkApp(hello.token, claims)
        } catch {
            refuseJoin(error.code, error.description)
            return
        }
        if isShuttingDown {
            refuseJoin(.roomClosed, "the server is shutting down")
            return
        }
        let state: RoomState
        let key = RoomKey(app: claims.app, name: claims.room)
        if let existing = rooms[key] {
            state = existing
        } else {
            do {
                state = RoomState(key: key, room: try Room(config: configuration.room),
                                  messageLimit: configuration.limits.appMessagesPerRoom)
            } catch {
                refuseJoin(.internalError, "room configuration: \(error)")
                return
            }
            rooms[key] = state
            Log.info("roomserver: room \(key) opened")
        }
        if let seat = resumableSeat(in: state, claims: claims, hello: hello) {
            resume(seat, session: s, claims: claims, requestID: requestID)
            return
        }
        if state.room.count >= configuration.maxParticipants, state.room.participant(userID: claims.sub) == nil {
            refuseJoin(.roomFull, "room \"\(claims.room)\" has \(configuration.maxParticipants) participants")
            return
        }

        let crypto: ParticipantCrypto?
        do {
            crypto = try newCrypto()
        } catch {
            Log.error("roomserver: cannot set up SRTP for a participant: \(error)")
            refuseJoin(.internalError, "media encryption could not be set up")
            return
        }
        let id = nextParticipantID
        nextParticipantID = nextParticipantID == UInt32.max ? 1 : nextParticipantID + 1
        let now = nowMs()
        let request = RoomJoinRequest(
            participantID: id, userID: claims.sub, name: claims.name, grants: claims.grants,
            desiredRole: hello.role, tokenExpiresAt: roomInstant(forExpiry: claims.exp, now: now),
            previousParticipantID: hello.previousParticipantID)
        let effects: [RoomEffect]
        do {
            effects = try state.room.handle(.join(request), now: now)
        } catch {
            refuseJoin(ErrorCode(error.code), error.message)
            return
        }
        let p = Participant(id: id, room: state, ssrc: newSSRC(avoiding: state.retiredSSRCs), mediaKey: .random(), crypto: crypto, claims: claims,
                            messageLimit: configuration.limits.appMessagesPerParticipant)
        p.session = s
        s.participant = p
        stopWaiting(s)
        participants[id] = p
        usedSSRCs.insert(p.ssrc)
        state.members.append(p)
        state.emptySinceMs = nil
        statistics.joins += 1
        state.statistics.joins += 1
        Log.info("roomserver: \(claims.sub) (\"\(claims.name)\") joined room \(key) as participant \(id) from \(s.connection.peerAddress)")
        execute(effects, in: state)
    }

    /// A seat this `hello` may take back silently: the same user of the same application, with
    /// the same name and grants (anything else changes what the others see, so it joins the
    /// ordinary way: the old seat is `replaced` and announced), and either
    /// - the seat is waiting out its reconnect grace; a `previous_participant_id`, when given,
    ///   must name it, none is fine (a restarted appliance has forgotten its id), or
    /// - the seat's connection still looks alive but the hello names it in
    ///   `previous_participant_id`: the client saw the connection die before the server did
    ///   (a network change leaves no FIN; both sides wait 15 s of silence, the client then
    ///   retries within 0.5 s). That is the same blip, not a second device.
    private func resumableSeat(in state: RoomState, claims: RoomTokenClaims, hello: SignalMessage.Hello) -> Participant? {
        guard let p = state.members.first(where: { $0.claims.sub == claims.sub }),
              p.claims.app == claims.app, p.claims.name == claims.name, p.claims.grants == claims.grants
        else { return nil }
        if p.session == nil {
            guard p.lostAtMs != nil, hello.previousParticipantID == nil || hello.previousParticipantID == p.id else { return nil }
        } else {
            guard hello.previousParticipantID == p.id else { return nil }
        }
        return p
    }

    /// Gives a seat in its reconnect grace to a new connection: the same participant id, SSRC,
    /// stage, hand (and its place in the queue) and mute, a fresh media key; a `welcome` to the
    /// newcomer and nothing to anyone else (no `participant_left` / `participant_joined`
    /// pair). The hello's role is not applied: the seat is resumed as it was, and the
    /// `welcome` says what that is. The new token's expiry replaces the old one.
    private func resume(_ p: Participant, session s: Session, claims: RoomTokenClaims, requestID: Int?) {
        let state = p.room
        let now = nowMs()
        let crypto: ParticipantCrypto?
        do {
            crypto = try newCrypto()
        } catch {
            Log.error("roomserver: cannot set up SRTP for a participant: \(error)")
            statistics.joinsRefused += 1
            refuse(s, .internalError, "media encryption could not be set up", requestID: requestID, close: true)
            return
        }
        let effects: [RoomEffect]
        do {
            effects = try state.room.handle(.refreshToken(p.id, expiresAt: roomInstant(forExpiry: claims.exp, now: now)), now: now)
        } catch {
            statistics.joinsRefused += 1
            refuse(s, ErrorCode(error.code), error.message, requestID: requestID, close: true)
            return
        }
        if let old = p.session {
            // The connection the client gave up on: closed quietly, the seat moves on.
            Log.info("roomserver: participant \(p.id) reconnected before its old connection was seen to die; closing that one")
            old.participant = nil
            p.session = nil
            closeSession(old, flush: false)
        }
        let away = now - (p.lostAtMs ?? now)
        p.lostAtMs = nil
        p.claims = claims
        p.mediaKey = .random()
        p.replayGuard = BindingReplayGuard()
        p.crypto = crypto
        p.rebaseSequence = true
        // Media starts afresh: nothing is sent until the new connection's binding arrives.
        if let address = p.mediaAddress, byAddress[address] === p { byAddress[address] = nil }
        p.mediaAddress = nil
        p.session = s
        s.participant = p
        stopWaiting(s)
        statistics.joins += 1
        state.statistics.joins += 1
        statistics.resumes += 1
        Log.info("roomserver: \(claims.sub) resumed participant \(p.id) in room \(state.key) after \(away) ms from \(s.connection.peerAddress)")
        send(.stateSync(state.room.snapshot(for: p.id)), to: [p.id], in: state)
        execute(effects, in: state)
    }

    /// The key that signed the token must belong to the token's application.
    private func checkApp(_ token: String, _ claims: RoomTokenClaims) throws(TokenError) {
        guard let kid = Self.keyID(of: token), let key = configuration.keys[kid] else {
            throw .malformed("header has no kid")
        }
        guard key.appID == claims.app else {
            throw .unknownKey("\(kid) (it signs for application \"\(key.appID)\", not \"\(claims.app)\")")
        }
    }

    private struct KeyIDHeader: Decodable { var kid: String? }

    /// The `kid` of a token whose signature has been verified already.
    static func keyID(of token: String) -> String? {
        guard let first = token.split(separator: ".", maxSplits: 1).first,
              let bytes = Base64URL.decode(first),
              let header = try? JSONDecoder().decode(KeyIDHeader.self, from: Data(bytes))
        else { return nil }
        return header.kid
    }

    /// Token expiry (epoch seconds) on the rooms' monotonic millisecond clock. The verifier's
    /// leeway applies here too, so a token accepted a few seconds after `exp` is not removed
    /// at the very next tick.
    private func roomInstant(forExpiry exp: Int, now: Int64) -> RoomInstant {
        let seconds = Int64(exp) + Int64(verifier.leeway) - Int64(options.wallClock())
        let (ms, overflow) = seconds.multipliedReportingOverflow(by: 1000)
        if overflow { return seconds > 0 ? Int64.max / 2 : now }
        return now + ms
    }

    /// An SSRC nobody uses and nobody who left `retired`'s room used.
    private func newSSRC(avoiding retired: Set<UInt32>) -> UInt32 {
        while true {
            let ssrc = options.ssrcCandidate()
            if ssrc != 0, !usedSSRCs.contains(ssrc), !retired.contains(ssrc) { return ssrc }
        }
    }

    // MARK: - Requests

    private func request(_ message: SignalMessage, from p: Participant, session s: Session) {
        let state = p.room
        let now = nowMs()
        switch message.body {
        case let .ping(t):
            write(SignalMessage(.pong(t: t)), to: s)
            return
        case let .lossReport(report):
            for (ssrc, permille) in zip(report.ssrcs, report.lostPermille) {
                // Only senders in the reporter's own room; an SSRC that left is ignored.
                guard let sender = state.members.first(where: { $0.ssrc == ssrc }), sender !== p else { continue }
                sender.lossByReceiver[p.id] = (permille, now)
                tellSenderItsLoss(sender, now: now)
            }
            if let id = message.id { write(SignalMessage(.ok(requestID: id)), to: s) }
            return
        case let .refreshToken(token):
            let claims: RoomTokenClaims
            do throws(TokenError) {
                claims = try verifier.verify(token, room: state.key.name, wantsRole: .audience)
                try checkApp(token, claims)
                guard claims.app == state.key.app else {
                    throw TokenError.wrongRoom(expected: "\(state.key)", got: "\(RoomKey(app: claims.app, name: claims.room))")
                }
            } catch {
                refuse(s, error.code, error.description, requestID: message.id, close: false)
                return
            }
            guard claims.sub == p.claims.sub else {
                refuse(s, .invalidState, "the token is for user \"\(claims.sub)\", not \"\(p.claims.sub)\"",
                       requestID: message.id, close: false)
                return
            }
            let effects: [RoomEffect]
            do {
                effects = try state.room.handle(
                    .refreshToken(p.id, expiresAt: roomInstant(forExpiry: claims.exp, now: now), grants: claims.grants), now: now)
            } catch {
                refuse(s, ErrorCode(error.code), error.message, requestID: message.id, close: false)
                return
            }
            p.claims = claims
            if let id = message.id { write(SignalMessage(.ok(requestID: id)), to: s) }
            execute(effects, in: state)
            return
        default:
            break
        }
        guard let command = message.body.roomCommand(from: p.id) else {
            refuse(s, .unexpectedMessage, "\"\(message.body.typeName)\" is not a request", requestID: message.id, close: false)
            return
        }
        if case let .appMessage(m) = message.body {
            // What the message costs each recipient's connection: the data as JSON escapes it
            // (a control character is 6 bytes there) plus the event around it. Charged to the
            // sender and to the room; beyond either, refused to the sender alone.
            let cost = Double(AppMessageBudget.encodedCost(m.data))
            let limits = configuration.limits
            if let refusal = p.messageBudget.refusal(cost: cost, now: now, limits.appMessagesPerParticipant, who: "this participant")
                ?? state.messageBudget.refusal(cost: cost, now: now, limits.appMessagesPerRoom, who: "the room") {
                statistics.appMessagesRefused += 1
                refuse(s, .rateLimited, refusal, requestID: message.id, close: false)
                return
            }
        }
        var kicked: Participant?
        if case let .kick(target, reason) = message.body, let t = participants[target], t.room === state {
            kicked = t
            t.kickMessage = reason
        }
        let effects: [RoomEffect]
        do {
            effects = try state.room.handle(command, now: now)
        } catch {
            kicked?.kickMessage = nil
            refuse(s, ErrorCode(error.code), error.message, requestID: message.id, close: false)
            return
        }
        if let id = message.id { write(SignalMessage(.ok(requestID: id)), to: s) }
        execute(effects, in: state)
    }

    // MARK: - Effects

    private func execute(_ effects: [RoomEffect], in state: RoomState) {
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
    private func detach(_ p: Participant) {
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

    private func send(_ event: RoomEvent, to recipients: [RoomParticipantID], in state: RoomState) {
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

    // MARK: - Tick

    /// Closes connections that did not say hello in time: oldest first, only those past the
    /// deadline, at most `helloTimeoutsPerRound` every 50 ms. 4000 connections that came
    /// together were all closed in one tick before, an error frame and a close each: ~90 ms in
    /// which no media was forwarded (the server bench's p99 forward delay 96 ms against 0.5).
    private func closeSilentConnections() {
        let now = nowMs()
        var timedOut = 0
        var helloTimeoutFrame: [UInt8] = []
        while timedOut < Self.helloTimeoutsPerRound, let s = oldestWaiting(),
              now - s.acceptedMs > configuration.limits.helloTimeoutMs {
            statistics.helloTimeouts += 1
            timedOut += 1
            // One line per 10 s at most: thousands of silent connections must not become
            // thousands of log lines (refusals at accept are limited the same way).
            if now - lastHelloTimeoutLogMs > 10_000 {
                lastHelloTimeoutLogMs = now
                Log.info("roomserver: \(s.connection.peerAddress): no hello within \(configuration.limits.helloTimeoutMs) ms; closing (\(statistics.helloTimeouts) so far; the next are counted, not logged, for 10 s)")
            }
            // The same refusal for all of them, encoded once per round.
            if helloTimeoutFrame.isEmpty {
                helloTimeoutFrame = (try? FrameEncoder(maxFrameSize: options.maxFrameSize).encode(SignalMessage(
                    .error(.init(code: .notJoined, message: "no hello within \(configuration.limits.helloTimeoutMs) ms"))))) ?? []
            }
            refuseAndClose(s, encodedError: helloTimeoutFrame)
        }
    }

    private func tick() {
        let now = nowMs()
        for s in Array(sessions.values) where !s.closing && now - s.lastHeardMs > options.keepaliveTimeoutMs {
            statistics.keepaliveTimeouts += 1
            Log.info("roomserver: \(s.connection.peerAddress): silent for \(options.keepaliveTimeoutMs) ms; closing")
            closeSession(s, flush: false, grace: true)
        }
        reapSessions()
        expireGrace(now: now)
        drainLost()
        for key in rooms.keys.sorted() {
            guard let state = rooms[key] else { continue }
            let effects = state.room.tick(now: now)
            if !effects.isEmpty { execute(effects, in: state) }
            drainLost()
            if state.room.isEmpty {
                let since = state.emptySinceMs ?? now
                state.emptySinceMs = since
                if now - since > state.room.config.reconnectGraceMs {
                    keepStatistics(of: state)
                    rooms[key] = nil
                    Log.info("roomserver: room \(key) closed (empty)")
                }
            }
        }
    }

    // MARK: - Media

    private func mediaReadable(_ socket: UDPSocket) {
        for _ in 0 ..< 64 {
            let datagram: UDPSocket.Datagram?
            do {
                datagram = try socket.receive(into: datagramBuffer)
            } catch {
                Log.warning("roomserver: media socket: \(error)")
                return
            }
            guard let datagram else { return }
            statistics.datagramsReceived += 1
            if datagram.truncated {
                statistics.dropped.truncated += 1
                continue
            }
            handleDatagram(datagram.count, from: datagram.source, socket: socket)
        }
    }

    /// The datagram is `datagramBuffer[0..<count]` (SRTP is unprotected there, in place).
    private func handleDatagram(_ count: Int, from source: SocketAddress, socket: UDPSocket) {
        let bytes = UnsafeRawBufferPointer(rebasing: datagramBuffer[0 ..< count])
        guard let first = bytes.first else {
            statistics.dropped.garbage += 1
            return
        }
        if BindingDatagram.looksLikeBinding(bytes) {
            handleBinding(bytes, from: source, socket: socket)
        } else if first & 0xC0 == 0x80 {
            handleRTP(count, from: source, socket: socket)
        } else {
            statistics.dropped.garbage += 1
        }
    }

    /// A binding datagram: budgets first (per source address, then per claimed participant),
    /// then the MAC and the replay guard, then the address cookie. Media moves to `source` only
    /// when the binding proves it receives there (docs/protocol.md, "Binding/keepalive
    /// datagram"); otherwise the answer is a challenge carrying that address's cookie, no
    /// larger than the binding, at most as often as the budgets allow.
    private func handleBinding(_ bytes: UnsafeRawBufferPointer, from source: SocketAddress, socket: UDPSocket) {
        let now = nowMs()
        let slot = Int(UInt(bitPattern: source.hashValue) % UInt(sourceBindingBudgets.count))
        guard sourceBindingBudgets[slot].take(now: now, BindingBudget.perSource) else {
            statistics.dropped.bindingRateLimited += 1
            return
        }
        guard let claimed = try? BindingDatagram.claimedParticipantID(bytes), let p = participants[claimed] else {
            statistics.dropped.badBinding += 1
            return
        }
        guard p.bindingBudget.take(now: now, BindingBudget.perParticipant) else {
            statistics.dropped.bindingRateLimited += 1
            return
        }
        guard let binding = try? BindingDatagram.parse(bytes, key: p.mediaKey) else {
            statistics.dropped.badBinding += 1
            return
        }
        guard p.replayGuard.accept(binding.timestampMs, receiverNowMs: now) else {
            statistics.dropped.bindingReplay += 1
            return
        }
        let address = Array(source.description.utf8)
        let epoch = UInt64(max(now, 0)) / Self.cookieEpochMs
        let cookie = AddressCookie.derive(secret: cookieSecret, epoch: epoch, participantID: p.id, address: address)
        let proven = p.mediaAddress == source || binding.cookie.map {
            $0 == cookie || $0 == AddressCookie.derive(secret: cookieSecret, epoch: epoch &- 1, participantID: p.id, address: address)
        } == true
        guard proven else {
            statistics.bindingChallenges += 1
            let challenge = BindingDatagram(participantID: BindingDatagram.serverParticipantID, timestampMs: binding.timestampMs,
                                            cookie: cookie, isChallenge: true)
            guard let n = try? challenge.write(into: replyBuffer, key: p.mediaKey) else { return }
            sendDatagram(UnsafeRawBufferPointer(rebasing: replyBuffer[0 ..< n]), to: source, socket: socket)
            return
        }
        if p.mediaAddress != source {
            if let old = p.mediaAddress, byAddress[old] === p { byAddress[old] = nil }
            if let previous = byAddress[source], previous !== p { previous.mediaAddress = nil }
            byAddress[source] = p
            p.mediaAddress = source
            Log.debug("roomserver: participant \(p.id) media address \(source)")
        }
        p.lastMediaMs = nowMs()
        statistics.bindingsAccepted += 1
        let answer = BindingDatagram(participantID: BindingDatagram.serverParticipantID, timestampMs: binding.timestampMs,
                                     cookie: cookie)
        guard let n = try? answer.write(into: replyBuffer, key: p.mediaKey) else { return }
        sendDatagram(UnsafeRawBufferPointer(rebasing: replyBuffer[0 ..< n]), to: source, socket: socket)
    }

    /// An RTP or SRTP packet in `datagramBuffer[0..<received]`.
    ///
    /// SRTP authenticates the RTP header but leaves it readable, so the address and SSRC checks
    /// come first; the publisher's budget is charged after the tag has verified (see below), and
    /// the RFC 6464 level is read after it too (a forged level could otherwise steer the top-N
    /// selection). A flood with a publisher's address and SSRC spoofed costs a tag check per
    /// packet (~1 µs), never the publisher's budget.
    private func handleRTP(_ received: Int, from source: SocketAddress, socket: UDPSocket) {
        guard let p = byAddress[source] else {
            statistics.dropped.unknownAddress += 1
            return
        }
        guard received >= RTPPacket.fixedHeaderSize else {
            statistics.dropped.malformedRTP += 1
            return
        }
        let claimedSSRC = UInt32(datagramBuffer[8]) << 24 | UInt32(datagramBuffer[9]) << 16
            | UInt32(datagramBuffer[10]) << 8 | UInt32(datagramBuffer[11])
        guard claimedSSRC == p.ssrc else {
            statistics.dropped.wrongSSRC += 1
            return
        }
        let now = nowMs()
        // The budget is charged for packets that prove to be the publisher's: with SRTP after the
        // tag has verified (a flood with the publisher's address and SSRC spoofed would
        // otherwise spend its budget and silence it); plain RTP cannot tell, so before.
        if p.crypto == nil {
            guard p.mediaAllowance.take(bytes: received, now: now, limits: configuration.limits) else {
                statistics.dropped.rateLimited += 1
                return
            }
        }
        var length = received
        if let crypto = p.crypto {
            switch crypto.uplink.unprotect(datagramBuffer, length: received) {
            case let .rtp(plain): length = plain
            case .authenticationFailure:
                statistics.dropped.srtpAuthentication += 1
                return
            case .replay:
                statistics.dropped.srtpReplay += 1
                return
            case .malformed:
                statistics.dropped.malformedRTP += 1
                return
            }
            guard p.mediaAllowance.take(bytes: received, now: now, limits: configuration.limits) else {
                statistics.dropped.rateLimited += 1
                return
            }
        }
        let bytes = UnsafeRawBufferPointer(rebasing: datagramBuffer[0 ..< length])
        guard let packet = try? RTPPacket.parse(bytes) else {
            statistics.dropped.malformedRTP += 1
            return
        }
        p.lastMediaMs = now
        let state = p.room
        guard p.session != nil else {
            // Its signalling is gone (reconnect grace): it cannot be told about the room, so
            // the room does not hear it either until it is back.
            statistics.dropped.disconnected += 1
            return
        }
        if let level = packet.audioLevel {
            p.level = level.level
            state.room.updateAudioLevel(p.id, level: level.level, voice: level.voiceActivity, now: now)
        }
        guard state.room.mayPublish(p.id) else {
            statistics.dropped.notPublishing += 1
            p.rebaseSequence = true
            return
        }
        guard state.room.isForwarded(p.id) else {
            // Not among the loudest `top_n`: dropped on purpose. The listeners must not read
            // the gap as loss (they reported it, and every publisher's encoder went to SILK
            // with 10 % expected loss for the rest of a four-party call: issue 27), so the
            // next forwarded packet follows the last one forwarded.
            statistics.dropped.notForwarded += 1
            p.rebaseSequence = true
            return
        }
        statistics.packetsForwarded += 1
        state.statistics.packetsForwarded += 1
        rebaseSequence(of: p, packet: packet)
        let idle = options.mediaIdleTimeoutMs
        for other in state.members where other !== p {
            guard let address = other.mediaAddress, other.session != nil, now - other.lastMediaMs <= idle else { continue }
            if let downlink = other.crypto?.downlink {
                // Hop by hop: each listener gets the packet protected with its own key.
                forwardBuffer.baseAddress!.copyMemory(from: bytes.baseAddress!, byteCount: length)
                guard let n = downlink.protect(forwardBuffer, length: length) else {
                    statistics.sendFailures += 1
                    continue
                }
                sendDatagram(UnsafeRawBufferPointer(rebasing: forwardBuffer[0 ..< n]), to: address, socket: socket)
            } else {
                sendDatagram(bytes, to: address, socket: socket)
            }
        }
    }

    /// Rewrites the (decrypted) packet's sequence number in `datagramBuffer` to continue the
    /// publisher's forwarded sequence after a resume or a deliberate drop
    /// (`Participant.rebaseSequence`); plain RTP too, which is otherwise forwarded as received.
    private func rebaseSequence(of p: Participant, packet: RTPPacket) {
        if p.rebaseSequence {
            p.rebaseSequence = false
            if let last = p.lastForwardedSequence { p.sequenceOffset = last &+ 1 &- packet.sequenceNumber }
        }
        let forwarded = packet.sequenceNumber &+ p.sequenceOffset
        if p.sequenceOffset != 0 {
            datagramBuffer[2] = UInt8(forwarded >> 8)
            datagramBuffer[3] = UInt8(truncatingIfNeeded: forwarded)
        }
        p.lastForwardedSequence = forwarded
    }

    /// Sends `sender` the loss its listeners share (`sharedLoss`): at most once per report
    /// interval, except at once when the loss rises by 2 % or more (protection should follow a
    /// deteriorating network quickly; relaxing it can wait).
    private func tellSenderItsLoss(_ sender: Participant, now: Int64) {
        sender.lossByReceiver = sender.lossByReceiver.filter { now - $0.value.atMs <= options.lossReportMaxAgeMs }
        guard let session = sender.session,
              let shared = Self.sharedLoss(reports: sender.lossByReceiver.values.map(\.permille),
                                           listeners: sender.room.members.count - 1)
        else { return }
        if let last = sender.lossSent, now - last.atMs < options.lossReportIntervalMs, shared < last.permille + 20 { return }
        sender.lossSent = (shared, now)
        statistics.receiverLossSent += 1
        write(SignalMessage(.receiverLoss(.init(lostPermille: shared, receivers: sender.lossByReceiver.count))), to: session)
    }

    /// The loss a sender protects its stream against: one the listeners have in common, never
    /// what one of them says alone, because the sender's FEC changes what every listener hears
    /// (a participant reporting 100 % on everyone pushed every talker into SILK with FEC).
    /// With one listener its report counts (the stream reaches nobody else); with more, the
    /// second-worst, a listener with no fresh report counting as no loss. Loss on the sender's
    /// own uplink reaches every listener, so it still counts; one listener's bad downlink is
    /// that listener's own, and is concealed by its jitter buffer (docs/protocol.md, "Loss
    /// feedback"). nil when nobody reported.
    static func sharedLoss(reports: [UInt16], listeners: Int) -> UInt16? {
        guard !reports.isEmpty else { return nil }
        let sorted = reports.sorted(by: >)
        if max(listeners, reports.count) <= 1 { return sorted[0] }
        return sorted.count >= 2 ? sorted[1] : 0
    }

    private func sendDatagram(_ bytes: UnsafeRawBufferPointer, to address: SocketAddress, socket: UDPSocket) {
        do {
            if try socket.send(bytes, to: address) {
                statistics.datagramsSent += 1
            } else {
                statistics.sendFailures += 1
            }
        } catch {
            statistics.sendFailures += 1
        }
    }
}


/// A publisher's media budget: a token bucket per packets and per bytes, each holding one
/// second of its limit, refilled with the time since the last packet.
struct MediaAllowance {
    private var packets: Double = -1
    private var bytes: Double = 0
    private var lastMs: Int64 = 0

    /// Takes one packet of `count` bytes; false (and nothing taken) when either budget is out.
    mutating func take(bytes count: Int, now: Int64, limits: RoomServerLimits) -> Bool {
        let packetRate = Double(limits.mediaPacketsPerSecond), byteRate = Double(limits.mediaBytesPerSecond)
        if packets < 0 {
            packets = packetRate
            bytes = byteRate
        } else {
            let seconds = Double(max(0, now - lastMs)) / 1000
            packets = min(packetRate, packets + seconds * packetRate)
            bytes = min(byteRate, bytes + seconds * byteRate)
        }
        lastMs = now
        guard packets >= 1, bytes >= Double(count) else { return false }
        packets -= 1
        bytes -= Double(count)
        return true
    }
}

/// A room's identity on the server: the application (tenant) whose key signed the token, and
/// the room's name within it. Rooms, their participants, resumes and moderation never cross it.
public struct RoomKey: Hashable, Comparable, Sendable, CustomStringConvertible {
    public var app: String
    public var name: String

    public init(app: String, name: String) {
        self.app = app
        self.name = name
    }

    public static func < (a: RoomKey, b: RoomKey) -> Bool { (a.app, a.name) < (b.app, b.name) }

    /// For logs: `"lobby" (app "acme")`, both quoted as they came.
    public var description: String { "\"\(name)\" (app \"\(app)\")" }
}

/// A token bucket for binding datagrams: `rate` a second, up to `burst` at once. A client sends
/// one every 5 s and one more per challenge; the budgets are many times that.
struct BindingBudget {
    struct Limit {
        var rate: Double
        var burst: Double
    }
    static let perSource = Limit(rate: 20, burst: 40)
    static let perParticipant = Limit(rate: 10, burst: 20)

    private var tokens: Double
    private var lastMs: Int64 = 0

    init(_ limit: Limit) { tokens = limit.burst }

    mutating func take(now: Int64, _ limit: Limit) -> Bool {
        tokens = min(limit.burst, tokens + Double(max(now - lastMs, 0)) * limit.rate / 1000)
        lastMs = now
        guard tokens >= 1 else { return false }
        tokens -= 1
        return true
    }
}

/// Budgets for app messages (docs/roomserver.md, "Limits"): every message is copied to each
/// recipient, so one participant at 95 messages a second of 8 KiB of control characters pushed
/// 4.27 MB/s to every other one and got listeners cut off for not reading fast enough (issue 27).
/// Token buckets for messages and for encoded bytes, per participant and per room; the byte
/// buckets hold one largest message (8 KiB of control characters is 48 kB escaped) and refill at
/// the configured rate, so a listener receives the room's rate in the long run and one largest
/// message more at most.
struct AppMessageBudget {
    struct Limit: Sendable, Equatable {
        var messagesPerSecond: Double
        var bytesPerSecond: Double
        /// Messages at once: one second's worth, at least one.
        var messageBurst: Double { max(messagesPerSecond, 1) }
        /// Bytes at once: one second's worth, at least one largest message.
        var byteBurst: Double { max(bytesPerSecond, Double(AppMessageBudget.largestCost)) }
    }
    /// The JSON event around the data (type, from, to): counted with each message.
    static let eventOverhead = 64
    static let largestCost = SignalLimits.maxAppMessageBytes * 6 + eventOverhead

    private var messages: Double
    private var bytes: Double
    private var lastMs: Int64 = 0

    init(_ limit: Limit) {
        messages = limit.messageBurst
        bytes = limit.byteBurst
    }

    /// Nil (and charged) when a message of `cost` encoded bytes fits; otherwise why not, for the sender.
    mutating func refusal(cost: Double, now: Int64, _ limit: Limit, who: String) -> String? {
        let elapsed = Double(max(now - lastMs, 0)) / 1000
        lastMs = now
        messages = min(limit.messageBurst, messages + elapsed * limit.messagesPerSecond)
        bytes = min(limit.byteBurst, bytes + elapsed * limit.bytesPerSecond)
        guard messages >= 1, bytes >= cost else {
            return "app messages: \(who) may send \(Int(limit.messagesPerSecond)) a second and \(Int(limit.bytesPerSecond)) bytes of message a second (as relayed, JSON escapes included); wait and send again"
        }
        messages -= 1
        bytes -= cost
        return nil
    }

    /// The bytes `data` takes in a JSON string (RFC 8259 escapes: `"` and `\\` two, other
    /// control characters six) plus the event's own.
    static func encodedCost(_ data: String) -> Int {
        var n = eventOverhead
        for b in data.utf8 {
            switch b {
            case 0x22, 0x5C, 0x08, 0x0C, 0x0A, 0x0D, 0x09: n += 2
            case 0 ..< 0x20: n += 6
            default: n += 1
            }
        }
        return n
    }
}
