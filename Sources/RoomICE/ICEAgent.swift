/// The appliance's ICE agent (RFC 8445), for one component (BUNDLE + rtcp-mux) over one UDP
/// socket, without sockets or clocks of its own: the caller feeds it datagrams and the time, and
/// sends what it queues (`takeOutgoing`). So it runs on roomd's event loop thread beside the
/// media, and two agents can be wired together in a test with loss and reordering in between.
///
/// What it does — what an appliance reaching a media server needs, no more (docs/webrtc.md):
/// - connectivity checks from its one local base to every remote UDP candidate, highest pair
///   priority first, one new check every `pacing` (Ta), retransmitted with doubling timeouts;
/// - answers the peer's checks (MESSAGE-INTEGRITY with the local password, FINGERPRINT),
///   learning peer-reflexive candidates from unknown sources, with triggered checks;
/// - role conflicts by tie-breaker (487);
/// - regular nomination when controlling (a second check with USE-CANDIDATE on the first
///   pair that works), accepting the peer's nomination when controlled;
/// - consent freshness (RFC 7675) on the selected pair: a check every 4-6 s, consent lost —
///   media must stop — after 30 s without an answer.
/// Not here: TURN relays, several local interfaces, ICE restarts (a new agent does that).
public final class ICEAgent {
    public struct Credentials: Sendable, Equatable {
        public var ufrag: String
        public var password: String
        public init(ufrag: String, password: String) {
            self.ufrag = ufrag
            self.password = password
        }
    }

    public enum Role: Sendable, Equatable { case controlling, controlled }

    public enum State: Sendable, Equatable {
        /// No remote credentials yet (checks from the peer are answered already).
        case new
        case checking
        /// A pair is selected: send media to `selectedAddress`.
        case connected
        /// Every pair failed, or nothing worked within `checkingTimeout`.
        case failed(String)
        /// Connected once, then the peer stopped answering consent checks for 30 s.
        case consentLost
    }

    public struct Outgoing: Sendable, Equatable {
        public var bytes: [UInt8]
        public var destination: STUNAddress
    }

    /// What happened, for stats and tests.
    public struct Counters: Sendable, Equatable {
        public var checksSent = 0
        public var retransmissions = 0
        public var requestsAnswered = 0
        /// Requests or responses with a bad or missing MESSAGE-INTEGRITY, or a wrong USERNAME.
        public var refusedIntegrity = 0
        public var roleConflicts = 0
        public var peerReflexiveCandidates = 0
        public var consentChecks = 0
    }

    public private(set) var role: Role
    public private(set) var state: State = .new
    /// Where media goes once connected.
    public private(set) var selectedAddress: STUNAddress?
    public private(set) var counters = Counters()
    public let local: Credentials
    public private(set) var remote: Credentials?

    /// Ta: one new check per this many ms (RFC 8445 §14.2 suggests 50 for one stream).
    public var pacingMs: UInt64 = 50
    /// First retransmission timeout; doubles each time, `maxAttempts` sends per check.
    public var initialRTOMs: UInt64 = 100
    public var maxAttempts = 6
    /// Gives up when nothing is connected this long after checking started.
    public var checkingTimeoutMs: UInt64 = 10_000
    /// RFC 7675: consent checks every 5 s ± 20 %, lost after 30 s without a response.
    public var consentIntervalMs: UInt64 = 5_000
    public var consentTimeoutMs: UInt64 = 30_000

    private let tieBreaker: UInt64
    private let hmac: STUNIntegrity
    private var random: () -> UInt64
    /// The priority of this agent's base as a host candidate (and, per RFC 8445 §7.1.1, the
    /// PRIORITY it puts in checks, as a peer-reflexive candidate would have).
    private let localPriority: UInt32 = (126 << 24) | (65535 << 8) | 255
    private let prflxPriority: UInt32 = (110 << 24) | (65535 << 8) | 255

    private var pairs: [Pair] = []
    private var outbox: [Outgoing] = []
    private var nextCheckAt: UInt64 = 0
    private var checkingSince: UInt64?
    private var remoteComplete = false
    private var consent: (transaction: [UInt8], sentAt: UInt64)?
    private var lastConsentAt: UInt64 = 0
    private var nextConsentAt: UInt64 = 0

