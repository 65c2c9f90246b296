import RoomMedia
import RoomMediaCrypto
import RoomModel
import RoomProtocol
import RoomSystem
import RoomTLS

// The room service's type: its options, its state (every stored property is here) and its
// lifecycle (start, shutdown, reload, the figures it reports). Its other jobs are extensions, a
// file each: RoomServerConnections (sessions, framing), RoomServerAdmission (capacity, hello, join,
// resume), RoomServerDispatch (requests to room commands), RoomServerEffects (room effects to
// messages), RoomServerTick (the timers), RoomServerMedia (the media forwarder); the records of
// seats and rooms they act on are in RoomServerParticipants.

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
    public struct Options: Sendable {
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
    public internal(set) var statistics = RoomServerStatistics()

    let loop: EventLoop
    /// The group this server is one worker of, and its index there; nil when it works alone.
    let workers: RoomServerWorkers?
    let workerIndex: Int
    /// Participant ids and SSRCs this worker gives out are `workerIndex` modulo the worker count:
    /// the kernel steers their datagrams here by that (`RoomServerWorkers`).
    var workerCount: Int { workers?.count ?? 1 }
    private(set) var verifier: RoomTokenVerifier
    private var listeners: [TCPListener] = []
    /// The bound listeners that speak plain signalling (`server.plain_listen`, development).
    private var plainListeners: [TCPListener] = []
    /// The certificate new TLS connections are served with; `reload` replaces it when the files
    /// load, and connections already open keep the one they started with.
    public private(set) var tlsContext: TLSServerContext?
    private(set) var media: UDPSocket?
    var sessions: [ObjectIdentifier: Session] = [:]
    /// Rooms by tenant and name: two applications (keys in `[keys]`) may both have a "lobby",
    /// and neither's token reaches the other's.
    var rooms: [RoomKey: RoomState] = [:]
    /// `tenantStatistics` of the rooms closed so far, per application.
    private var closedRoomsStatistics: [String: TenantStatistics] = [:]
    var participants: [RoomParticipantID: Participant] = [:]
    var byAddress: [SocketAddress: Participant] = [:]
    var usedSSRCs: Set<UInt32> = []
    /// Connections accepted and not yet joined, per peer IP address, and all of them in the
    /// order they came (`waitingHead` the first still in the queue; see `oldestWaiting`).
    var waitingByHost: [String: Int] = [:]
    var waitingQueue: [Session] = []
    var waitingHead = 0
    var lastHelloTimeoutLogMs: Int64 = -100_000
    /// Connections closed for want of a hello in one round (20 rounds a second): more than a
    /// silent flood renews (4000 connections every 5 s deadline is 800 a second).
    static let helloTimeoutsPerRound = 50
    /// Keys the address cookies of binding datagrams; drawn at start, never sent.
    let cookieSecret = MediaKey.random()
    /// A cookie is good for the minute it was made in and the next.
    static let cookieEpochMs: UInt64 = 60_000
    /// Binding budgets by source address, hashed into a fixed table: spoofed sources cost
    /// no memory, and an address that shares a slot shares its budget (rarely: 4096 slots).
    var sourceBindingBudgets = [BindingBudget](repeating: BindingBudget(BindingBudget.perSource), count: 4096)
    var nextParticipantID: RoomParticipantID
    /// Participants to remove at once with reason `timeout` (cut off by the server), drained
    /// outside any effect loop.
    var lostQueue: [RoomParticipantID] = []
    private var tickTimer: EventLoop.TimerID?
    private var helloDeadlineTimer: EventLoop.TimerID?
    private(set) var isShuttingDown = false
    /// `limits.max_connections`, lowered at start to fit the file descriptor limit.
    private(set) var connectionCapacity: Int
    var lastRefusalLogMs: Int64 = -1_000_000

    let readBuffer: UnsafeMutableRawBufferPointer
    let datagramBuffer: UnsafeMutableRawBufferPointer
    let replyBuffer: UnsafeMutableRawBufferPointer
    /// Each forwarded copy is re-protected for its listener in a slot of its own here, one slot
    /// per datagram of `sendBatch` (the decrypted packet in `datagramBuffer` is the source of
    /// every copy).
    let forwardBuffer: UnsafeMutableRawBufferPointer
    static let forwardSlotSize = 2048 + SRTPSession.trailerRoom
    /// A packet's copies for the room's listeners, sent in one system call (sendmmsg) once the
    /// room's members are walked; a room larger than this sends a batch whenever it is full.
    let sendBatch = UDPSendBatch(capacity: 64)

    public convenience init(configuration: RoomServerConfiguration, loop: EventLoop, options: Options = Options()) {
        self.init(configuration: configuration, loop: loop, options: options, workers: nil, index: 0, media: nil)
    }

    /// One worker of `workers`: index 0 listens for signalling; `media` is this worker's
    /// socket of the steered group.
    init(configuration: RoomServerConfiguration, loop: EventLoop, options: Options, workers: RoomServerWorkers?, index: Int,
         media: UDPSocket?) {
        self.configuration = configuration
        self.options = options
        self.loop = loop
        self.workers = workers
        workerIndex = index
        self.media = media
        nextParticipantID = Self.firstParticipantID(index: index, count: workers?.count ?? 1)
        connectionCapacity = configuration.limits.maxConnections
        verifier = Self.verifier(configuration, clock: options.wallClock)
        readBuffer = .allocate(byteCount: 64 * 1024, alignment: 8)
        datagramBuffer = .allocate(byteCount: 2048, alignment: 8)
        replyBuffer = .allocate(byteCount: 64, alignment: 8)
        forwardBuffer = .allocate(byteCount: Self.forwardSlotSize * sendBatch.capacity, alignment: 8)
    }

    /// The first id worker `index` of `count` gives: the smallest positive one equal to `index`
    /// modulo `count` (0 marks the server in binding datagrams).
    static func firstParticipantID(index: Int, count: Int) -> RoomParticipantID {
        RoomParticipantID(index == 0 ? count : index)
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
        // Of several workers, the first is the front door (RoomServerWorkers): it listens, and
        // it alone says what the process as a whole does.
        let listens = workerIndex == 0
        // Each connection is a file descriptor: take the hard limit (the usual soft 1024 let
        // 1100 idle connections block every join), and keep a reserve below it for the
        // listeners, the media sockets, the event loops and log output.
        let descriptors = FileDescriptorLimit.raiseToHard()
        let reserve = 32 + 4 * (workerCount - 1)
        connectionCapacity = max(1, min(configuration.limits.maxConnections, descriptors.soft - reserve))
        if listens {
            Log.info("roomserver: file descriptor limit \(descriptors.soft) (hard \(descriptors.hard)); up to \(connectionCapacity) connections")
        }
        if !configuration.listen.isEmpty && listens {
            guard let files = configuration.tls else {
                throw SystemError("server.listen is TLS: [tls] cert_file and key_file are required (server.plain_listen serves plain signalling, for development only)")
            }
            let context = try TLSServerContext(certificateChainFile: files.certFile, keyFile: files.keyFile)
            tlsContext = context
            Log.info("roomserver: TLS certificate \(files.certFile) (\(context.pin))")
        }
        for address in configuration.listen where listens {
            let listener = try TCPListener(address: address, loop: loop, outgoingLimit: options.outgoingLimit) {
                [unowned self] connection in self.accept(connection, tls: true)
            }
            listeners.append(listener)
        }
        for address in configuration.plainListen where listens {
            let listener = try TCPListener(address: address, loop: loop, outgoingLimit: options.outgoingLimit) {
                [unowned self] connection in self.accept(connection, tls: false)
            }
            plainListeners.append(listener)
            Log.warning("roomserver: plain signalling on \(listener.localAddress): tokens and media keys cross the network in clear (development only)")
        }
        let socket: UDPSocket
        if let media { socket = media } else { socket = try UDPSocket(bindingTo: configuration.media) }
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
        if listens {
            Log.info("roomserver: signalling on \((signallingAddresses + plainSignallingAddresses).map(\.description).joined(separator: ", ")), media on \(socket.localAddress)\(workerCount > 1 ? ", rooms over \(workerCount) workers" : "")")
        }
        if configuration.srtp {
            // Now, not at the first join: libsrtp's set-up runs known-answer tests of every cipher
            // (once per process: every worker asks, the first one pays).
            do { try SRTPLibrary.ready() } catch { Log.error("roomserver: SRTP unavailable (joins will be refused): \(error)") }
            if listens { Log.info("roomserver: media encrypted (SRTP \(MediaEncryption.profileName) by \(SRTPLibrary.gcmBackend), keys per participant)") }
        } else if listens {
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
    func keepStatistics(of state: RoomState) {
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
                for (key, s) in sessions {
                    s.connection.close()
                    forgetSession(key)
                }
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
        if new.workers != old.workers { report.restartNeeded.append("server.workers") }
        // Every participant's keys and sessions follow this; switching under a call would
        // leave the room half encrypted.
        if new.srtp != old.srtp { report.restartNeeded.append("media.srtp") }
        if new.logLevel != old.logLevel { report.applied.append("server.log_level") }
        if new.keys != old.keys { report.applied.append("keys") }
        if new.publicKeys != old.publicKeys { report.applied.append("public_keys") }
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
        kept.workers = old.workers
        kept.srtp = old.srtp
        configuration = kept
        if new.keys != old.keys || new.publicKeys != old.publicKeys || new.tokenLeeway != old.tokenLeeway {
            verifier = Self.verifier(kept, clock: options.wallClock)
        }
        return report
    }

    /// Tokens signed with `[keys]` (HS256) or `[public_keys]` (EdDSA).
    static func verifier(_ configuration: RoomServerConfiguration, clock: @escaping @Sendable () -> Int) -> RoomTokenVerifier {
        RoomTokenVerifier(secretKeys: configuration.keys.mapValues(\.secret), publicKeys: configuration.publicKeys.mapValues(\.key),
                          leeway: configuration.tokenLeeway, clock: clock)
    }

    func nowMs() -> Int64 { Int64(monotonicNanoseconds() / 1_000_000) }
}
