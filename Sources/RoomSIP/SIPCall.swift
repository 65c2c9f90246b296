import COSIP
import RoomSDP
import RoomSystem

/// One call: its dialog, its offer/answer state, and what the application sees of it. Made by
/// `SIPUserAgent` (an incoming INVITE, or `call(uri:localMedia:)`); the agent keeps it until it
/// ends. Confined to the loop's thread like the agent.
public final class SIPCall {
    public enum Direction: Sendable, Equatable { case incoming, outgoing }

    public let direction: Direction
    /// The far end's address of record (From of an incoming call, the dialled URI otherwise).
    public let remoteURI: String
    public let remoteDisplayName: String?
    public private(set) var state: SIPCallState
    /// The INVITE's offer (incoming calls), for the application to look at before answering.
    public let remoteOffer: SessionDescription?
    /// Every change: ringing, confirmed, updated (re-INVITE), ended. On the loop thread.
    public var onEvent: ((SIPCallEvent) -> Void)?

    weak var agent: SIPUserAgent?
    var dialog: SIPDialog
    /// What we negotiate with; its direction changes on hold and resume.
    var localMedia: CallLocalMedia?
    var agreement: Agreement?
    /// o= of our descriptions: the id is fixed, the version rises with each new one (RFC 3264 §8).
    var origin = SessionDescription.Origin(username: "roomd", sessionID: String(UInt32.random(in: 1 ... .max)), sessionVersion: "1")

    // Server side (incoming INVITE or re-INVITE)
    var serverInvite: UnsafeMutablePointer<osip_transaction_t>?
    var inviteBranch: String?
    var inviteSource: SocketAddress?
    /// Our last 2xx to an INVITE, resent until its ACK (timers G and H): osip's IST ends at the
    /// 2xx and leaves its retransmission to the dialog (RFC 3261 §13.3.1.4).
    var unacknowledged2xx: (text: String, cseq: UInt32, agreement: Agreement, isInitial: Bool)?
    var retransmitTimer: EventLoop.TimerID?
    /// Ends a call nobody answers (`SIPUserAgent.ringTimeout`).
    var ringTimer: EventLoop.TimerID?
    var retransmitInterval = 0
    var retransmitDeadline: UInt64 = 0
    /// The final answer text sent to the INVITE, for a retransmitted INVITE that reaches us
    /// after osip's transaction ended.
    var lastFinalToInvite: String?

    // Client side (our INVITE or re-INVITE)
    var clientInvite: UnsafeMutablePointer<osip_transaction_t>?
    var inviteText: String?
    /// Where our first INVITE (and its CANCEL) went: the registrar, or the URI's host.
    var outgoingDestination: SocketAddress?
    var inviteCSeq: UInt32 = 0
    var offerSent: CallLocalMedia?
    var challengeAnswered = false
    var cancelRequested = false
    /// The ACK for the 2xx to our INVITE, resent when the 2xx is (RFC 3261 §13.2.2.4).
    var ackText: String?
    var ackCSeq: UInt32 = 0

    init(direction: Direction, remoteURI: String, remoteDisplayName: String?, state: SIPCallState,
         remoteOffer: SessionDescription?, dialog: SIPDialog, agent: SIPUserAgent) {
        self.direction = direction
        self.remoteURI = remoteURI
        self.remoteDisplayName = remoteDisplayName
        self.state = state
        self.remoteOffer = remoteOffer
        self.dialog = dialog
        self.agent = agent
    }

    public var isEnded: Bool { if case .ended = state { true } else { false } }
    var isRinging: Bool { if case .ringing = state { true } else { false } }
    var isConfirmed: Bool { if case .confirmed = state { true } else { false } }

    // MARK: The application's actions

    /// Answers an incoming ringing call: 200 OK with the answer to its offer, resent until the
    /// ACK. An offer that `localMedia` cannot answer is refused with 488 and the call ends;
    /// the error says why.
    public func answer(localMedia: CallLocalMedia) throws(SIPCallError) {
        guard direction == .incoming, isRinging, let agent else { throw SIPCallError("answer: the call is not an incoming ringing call (\(state))") }
        try agent.answerIncoming(self, localMedia: localMedia)
    }

    /// Refuses an incoming ringing call: 603 Decline by default, 486 Busy Here when busy.
    public func decline(busy: Bool = false) {
        guard direction == .incoming, isRinging, let agent else { return }
        agent.rejectIncoming(self, code: busy ? 486 : 603)
    }