    private struct Pair {
        enum Status { case waiting, inProgress, succeeded, failed }
        var remote: STUNAddress
        var remotePriority: UInt32
        var status = Status.waiting
        var transaction: [UInt8] = []
        var attempts = 0
        var sentAt: UInt64 = 0
        var rto: UInt64 = 0
        var withUseCandidate = false
        /// Controlled side: the peer nominated this pair before our own check of it succeeded.
        var nominatedByPeer = false
        var triggered = false
    }

    /// `random` gives transaction ids and the consent jitter (a CSPRNG in roomd: transaction
    /// ids are what stop off-path forgery of responses).
    public init(role: Role, local: Credentials, tieBreaker: UInt64, hmac: @escaping STUNIntegrity,
                random: @escaping () -> UInt64) {
        self.role = role
        self.local = local
        self.tieBreaker = tieBreaker
        self.hmac = hmac
        self.random = random
    }

    /// The remote side's credentials and the candidates known so far (more may trickle in).
    public func start(remote: Credentials, candidates: [(address: STUNAddress, priority: UInt32)], now: UInt64) {
        self.remote = remote
        for c in candidates { addPair(c.address, priority: c.priority) }
        if state == .new {
            state = .checking
            checkingSince = now
            nextCheckAt = now
        }
    }

    public func addRemoteCandidate(_ address: STUNAddress, priority: UInt32) { addPair(address, priority: priority) }

    /// The peer said `end-of-candidates`: when every pair has failed, the agent fails.
    public func remoteCandidatesComplete() { remoteComplete = true }

    /// Datagrams to send now (drains the queue).
    public func takeOutgoing() -> [Outgoing] {
        defer { outbox.removeAll(keepingCapacity: true) }
        return outbox
    }

    /// When `tick` next has something to do.
    public var nextDeadline: UInt64? {
        switch state {
        case .checking:
            var t = nextCheckAt
            for p in pairs where p.status == .inProgress { t = min(t, p.sentAt + p.rto) }
            if let since = checkingSince { t = min(t, since + checkingTimeoutMs) }
            return t
        case .connected:
            return min(nextConsentAt, lastConsentAt + consentTimeoutMs)
        default:
            return nil
        }
    }

    // MARK: Time

    public func tick(now: UInt64) {
        switch state {
        case .checking: tickChecks(now: now)
        case .connected: tickConsent(now: now)
        default: break
        }
    }

    private func tickChecks(now: UInt64) {
        for i in pairs.indices where pairs[i].status == .inProgress && now >= pairs[i].sentAt + pairs[i].rto {
            if pairs[i].attempts >= maxAttempts {
                pairs[i].status = .failed
            } else {
                counters.retransmissions += 1
                sendCheck(i, now: now, retransmit: true)
            }
        }
        if now >= nextCheckAt, let i = nextPairToCheck() {
            sendCheck(i, now: now, retransmit: false)
            nextCheckAt = now + pacingMs
        } else if now >= nextCheckAt {
            nextCheckAt = now + pacingMs
        }
        if state == .checking {
            let allFailed = !pairs.isEmpty && pairs.allSatisfy { $0.status == .failed }
            if allFailed && remoteComplete {
                state = .failed("no candidate pair answered (\(pairs.count) tried)")
            } else if let since = checkingSince, now >= since + checkingTimeoutMs {
                state = .failed(pairs.isEmpty ? "no remote candidates within \(checkingTimeoutMs / 1000) s"
                                              : "no candidate pair answered within \(checkingTimeoutMs / 1000) s (\(pairs.count) tried)")
            }
        }
    }

    private func tickConsent(now: UInt64) {
        if now >= lastConsentAt + consentTimeoutMs {
            state = .consentLost
            return
        }
        if now >= nextConsentAt, let selectedAddress, let remote {
            let id = transactionID()
            consent = (id, now)
            counters.consentChecks += 1
            outbox.append(Outgoing(bytes: request(id, remote: remote, useCandidate: false), destination: selectedAddress))
            let jitter = consentIntervalMs / 5
            nextConsentAt = now + consentIntervalMs - jitter + (jitter > 0 ? random() % (2 * jitter) : 0)
        }
    }

