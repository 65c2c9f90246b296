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
///
/// One file per job: the state and the public read-outs here; RoomSessionLifecycle.swift
/// (start, stop, leave); RoomSessionConnection.swift (the signalling connection, frames in and
/// out); RoomSessionRecovery.swift with `ReconnectSchedule` (failed attempts, failover,
/// back-off, a lost connection); RoomSessionJoin.swift (hello → welcome, the keepalive tick);
/// RoomSessionEvents.swift (server messages → local model and events);
/// RoomSessionRequests.swift with `PendingRequests`; RoomSessionMedia.swift (the UDP media).
public final class RoomSession {
    public let loop: EventLoop
    public internal(set) var configuration: RoomSessionConfiguration
    /// Events, on the loop thread. Set before `start()`.
    public var onEvent: ((RoomSessionEvent) -> Void)?
    public private(set) var connectionState: RoomConnectionState = .idle
    public internal(set) var statistics = RoomSessionStatistics()

    // Local model (from `welcome`, kept up to date by events).
    public internal(set) var participants: [RoomParticipantID: ParticipantInfo] = [:]
    public internal(set) var attributes: [String: String] = [:]
    public internal(set) var joinInfo: RoomJoinInfo?
    /// This participant as the server last described it.
    public var localParticipant: ParticipantInfo? {
        joinInfo.flatMap { participants[$0.participantID] }
    }
    /// Self mute as asked by `setMute` (applied locally at once, before the server answers).
    public internal(set) var isSelfMuted = false
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
    var connection: (any StreamTransport)?
    /// Made from `configuration.tls` on the first attempt (the CA file is read then), and again
    /// after `reconfigure`.
    var tlsContext: TLSClientContext?
    var decoder: FrameDecoder
    let encoder: FrameEncoder
    var readBuffer: [UInt8]
    /// The address of the server connected to (or being tried), after name resolution.
    public internal(set) var serverAddress: SocketAddress?
    /// Which address the next attempt goes to, failures in a row, whether `failed` was reported.
    var reconnect = ReconnectSchedule()
    var askedRole: RoomRole
    var previousParticipantID: RoomParticipantID?
    var joinedBefore = false
    var lastReceivedNs: UInt64 = 0
    var lastPingNs: UInt64 = 0
    var retryTimer: EventLoop.TimerID?
    var handshakeTimer: EventLoop.TimerID?
    var tickTimer: EventLoop.TimerID?
    var leaveTimer: EventLoop.TimerID?
    /// Requests sent and not yet answered, and the id counter (RoomSessionRequests.swift).
    var pending = PendingRequests()
    /// Everyone waiting for the leave under way (a second `leave` while leaving waits too).
    var leaveCompletions: [RoomRequestCompletion] = []

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
        reconnect.restartAddressList()
        previousParticipantID = nil
        joinedBefore = false
    }

    deinit {
        pending.removeAll()  // no callbacks from a session being destroyed
        onEvent = nil
        teardownConnection()
        cancelTimer(&retryTimer)
        cancelTimer(&leaveTimer)
        signalSource?.close()
        sendBuffer.deallocate()
        receiveBuffer.deallocate()
    }

    // MARK: State changes, events, timers

    func cancelTimer(_ timer: inout EventLoop.TimerID?) {
        if let t = timer { loop.cancel(t) }
        timer = nil
    }

    func setState(_ state: RoomConnectionState) {
        guard state != connectionState else { return }
        connectionState = state
        Log.info("room: \(state)")
        emit(.stateChanged(state))
    }

    func emit(_ event: RoomSessionEvent) { onEvent?(event) }
}

/// Lets the event-signal handler, created before `self` is complete, reach the session.
private final class WeakSessionBox {
    weak var session: RoomSession?
}

extension RoomSession: RoomBackend {
    public var backendName: String { "roomserver" }
}