    /// Refuses an incoming ringing call whose offer cannot be answered: 488 Not Acceptable Here
    /// with `reason` in a Warning, and a log line. The application checks the offer against its
    /// policy as the call arrives, so that an offer it could never answer (hostile, or only
    /// codecs and keys it does not have) does not ring the room first.
    public func refuseOffer(because reason: String) {
        guard direction == .incoming, isRinging, let agent else { return }
        agent.rejectIncoming(self, code: 488, warning: reason)
    }

    /// Ends the call whatever its state: BYE when confirmed, CANCEL while our INVITE rings,
    /// 603 for an incoming call not answered yet.
    public func hangUp() {
        guard let agent, !isEnded else { return }
        switch (direction, state) {
        case (.incoming, .ringing): agent.rejectIncoming(self, code: 603)
        case (.outgoing, .ringing), (.outgoing, .calling): agent.cancelOutgoing(self)
        default: agent.sendBye(self)
        }
    }

    /// Cancels our INVITE before it is answered (CANCEL; the call ends `cancelled`).
    public func cancel() {
        guard direction == .outgoing, !isConfirmed, !isEnded, let agent else { return }
        agent.cancelOutgoing(self)
    }

    /// Puts the far end on hold (a re-INVITE offering sendonly) or takes it off (sendrecv).
    /// The result comes as `.updated(Agreement)`.
    public func hold() throws(SIPCallError) { try reinvite(direction: .sendonly) }
    public func resume() throws(SIPCallError) { try reinvite(direction: .sendrecv) }

    private func reinvite(direction: MediaDirection) throws(SIPCallError) {
        guard isConfirmed, let agent, var media = localMedia else { throw SIPCallError("hold/resume: the call is not confirmed (\(state))") }
        guard clientInvite == nil, serverInvite == nil, unacknowledged2xx == nil else {
            throw SIPCallError("hold/resume: another offer/answer is in progress")
        }
        media.direction = direction
        guard agent.sendInvite(self, localMedia: media) else { throw SIPCallError("hold/resume: could not build the re-INVITE") }
    }

    // MARK: State

    func set(_ new: SIPCallState, event: SIPCallEvent? = nil) {
        if isEnded { return }
        state = new
        if let event { onEvent?(event) }
    }

    func nextOrigin() -> SessionDescription.Origin {
        let v = (UInt64(origin.sessionVersion) ?? 1) &+ 1
        origin.sessionVersion = String(v)
        return origin
    }
}

/// Where a call stands.
public enum SIPCallState: Sendable, Equatable {
    /// Our INVITE is out, nothing provisional back yet.
    case calling
    /// Incoming: offered to the application. Outgoing: the far end rings (1xx).
    case ringing
    case confirmed(Agreement)
    case ended(SIPCallEndReason)
}

/// What the application is told, in order.
public enum SIPCallEvent: Sendable, Equatable {
    case ringing
    case confirmed(Agreement)
    /// A re-INVITE (theirs or ours: hold, resume) changed the agreement.
    case updated(Agreement)
    case ended(SIPCallEndReason)
}

public enum SIPCallEndReason: Sendable, Equatable, CustomStringConvertible {
    /// The far end sent BYE.
    case remoteHungUp
    /// We sent BYE (`hangUp()`).
    case localHungUp
    /// The far end refused our INVITE (4xx-6xx).
    case declined(code: Int, reason: String)
    /// We refused theirs (`decline()`, busy, or 488 for an offer we could not answer).
    case rejected(code: Int)
    /// The caller cancelled before the answer (their CANCEL or our `cancel()`).
    case cancelled
    /// No answer in time: our INVITE (timer B, or `ringTimeout` while it rings), a call we
    /// did not answer within `ringTimeout` (480), or no ACK for our 2xx (timer H).
    case timeout
    case failed(String)

    public var description: String {
        switch self {
        case .remoteHungUp: "hung up by the far end"
        case .localHungUp: "hung up by us"
        case .declined(let code, let reason): "declined: \(code) \(reason)"
        case .rejected(let code): "rejected by us: \(code)"
        case .cancelled: "cancelled"
        case .timeout: "timeout"
        case .failed(let why): "failed: \(why)"
        }
    }
}

public struct SIPCallError: Error, Sendable, Equatable, CustomStringConvertible {
    public let description: String
    init(_ description: String) { self.description = description }
}