    // MARK: Datagrams

    /// Handles a datagram if it is STUN (returns true); anything else (DTLS, SRTP, RTCP) is the
    /// caller's. Datagrams from an address other than the selected one are STUN or nothing: media
    /// is only accepted from where consent was given.
    @discardableResult
    public func receive(_ bytes: UnsafeRawBufferPointer, from source: STUNAddress, now: UInt64) -> Bool {
        guard let header = STUNMessage.peekHeader(bytes) else { return false }
        // Parsed once, in the handler, with the key its class is signed with.
        switch header.messageClass {
        case .request: handleRequest(bytes, from: source, now: now)
        case .success, .error: handleResponse(bytes, transactionID: header.transactionID, from: source, now: now)
        case .indication: break   // keepalives: nothing to do
        }
        return true
    }

    private func handleRequest(_ bytes: UnsafeRawBufferPointer, from source: STUNAddress, now: UInt64) {
        let key = Array(local.password.utf8)
        guard let (m, checks) = try? STUNMessage.parse(bytes, key: key, hmac: hmac), checks.integrityValid,
              checks.fingerprintValid || !checks.hasFingerprint,
              let username = m.username, username.hasPrefix(local.ufrag + ":") else {
            counters.refusedIntegrity += 1
            return
        }
        if let remote, username != local.ufrag + ":" + remote.ufrag {
            counters.refusedIntegrity += 1
            return
        }
        if let peerRole = m.iceRole {
            let conflict = (role == .controlling) == peerRole.controlling
            if conflict {
                counters.roleConflicts += 1
                let weWin = tieBreaker >= peerRole.tieBreaker
                if (role == .controlling) == weWin {
                    // We keep our role: tell the peer to switch.
                    reply(to: m, from: source, error: (487, "Role Conflict"))
                    return
                }
                role = role == .controlling ? .controlled : .controlling
            }
        }
        reply(to: m, from: source, error: nil)
        counters.requestsAnswered += 1

        var index = pairs.firstIndex { $0.remote == source }
        if index == nil {
            // RFC 8445 §7.3.1.3: an unknown source is a peer-reflexive candidate.
            counters.peerReflexiveCandidates += 1
            pairs.append(Pair(remote: source, remotePriority: m.priority ?? prflxPriority))
            index = pairs.count - 1
        }
        let i = index!
        if m.useCandidate && role == .controlled {
            if pairs[i].status == .succeeded {
                select(i, now: now)
            } else {
                pairs[i].nominatedByPeer = true
            }
        }
        // Triggered check (§7.3.1.4), once we can sign it.
        if remote != nil, state == .checking, pairs[i].status == .waiting || pairs[i].status == .failed {
            pairs[i].status = .waiting
            pairs[i].triggered = true
            if now >= nextCheckAt { tickChecks(now: now) }
        }
    }

    private func handleResponse(_ bytes: UnsafeRawBufferPointer, transactionID: [UInt8], from source: STUNAddress, now: UInt64) {
        guard let remote else { return }
        // Only answers to our own transactions are worth an HMAC.
        let isConsent = consent.map { $0.transaction == transactionID } ?? false
        guard isConsent || pairs.contains(where: { $0.status == .inProgress && $0.transaction == transactionID }) else { return }
        guard let (m, checks) = try? STUNMessage.parse(bytes, key: Array(remote.password.utf8), hmac: hmac), checks.integrityValid else {
            counters.refusedIntegrity += 1
            return
        }
        if isConsent {
            if m.messageClass == .success && source == selectedAddress { lastConsentAt = now }
            consent = nil
            return
        }
        guard let i = pairs.firstIndex(where: { $0.transaction == m.transactionID }) else { return }
        if m.messageClass == .error {
            if m.errorCode?.code == 487 {
                counters.roleConflicts += 1
                role = role == .controlling ? .controlled : .controlling
                pairs[i].status = .waiting
                pairs[i].triggered = true
            } else {
                pairs[i].status = .failed
            }
            return
        }
        // §7.2.5.2.1: the response must come from where the request went (symmetric).
        guard source == pairs[i].remote else { pairs[i].status = .failed; return }
        pairs[i].status = .succeeded
        if role == .controlling {
            if pairs[i].withUseCandidate {
                select(i, now: now)
            } else if selectedAddress == nil && !pairs.contains(where: { $0.withUseCandidate && $0.status == .inProgress }) {
                // Regular nomination: check this pair again, this time with USE-CANDIDATE.
                pairs[i].withUseCandidate = true
                sendCheck(i, now: now, retransmit: false)
            }
        } else if pairs[i].nominatedByPeer {
            select(i, now: now)
        }
    }

