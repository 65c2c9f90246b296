/// Counters of everything the server did or refused. Every dropped datagram and every
/// connection cut off is counted under exactly one reason.
public struct RoomServerStatistics: Sendable, Equatable {
    // Signalling.
    public var connectionsAccepted = 0
    public var joins = 0
    /// Joins that took back a seat within its reconnect grace (also counted in `joins`).
    public var resumes = 0
    /// `hello`s refused (bad version, token refusals, full room, room refusals).
    public var joinsRefused = 0
    public var framesReceived = 0
    /// Frames whose payload did not decode (answered with an error, connection kept).
    public var badMessages = 0
    /// Length prefix of 0 or over the limit (answered with an error, connection closed).
    public var framingErrors = 0
    /// Connections cut off for sending more than `maxRequestsPerSecond`.
    public var floodDisconnects = 0
    /// Connections cut off because their outgoing buffer was full (a peer that does not read).
    public var backpressureDisconnects = 0
    /// Connections closed after `keepaliveTimeout` of silence.
    public var keepaliveTimeouts = 0
    /// Requests answered with `error`.
    public var requestsRefused = 0
    /// `receiver_loss` messages sent to senders (from the participants' `loss_report`s).
    public var receiverLossSent = 0
    /// Connections closed for sending no valid `hello` within `limits.hello_timeout_ms`.
    public var helloTimeouts = 0
    /// Connections refused at accept: every slot (`max_connections`, or the file descriptor
    /// limit minus a reserve) holds a joined participant, or the peer's address has
    /// `max_unjoined_per_address` not joined yet.
    public var connectionsRefused = 0
    /// Connections that had not joined, closed at capacity to make room for a new one (the
    /// oldest first), so a flood of silent connections cannot keep appliances out.
    public var connectionsEvicted = 0

    /// App messages refused to their sender for the participant's or the room's budget.
    public var appMessagesRefused = 0

    // Media.
    public var datagramsReceived = 0
    public var bindingsAccepted = 0
    /// Valid bindings from an address not proven yet (no cookie, or another address's): answered
    /// with a challenge, the media address unchanged.
    public var bindingChallenges = 0
    /// RTP packets accepted from a bound participant and forwarded (each counts once).
    public var packetsForwarded = 0
    /// Datagrams sent (forwarded copies and binding answers).
    public var datagramsSent = 0
    /// `send` refused because the socket buffer was full, or failed.
    public var sendFailures = 0
    public var dropped = Drops()

    /// Why media datagrams were dropped.
    public struct Drops: Sendable, Equatable {
        /// First byte neither RTP version 2 nor `'R'`, or an empty datagram.
        public var garbage = 0
        /// Larger than the receive buffer.
        public var truncated = 0
        /// A binding datagram with the wrong length, magic or MAC, or for an unknown participant.
        public var badBinding = 0
        /// A valid binding datagram whose timestamp was not newer than the last accepted.
        public var bindingReplay = 0
        /// Binding datagrams beyond the budget of their source address or their participant,
        /// dropped unanswered before any other work.
        public var bindingRateLimited = 0
        /// RTP from an address no valid binding datagram came from.
        public var unknownAddress = 0
        /// RTP that does not parse.
        public var malformedRTP = 0
        /// RTP whose SSRC is not the one assigned to the sender.
        public var wrongSSRC = 0
        /// RTP from a participant that may not publish (audience, muted).
        public var notPublishing = 0
        /// RTP from a publisher outside the forwarded top-N.
        public var notForwarded = 0
        /// RTP beyond the publisher's `limits.media_packets_per_second` / `_bytes_per_second`.
        public var rateLimited = 0
        /// RTP from a participant whose signalling connection is lost (in its reconnect grace).
        public var disconnected = 0
        /// SRTP whose authentication tag did not verify with the sender's uplink key (forged,
        /// corrupted, plain RTP to an encrypting server, or an old key).
        public var srtpAuthentication = 0
        /// SRTP refused by the sender's replay window (a packet index already received or
        /// too old).
        public var srtpReplay = 0

        mutating func add(_ other: Drops) {
            garbage += other.garbage
            truncated += other.truncated
            badBinding += other.badBinding
            bindingReplay += other.bindingReplay
            bindingRateLimited += other.bindingRateLimited
            unknownAddress += other.unknownAddress
            malformedRTP += other.malformedRTP
            wrongSSRC += other.wrongSSRC
            notPublishing += other.notPublishing
            notForwarded += other.notForwarded
            rateLimited += other.rateLimited
            disconnected += other.disconnected
            srtpAuthentication += other.srtpAuthentication
            srtpReplay += other.srtpReplay
        }

        public var total: Int {
            garbage + truncated + badBinding + bindingReplay + bindingRateLimited + unknownAddress + malformedRTP + wrongSSRC
                + notPublishing + notForwarded + rateLimited + disconnected + srtpAuthentication + srtpReplay
        }
    }

    /// Adds another worker's counts (a server of several workers reports their sum).
    public mutating func add(_ other: RoomServerStatistics) {
        connectionsAccepted += other.connectionsAccepted
        joins += other.joins
        resumes += other.resumes
        joinsRefused += other.joinsRefused
        framesReceived += other.framesReceived
        badMessages += other.badMessages
        framingErrors += other.framingErrors
        floodDisconnects += other.floodDisconnects
        backpressureDisconnects += other.backpressureDisconnects
        keepaliveTimeouts += other.keepaliveTimeouts
        requestsRefused += other.requestsRefused
        receiverLossSent += other.receiverLossSent
        helloTimeouts += other.helloTimeouts
        connectionsRefused += other.connectionsRefused
        connectionsEvicted += other.connectionsEvicted
        appMessagesRefused += other.appMessagesRefused
        datagramsReceived += other.datagramsReceived
        bindingsAccepted += other.bindingsAccepted
        bindingChallenges += other.bindingChallenges
        packetsForwarded += other.packetsForwarded
        datagramsSent += other.datagramsSent
        sendFailures += other.sendFailures
        dropped.add(other.dropped)
    }

    public init() {}
}

/// One application's (tenant's) share of the server's work: several tenants share a server
/// (a key each in `[keys]`), and whoever runs it needs to see which one uses it how much.
public struct TenantStatistics: Sendable, Equatable {
    /// Joins into this application's rooms (resumes included), since the server started.
    public var joins = 0
    /// Rooms opened for this application since the server started.
    public var roomsOpened = 0
    /// Media packets forwarded in its rooms (each counted once, however many listeners).
    public var packetsForwarded = 0
    /// Participants in its rooms now.
    public var participants = 0

    public init() {}

    public mutating func add(_ other: TenantStatistics) {
        joins += other.joins
        roomsOpened += other.roomsOpened
        packetsForwarded += other.packetsForwarded
        participants += other.participants
    }
}
