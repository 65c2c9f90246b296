import RoomModel
import RoomProtocol

// Requests of joined participants to room commands: pings and loss reports answered here, token
// refreshes checked here, everything else handed to the participant's `Room` (app messages first
// charged to their budgets), answered with `ok` or the room's refusal. Also the loss feedback each
// sender is told (`receiver_loss`) and the app-message budgets.

extension RoomServer {
    func request(_ message: SignalMessage, from p: Participant, session s: Session) {
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

    // MARK: - Loss feedback

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