    // MARK: Pieces

    private func addPair(_ address: STUNAddress, priority: UInt32) {
        guard !pairs.contains(where: { $0.remote == address }) else { return }
        pairs.append(Pair(remote: address, remotePriority: priority))
    }

    /// RFC 8445 §6.1.2.3: 2^32·min(G,D) + 2·max(G,D) + (G > D ? 1 : 0), G the controlling side's.
    private func pairPriority(_ p: Pair) -> UInt64 {
        let g = UInt64(role == .controlling ? localPriority : p.remotePriority)
        let d = UInt64(role == .controlling ? p.remotePriority : localPriority)
        return (min(g, d) << 32) + 2 * max(g, d) + (g > d ? 1 : 0)
    }

    private func nextPairToCheck() -> Int? {
        if let t = pairs.indices.first(where: { pairs[$0].triggered && pairs[$0].status == .waiting }) { return t }
        var best: Int?
        for i in pairs.indices where pairs[i].status == .waiting {
            if best == nil || pairPriority(pairs[i]) > pairPriority(pairs[best!]) { best = i }
        }
        return best
    }

    private func sendCheck(_ i: Int, now: UInt64, retransmit: Bool) {
        guard let remote else { return }
        if !retransmit {
            pairs[i].transaction = transactionID()
            pairs[i].attempts = 0
            pairs[i].rto = initialRTOMs
            pairs[i].triggered = false
            counters.checksSent += 1
        } else {
            pairs[i].rto *= 2
        }
        pairs[i].status = .inProgress
        pairs[i].attempts += 1
        pairs[i].sentAt = now
        let useCandidate = role == .controlling && pairs[i].withUseCandidate
        outbox.append(Outgoing(bytes: request(pairs[i].transaction, remote: remote, useCandidate: useCandidate),
                               destination: pairs[i].remote))
    }

    private func request(_ id: [UInt8], remote: Credentials, useCandidate: Bool) -> [UInt8] {
        var attributes: [STUNAttribute] = [
            .username(remote.ufrag + ":" + local.ufrag),
            .priority(prflxPriority),
            role == .controlling ? .iceControlling(tieBreaker) : .iceControlled(tieBreaker),
        ]
        if useCandidate { attributes.append(.useCandidate) }
        return STUNMessage(class: .request, transactionID: id, attributes: attributes)
            .serialize(key: Array(remote.password.utf8), hmac: hmac)
    }

    private func reply(to request: STUNMessage, from source: STUNAddress, error: (Int, String)?) {
        let attributes: [STUNAttribute] = error.map { [.errorCode($0.0, $0.1)] }
            ?? [.xorMappedAddress(source, transactionID: request.transactionID)]
        let response = STUNMessage(class: error == nil ? .success : .error, transactionID: request.transactionID,
                                   attributes: attributes)
        outbox.append(Outgoing(bytes: response.serialize(key: Array(local.password.utf8), hmac: hmac), destination: source))
    }

    private func select(_ i: Int, now: UInt64) {
        guard state == .checking || state == .new else { return }
        selectedAddress = pairs[i].remote
        state = .connected
        lastConsentAt = now
        nextConsentAt = now + consentIntervalMs
    }

    private func transactionID() -> [UInt8] {
        let a = random(), b = random()
        return (0..<8).map { UInt8(truncatingIfNeeded: a >> (8 * $0)) } + (0..<4).map { UInt8(truncatingIfNeeded: b >> (8 * $0)) }
    }
}
