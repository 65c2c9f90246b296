/// The appliance in a Janus AudioBridge room, as a state machine without I/O: it turns what the
/// appliance wants (join with an SDP offer, mute, leave) into Janus requests, and Janus's
/// messages into what the appliance must act on (the SDP answer, remote candidates, who is in the
/// room, failures). The caller carries the text over the WebSocket (`WebSocketClient`) and calls
/// `tick` for the keepalive.
///
/// Why AudioBridge first: Janus mixes the room, so the appliance receives one stream whatever the
/// room's size (one decoder, a fixed CPU cost — issue 9's budget), and the mute button maps to
/// the plugin's own `muted` flag, which browsers in the room see. The mapping of the appliance's
/// roles is in docs/webrtc.md.
public struct JanusAudioBridgeSession {
    public enum State: Sendable, Equatable {
        case idle
        case creatingSession
        case attaching
        /// `join` sent with the offer; waiting for `joined` and the answer.
        case joining
        /// In the room; media flows once ICE and DTLS are up (`webrtcup`).
        case joined
        case left
        case failed(String)
    }

    /// What the appliance must act on.
    public enum Output: Sendable, Equatable {
        /// Janus's SDP answer to the offer given to `join`.
        case answer(String)
        case remoteCandidate(JanusTrickle)
        case joined(participantID: UInt64, others: [PluginEvent.Participant])
        case participantsChanged([PluginEvent.Participant])
        case participantLeft(UInt64)
        /// Janus's PeerConnection is up (ICE + DTLS done on its side).
        case mediaUp
        /// Janus started (true) or stopped (false) receiving our audio (its `media` event).
        case janusReceivesAudio(Bool)
        /// Janus hung up the PeerConnection (reason), or the room went away.
        case hangup(String)
        case failed(String)
        /// A moderator request Janus refused (wrong secret, unknown participant): the room goes on.
        case refused(String)
        /// Janus took a `configure` (mute, name): what it says of this participant from now on
        /// reflects it.
        case configured
        /// A moderator removed this participant from the room.
        case kicked
    }

    public private(set) var state = State.idle
    public private(set) var sessionID: UInt64?
    public private(set) var handleID: UInt64?
    public private(set) var participantID: UInt64?
    /// Janus drops a session after 60 s of silence (its `session_timeout`); every 25 s is safe.
    public var keepaliveIntervalMs: UInt64 = 25_000

    public let room: UInt64
    public var display: String
    public var pin: String?
    public var apiSecret: String?

    private var outgoing: [String] = []
    private var nextTransaction = 1
    private var pending: [String: String] = [:]   // transaction → what it was for
    private var offer: String?
    private var startMuted = false
    private var lastSentMs: UInt64 = 0

    public init(room: UInt64, display: String, pin: String? = nil, apiSecret: String? = nil) {
        self.room = room
        self.display = display
        self.pin = pin
        self.apiSecret = apiSecret
    }

    /// Texts to send on the WebSocket (drains them).
    public mutating func takeOutgoing() -> [String] {
        defer { outgoing.removeAll(keepingCapacity: true) }
        return outgoing
    }

    /// Starts: create a session, attach the AudioBridge, join with `offer`.
    public mutating func join(offer sdp: String, muted: Bool, now: UInt64) {
        guard state == .idle else { return }
        offer = sdp
        startMuted = muted
        state = .creatingSession
        send(JanusRequest("create", transaction: transaction("create")), now: now)
    }

    /// The mute button, or leaving/going on the stage: AudioBridge `configure`.
    public mutating func setMuted(_ muted: Bool, now: UInt64) {
        guard state == .joined || state == .joining else { startMuted = muted; return }
        var body = JanusPluginRequest(request: "configure")
        body.muted = muted
        sendMessage(body, jsep: nil, purpose: "configure", now: now)
    }

    /// Mute and the name browsers show, in one `configure` (the appliance shows a raised hand
    /// in its name: AudioBridge has no hand).
    public mutating func configure(muted: Bool, display: String, now: UInt64) {
        self.display = display
        guard state == .joined || state == .joining else { startMuted = muted; return }
        var body = JanusPluginRequest(request: "configure")
        body.muted = muted
        body.display = display
        sendMessage(body, jsep: nil, purpose: "configure", now: now)
    }

    /// A moderator's request on another participant: `mute`, `unmute` or `kick`, with the
    /// room's secret. Janus answers with an event (`failure` when the secret is wrong), and tells
    /// every participant the new state.
    public mutating func moderate(_ request: String, participant: UInt64, secret: String, now: UInt64) {
        guard state == .joined else { return }
        var body = JanusPluginRequest(request: request, room: room)
        body.id = participant
        body.secret = secret
        sendMessage(body, jsep: nil, purpose: "moderate", now: now)
    }

    /// A local ICE candidate (or `.end`).
    public mutating func trickle(_ candidate: JanusTrickle, now: UInt64) {
        guard let sessionID, let handleID, state == .joining || state == .joined else { return }
        var r = JanusRequest("trickle", transaction: transaction("trickle"), session: sessionID, handle: handleID)
        r.candidate = candidate
        send(r, now: now)
    }

    public mutating func leave(now: UInt64) {
        guard let sessionID else { state = .left; return }
        if let handleID, state == .joined || state == .joining {
            sendMessage(JanusPluginRequest(request: "leave"), jsep: nil, purpose: "leave", now: now)
            send(JanusRequest("detach", transaction: transaction("detach"), session: sessionID, handle: handleID), now: now)
        }
        send(JanusRequest("destroy", transaction: transaction("destroy"), session: sessionID), now: now)
        state = .left
    }

