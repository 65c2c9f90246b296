import COSIP
import RoomSystem

/// How the agent tells the log about bad input (issue 29: "each a clear log line"): a dropped
/// datagram or a refused request gets a line of its own with the reason, but at most
/// `linesPerMinute` of each kind a minute and `totalLinesPerMinute` in all; beyond that they are
/// counted and summed up in one line a minute later. Anyone may send to the SIP socket, so
/// without the cap a flood of datagrams would become a flood of log lines (journald's rate limit
/// would then drop roomd's other lines too); the allowance is per kind so that a flood's drops
/// do not use up the line a hostile offer arriving with it gets.
struct SIPBadInputLog {
    static let linesPerMinute = 3.0
    static let totalLinesPerMinute = 20.0
    static let summaryInterval: Duration = .seconds(60)
    /// Source addresses named in a summary; more are only counted, up to `countedSources`.
    static let namedSources = 4
    static let countedSources = 1000

    /// Lines left (refilled continuously) for each kind, and for all kinds together: a token
    /// bucket each. The kinds are the agent's own phrases, a few dozen at most.
    private var allowances: [String: (lines: Double, last: UInt64)] = [:]
    private var total: (lines: Double, last: UInt64) = (totalLinesPerMinute, 0)
    /// What was not logged on a line of its own since the last summary: a count per kind
    /// ("datagrams over budget", "INVITEs refused 486"), in the order first seen.
    private(set) var suppressed: [(kind: String, count: Int)] = []
    private(set) var suppressedSources: [SocketAddress] = []
    /// The other sources, each counted once (a set, bounded: a flood of forged addresses must
    /// not grow it without end).
    private(set) var otherSources: Set<SocketAddress> = []
    var summaryTimer: EventLoop.TimerID?

    /// Whether a line of its own about `kind` may be written at `now` (monotonic nanoseconds).
    mutating func admitLine(_ kind: String, now: UInt64) -> Bool {
        func refill(_ bucket: inout (lines: Double, last: UInt64), perMinute: Double) {
            let elapsed = now > bucket.last ? Double(now - bucket.last) / 60e9 : 0
            bucket.lines = min(perMinute, bucket.lines + elapsed * perMinute)
            bucket.last = now
        }
        var own = allowances[kind] ?? (Self.linesPerMinute, now)
        refill(&own, perMinute: Self.linesPerMinute)
        refill(&total, perMinute: Self.totalLinesPerMinute)
        let admitted = own.lines >= 1 && total.lines >= 1
        if admitted {
            own.lines -= 1
            total.lines -= 1
        }
        allowances[kind] = own
        return admitted
    }

    mutating func count(_ kind: String, from source: SocketAddress) {
        if let i = suppressed.firstIndex(where: { $0.kind == kind }) { suppressed[i].count += 1 } else { suppressed.append((kind, 1)) }
        if !suppressedSources.contains(source) {
            if suppressedSources.count < Self.namedSources {
                suppressedSources.append(source)
            } else if otherSources.count < Self.countedSources {
                otherSources.insert(source)
            }
        }
    }

    /// The summary of what was counted, and the counts cleared; nil when nothing was.
    mutating func takeSummary() -> String? {
        guard !suppressed.isEmpty else { return nil }
        let kinds = suppressed.map { "\($0.count) \($0.kind)" }.joined(separator: ", ")
        var from = suppressedSources.map(\.description).joined(separator: ", ")
        let others = otherSources.count
        if others > 0 {
            from += " and \(others == Self.countedSources ? "at least " : "")\(others) other address\(others == 1 ? "" : "es")"
        }
        suppressed = []
        suppressedSources = []
        otherSources = []
        return "\(kinds) in the last \(Self.summaryInterval.components.seconds) s, not logged one by one (from \(from))"
    }
}

/// Why a datagram was dropped before any transaction saw it.
enum SIPDropReason: String {
    case overBudget = "over its source's budget (or the budget all unknown sources share)"
    case truncated = "longer than 64 KiB or empty"
    case unparseable = "not a SIP message osip can parse"
    case incomplete = "missing what transactions are matched on (Via host, From, To, Call-ID, CSeq or Request-URI)"
    case statusOutOfRange = "a response with a status outside 100-699"
    case responseFromStranger = "a response from an address no request of ours went to"
    case responseToNothing = "a response to no request of ours"
    case requestWithoutTags = "a request without a method, Call-ID, CSeq number, From tag or Via branch"
    case transactionsFull = "a new request while the agent remembers its most transactions (maximumTransactions)"
    case noTransaction = "a request osip would not make a transaction for"

    /// The plural noun phrase a summary counts it under.
    var kind: String {
        switch self {
        case .overBudget: "datagrams over budget"
        case .truncated: "truncated or empty datagrams"
        case .unparseable: "unparseable datagrams"
        case .incomplete: "messages without the headers transactions need"
        case .statusOutOfRange: "responses with a status outside 100-699"
        case .responseFromStranger: "responses from strangers"
        case .responseToNothing: "responses to nothing of ours"
        case .requestWithoutTags: "requests without tags or branch"
        case .transactionsFull: "requests dropped while the transaction table was full"
        case .noTransaction: "requests osip refused"
        }
    }
}

extension SIPUserAgent {
    /// Counts a datagram dropped unread and tells the log why (within `SIPBadInputLog`'s cap).
    func drop(_ reason: SIPDropReason, from source: SocketAddress) {
        datagramsDropped += 1
        if reason == .overBudget { datagramsOverBudget += 1 }
        reportBadInput(kind: reason.kind, from: source, level: .warning) {
            "sip: dropped a datagram from \(source): \(reason.rawValue)"
        }
    }

    /// A line for one piece of bad input, or a count for the next summary when the log's
    /// allowance is spent (the summary follows `summaryInterval` later).
    func reportBadInput(kind: String, from source: SocketAddress, level: LogLevel, _ line: () -> String) {
        if badInputLog.admitLine(kind, now: monotonicNanoseconds()) {
            Log.write(level, line())
            return
        }
        badInputLog.count(kind, from: source)
        guard badInputLog.summaryTimer == nil else { return }
        badInputLog.summaryTimer = loop.schedule(after: SIPBadInputLog.summaryInterval) { [weak self] in
            guard let self else { return }
            self.badInputLog.summaryTimer = nil
            if let summary = self.badInputLog.takeSummary() { Log.warning("sip: \(summary)") }
        }
    }

    /// Ends a server transaction whose answer was given (`respond` first, and either inside an
    /// osip callback, where osip sends it before the step ends, or followed by `step()`): osip
    /// forgets it (no retransmissions, no timers) and `step` frees it with the others that ended.
    func forgetAfterAnswer(_ tr: UnsafeMutablePointer<osip_transaction_t>) {
        guard let osip else { return }
        osip_remove_transaction(osip, tr)
        finished.append(tr)
    }

    /// Whether `source` is someone the agent talks to: the registrar (which relays every call
    /// made through it) or the far end of a call in progress. Their datagrams do not draw on
    /// the budget all other sources share, so a flood from many addresses cannot cut the agent
    /// off from its registrar or its calls.
    func isKnownPeer(_ source: SocketAddress) -> Bool {
        source == account.registrar
            || calls.contains { $0.outgoingDestination == source || $0.inviteSource == source || nextHop($0.dialog) == source }
    }
}