    public mutating func tick(now: UInt64) {
        guard let sessionID, state != .left, now >= lastSentMs + keepaliveIntervalMs else { return }
        if case .failed = state { return }
        send(JanusRequest("keepalive", transaction: transaction("keepalive"), session: sessionID), now: now)
    }

    /// One text message from Janus.
    public mutating func receive(_ text: String, now: UInt64) -> [Output] {
        let m: JanusMessage
        do { m = try JanusMessage.decode(text) } catch {
            return fail("\(error)")
        }
        let purpose = m.transaction.flatMap { pending[$0] }
        switch m.janus {
        case "ack":
            return []   // a plugin message was taken; its answer comes as an event
        case "error":
            if let t = m.transaction { pending[t] = nil }
            if purpose == "keepalive" || purpose == "trickle" || purpose == "detach" || purpose == "destroy" {
                // Late housekeeping answers after a restart: the next request reports it.
                if m.error?.code == 458 { return fail("Janus lost the session (\(m.error!.reason)): it restarted or timed out") }
                return []
            }
            return fail(m.error.map { "\($0)" } ?? "Janus error")
        case "success":
            if let t = m.transaction { pending[t] = nil }
            switch purpose {
            case "create":
                guard let id = m.data?.id else { return fail("Janus created a session without an id") }
                sessionID = id
                state = .attaching
                var attach = JanusRequest("attach", transaction: transaction("attach"), session: id)
                attach.plugin = "janus.plugin.audiobridge"
                send(attach, now: now)
                return []
            case "attach":
                guard let id = m.data?.id else { return fail("Janus attached a handle without an id") }
                handleID = id
                state = .joining
                var body = JanusPluginRequest(request: "join", room: room)
                body.display = display
                body.pin = pin
                body.muted = startMuted
                sendMessage(body, jsep: offer.map { JanusJSEP(type: "offer", sdp: $0) }, purpose: "join", now: now)
                return []
            default:
                return []
            }
        case "event":
            if let t = m.transaction { pending[t] = nil }
            return pluginEvent(m, purpose: purpose)
        case "webrtcup":
            return [.mediaUp]
        case "hangup":
            return [.hangup(m.reason ?? "hangup")]
        case "trickle":
            return m.candidate.map { [.remoteCandidate($0)] } ?? []
        case "detached":
            guard state != .left else { return [] }
            return fail("Janus detached the AudioBridge handle")
        case "timeout":
            return fail("Janus timed the session out (no keepalive for its session_timeout)")
        case "media":
            guard m.type == "audio" else { return [] }
            return [.janusReceivesAudio(m.receiving ?? false)]
        default:
            return []   // slowlink: the appliance's own meters say the same
        }
    }

    private mutating func pluginEvent(_ m: JanusMessage, purpose: String?) -> [Output] {
        guard let data = m.plugindata?.data else { return [] }
        if let failure = data.failure {
            if purpose == "join" { return fail("Janus refused the join: \(failure.reason) (\(failure.code))") }
            if purpose == "moderate" { return [.refused("AudioBridge refused the moderator's request: \(failure.reason) (\(failure.code))")] }
            if purpose == "configure" { return [.refused("AudioBridge refused the change of mute or name: \(failure.reason) (\(failure.code))"), .configured] }
            return [.failed("AudioBridge error \(failure.code): \(failure.reason)")]
        }
        var out: [Output] = []
        var joinedNow = false
        switch data.audiobridge {
        case "joined":
            // Only the answer to our own join makes us a participant: an unsolicited `joined`
            // (a hostile or confused server, before we asked, or after we left) is about others.
            if let id = data.id, state == .joining, purpose == "join" || participantID == nil {
                participantID = id
                state = .joined
                joinedNow = true
                out.append(.joined(participantID: id, others: data.participants ?? []))
            } else if let p = data.participants {
                out.append(.participantsChanged(p))
            }
        case "event":
            if let p = data.participants { out.append(.participantsChanged(p)) }
            if let gone = data.leaving { out.append(.participantLeft(gone)) }
            if let gone = data.kicked {
                if gone == participantID { state = .left; out.append(.kicked) } else { out.append(.participantLeft(gone)) }
            }
            if purpose == "configure" { out.append(.configured) }
        case "destroyed":
            state = .failed("the room was destroyed")
            out.append(.hangup("the room was destroyed"))
        case "talking", "stopped-talking":
            if let id = data.id {
                out.append(.participantsChanged([PluginEvent.Participant(id: id, display: nil, muted: nil, setup: nil,
                                                                           talking: data.audiobridge == "talking")]))
            }
        default:
            break
        }
        // An answer belongs to the offer our join sent; one at any other time answers nothing.
        if let jsep = m.jsep, jsep.type == "answer", purpose == "join" || joinedNow { out.append(.answer(jsep.sdp)) }
        return out
    }

    private mutating func fail(_ why: String) -> [Output] {
        state = .failed(why)
        return [.failed(why)]
    }

    private mutating func sendMessage(_ body: JanusPluginRequest, jsep: JanusJSEP?, purpose: String, now: UInt64) {
        guard let sessionID, let handleID else { return }
        var r = JanusRequest("message", transaction: transaction(purpose), session: sessionID, handle: handleID)
        r.body = body
        r.jsep = jsep
        send(r, now: now)
    }

    private mutating func transaction(_ purpose: String) -> String {
        let t = "r\(nextTransaction)"
        nextTransaction += 1
        pending[t] = purpose
        return t
    }

    private mutating func send(_ request: JanusRequest, now: UInt64) {
        var r = request
        r.apisecret = apiSecret
        outgoing.append(r.json)
        lastSentMs = now
    }
}
