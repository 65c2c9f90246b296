import RoomAudio
import RoomBase
import RoomCallMedia
import RoomCrypto
import RoomMedia
import RoomMediaCrypto
import RoomSDP
import RoomSettings
import RoomSIP
import RoomSystem
import RoomTLS

/// roomd's calls (issue 29; docs/calls.md): the SIP account of roomd.conf's `[sip]`, the one call
/// at a time, its media, and what people see of it — the ring on the speaker, the panel's LEDs
/// and buttons, `roomctl status` and the `call` and `dtmf` events. The engine's `CallLeg` does
/// the mixing (the caller hears the mic and the room; the room hears the caller while bridged).
///
/// Exists whether or not an account is configured: it owns the eventfd the engine wakes for the
/// caller's frames, which must be set before the engine starts, and a reload may add an account.
/// On the event loop's thread.
final class CallLink {
    /// What the call is doing, as status and the panel show it.
    enum Phase: Equatable {
        case idle
        /// An incoming call rings here.
        case ringing(from: String, name: String?)
        /// Our call is on its way: the far end has not answered yet.
        case dialing(to: String)
        case active(peer: String)
    }

    /// Why a request could not be carried out, in the words `roomctl` shows.
    struct Refusal: Error, CustomStringConvertible {
        let description: String
        init(_ description: String) { self.description = description }
    }

    private(set) var phase: Phase = .idle
    /// The caller is in the room (the engine's call leg holds it: one place to ask).
    var bridged: Bool { engine.call.isBridged }
    /// The agreed media of the call in progress.
    private(set) var agreement: Agreement?
    /// We hold the far end (our side of the agreement offers no receiving).
    var held: Bool { agreement.map { !$0.localDirection.receives } ?? false }
    /// Why the last call ended (status shows it until the next call).
    private(set) var lastEnd: String?
    private(set) var settings: SIPSettings?
    var registration: SIPRegistrationState { agent?.registrationState ?? .unregistered }
    var isConfigured: Bool { agent != nil }
    /// A call that rings or is up: the buttons act on it rather than on the room.
    var hasCall: Bool { phase != .idle }

    /// Every change the panel, status and events show: phase, bridge, hold, registration.
    var onChange: ((CallLink) -> Void)?
    var onDigit: ((Character) -> Void)?

    private let loop: EventLoop
    private let engine: AudioEngine
    private let wake: EventSignalSource
    private var agent: SIPUserAgent?
    private var call: SIPCall?
    /// The socket whose port the offer or answer named, until the media session takes it.
    private var mediaSocket: UDPSocket?
    private var media: CallMediaSession?

    init(loop: EventLoop, engine: AudioEngine) throws(SystemError) {
        self.loop = loop
        self.engine = engine
        let call = engine.call
        let box = WeakCallLink()
        wake = try EventSignalSource(loop: loop) { _ in
            // Frames go out through the call's media session; without one they are dropped
            // (the engine never encodes without a call, so this is only the moment a call ends).
            if let media = box.link?.media { media.drain(call.outgoing) } else { while call.outgoing.pop() != nil {} }
        }
        engine.call.outgoingSignal = wake.signal
        box.link = self
    }

    func close() {
        endCall(reason: "roomd stopped")
        agent?.unregister()
        agent?.close()
        agent = nil
        wake.close()
    }

    // MARK: the account

    /// Registers the account of `settings` (and drops the previous one), or none with nil.
    /// Throws with the reason when the account cannot be used (its password file, its registrar);
    /// the previous account is then kept.
    func configure(_ settings: SIPSettings?) throws(Refusal) {
        guard settings != self.settings || agent == nil && settings != nil else { return }
        guard let settings else {
            endCall(reason: "the SIP account was removed")
            agent?.unregister()
            agent?.close()
            agent = nil
            self.settings = nil
            onChange?(self)
            return
        }
        let account = try Self.account(settings)
        let tls = try Self.tls(settings)
        let newAgent: SIPUserAgent
        do { newAgent = try SIPUserAgent(loop: loop, account: account, tls: tls) } catch { throw Refusal("sip: \(error)") }
        endCall(reason: "the SIP account changed")
        agent?.unregister()
        agent?.close()
        agent = newAgent
        self.settings = settings
        newAgent.onRegistrationChange = { [weak self] state in
            guard let self else { return }
            // A failure is logged by the agent itself, with the account and the next try.
            if case .registered(let expires) = state { Log.info("sip: registered as \(account.addressOfRecord) for \(expires) s") }
            self.onChange?(self)
        }
        newAgent.onIncomingCall = { [weak self] call in self?.incoming(call) }
        newAgent.register()
        Log.notice("sip: registering \(account.addressOfRecord) at \(settings.registrar) over \(tls == nil ? "UDP" : "TLS")")
    }

    /// The registrar's certificate checks for `transport = tls` (nil for udp): the CA file or
    /// the system's store, and the name — `tls_server_name`, else the registrar's host as
    /// written (a name when the installer wrote one, though the connection goes to its address).
    static func tls(_ settings: SIPSettings) throws(Refusal) -> SIPStreamConnector? {
        guard settings.transport == .tls else { return nil }
        let context: TLSClientContext
        do {
            context = try TLSClientContext(settings: TLSClientSettings(caFile: settings.caFile, serverName: settings.tlsServerName))
        } catch {
            throw Refusal(settings.caFile == nil ? "sip: \(error)" : "sip.ca_file: \(error)")
        }
        var host = String(settings.registrar[..<(settings.registrar.lastIndex(of: ":") ?? settings.registrar.endIndex)])
        if host.hasPrefix("[") && host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        return tlsConnector(context: context, serverName: settings.tlsServerName ?? host)
    }

    /// RoomSIP's stream transport made of RoomTLS: each connection a `TLSConnection` checking
    /// the registrar's certificate against `context` and `serverName`.
    static func tlsConnector(context: TLSClientContext, serverName: String) -> SIPStreamConnector {
        SIPStreamConnector(transportName: "TLS") { (address, loop) throws(SystemError) -> SIPConnectedStream in
            let stream = try StreamConnection.connect(to: address, loop: loop, outgoingLimit: 256 * 1024)
            let tls = try TLSConnection(stream: stream, role: .client(context, serverName: serverName), loop: loop)
            return SIPConnectedStream(transport: tls, localAddress: { [weak stream] in stream?.localAddress ?? SocketAddress() },
                                      failedCertificateChecks: { [weak tls] in tls?.failedCertificateChecks ?? false })
        }
    }

    /// The account `settings` describe, with the password from its file (owner-only).
    static func account(_ settings: SIPSettings) throws(Refusal) -> SIPAccount {
        var password = ""
        if let file = settings.passwordFile {
            guard let mode = Files.permissions(of: file) else { throw Refusal("sip.password_file: cannot read \(file)") }
            guard mode & 0o077 == 0 else {
                throw Refusal("sip.password_file: \(file) may be read by its group or others (mode \(String(mode, radix: 8))): chmod 600 it")
            }
            do {
                password = String(try Files.readText(file).split(separator: "\n", omittingEmptySubsequences: false).first ?? "")
            } catch {
                throw Refusal("sip.password_file: \(error)")
            }
        }
        let registrar: SocketAddress
        do {
            guard let first = try HostPort(parsing: settings.registrar).resolve().first else {
                throw SystemError("no address")
            }
            registrar = first
        } catch {
            throw Refusal("sip.registrar: \(settings.registrar): \(error)")
        }
        do {
            return try SIPAccount(registrar: registrar, domain: settings.domain, user: settings.user, authUser: settings.authUser,
                                  password: password, expires: settings.registerExpires)
        } catch {
            throw Refusal("\(error)")
        }
    }

    // MARK: calls

    /// Calls `target`: a `sip:` URI, or a user or number at the account's registrar.
    func dial(_ target: String) throws(Refusal) {
        guard let agent, let settings else { throw Refusal("no SIP account (roomd.conf [sip])") }
        guard phase == .idle else { throw Refusal("a call is in progress (\(phaseName)): hang up first") }
        let uri: String
        if target.hasPrefix("sip:") {
            uri = target
        } else {
            guard SIPSettings.isSIPToken(target), !target.contains("@") else {
                throw Refusal("\"\(target.prefix(64))\" is neither a sip: URI nor a user or number")
            }
            uri = "sip:\(target)@\(settings.registrar)"
        }
        let local = try prepareMedia()
        do {
            let placed = try agent.call(uri: uri, localMedia: local)
            follow(placed)
            phase = .dialing(to: uri)
            lastEnd = nil
            Log.notice("call: dialing \(uri)")
            onChange?(self)
        } catch {
            dropMedia()
            throw Refusal("\(error)")
        }
    }

    func answer() throws(Refusal) {
        guard let call, case .ringing = phase, call.direction == .incoming else { throw Refusal("no call is ringing") }
        let local = try prepareMedia()
        engine.call.setRinging(dBFS: nil)
        do {
            try call.answer(localMedia: local)
        } catch {
            dropMedia()
            throw Refusal("\(error)")
        }
        Log.notice("call: answered")
    }

    func decline() throws(Refusal) {
        guard let call, case .ringing = phase, call.direction == .incoming else { throw Refusal("no call is ringing") }
        call.decline()
        Log.notice("call: declined")
    }

    func hangUp() throws(Refusal) {
        guard let call, phase != .idle else { throw Refusal("no call") }
        call.hangUp()
        Log.notice("call: hung up")
    }

    func hold(_ on: Bool) throws(Refusal) {
        guard let call, case .active = phase else { throw Refusal("no call is up") }
        guard on != held else { return }
        do { try (on ? call.hold() : call.resume()) } catch { throw Refusal("\(error)") }
    }

    /// Puts the caller into the room (and takes them out): the room hears the caller through the
    /// appliance, the caller the room.
    func bridge(_ on: Bool) throws(Refusal) {
        guard case .active = phase else { throw Refusal("no call is up") }
        guard on != bridged else { return }
        engine.call.setBridged(on)
        Log.notice("call: \(on ? "bridged into" : "taken out of") the room")
        onChange?(self)
    }

    func sendDigits(_ digits: String) throws(Refusal) {
        guard let media, case .active = phase else { throw Refusal("no call is up") }
        if let bad = CallMediaSession.invalidDigit(in: digits) {
            throw Refusal(digits.isEmpty ? "no digits" : "\"\(bad)\" is not a DTMF digit (0-9, *, #, A-D)")
        }
        // RFC 4733 events where the far end agreed them (the digits are checked above, so a
        // refusal here means it did not); otherwise tones in the call's audio, as a gateway or
        // an IVR that only listens wants them.
        guard !media.sendDigits(digits) else { return }
        guard engine.call.sendInBand(digits) else { throw Refusal("too many digits waiting to be sent in-band (at most 64)") }
        Log.info("call: sending \(digits.utf8.count) digit(s) in-band (the far end agreed no telephone-event)")
    }

    var phaseName: String {
        switch phase {
        case .idle: "idle"
        case .ringing: "ringing"
        case .dialing: "dialing"
        case .active: held ? "held" : "active"
        }
    }

    // MARK: what happens

    private func incoming(_ incoming: SIPCall) {
        guard phase == .idle, call == nil else {
            incoming.decline(busy: true)
            return
        }
        // An offer this account could never answer (hostile, or no codec, key or address family
        // in common) is refused with 488 before it rings: the room is not disturbed and
        // nothing changes (the agent logs the reason).
        if let offer = incoming.remoteOffer, let problem = unanswerable(offer) {
            incoming.refuseOffer(because: problem)
            return
        }
        follow(incoming)
        let from = incoming.remoteURI
        phase = .ringing(from: from, name: incoming.remoteDisplayName)
        lastEnd = nil
        Log.notice("call: \(from) rings")
        if let settings, settings.autoAnswer, Self.caller(from, isIn: settings.autoAnswerFrom) {
            Log.notice("call: auto-answering \(from) (sip.auto_answer_from)")
            onChange?(self)
            do { try answer() } catch { Log.warning("call: auto-answer failed: \(error)") }
            return
        }
        engine.call.setRinging(dBFS: settings?.ringLevelDB ?? -12)
        onChange?(self)
    }

    /// Whether `uri` (sip:user@domain…) is one of `allowed` (user, or user@domain).
    static func caller(_ uri: String, isIn allowed: [String]) -> Bool {
        var rest = Substring(uri)
        if rest.hasPrefix("sip:") { rest = rest.dropFirst(4) } else if rest.hasPrefix("sips:") { rest = rest.dropFirst(5) }
        let address = rest.prefix { $0 != ";" && $0 != ">" && $0 != "?" }
        let user = address.split(separator: "@", maxSplits: 1).first.map(String.init) ?? ""
        var host = address.split(separator: "@", maxSplits: 1).dropFirst().first.map(String.init) ?? ""
        if let colon = host.lastIndex(of: ":"), !host.hasSuffix("]") { host = String(host[..<colon]) }
        return allowed.contains { $0.contains("@") ? $0.lowercased() == "\(user)@\(host)".lowercased() : $0 == user }
    }

    private func follow(_ c: SIPCall) {
        call = c
        c.onEvent = { [weak self, weak c] event in
            guard let self, let c, c === self.call else { return }
            switch event {
            case .ringing:
                Log.info("call: the far end rings")
            case .confirmed(let agreement):
                self.confirmed(agreement)
            case .updated(let agreement):
                self.updated(agreement)
            case .ended(let reason):
                self.endCall(reason: reason.description)
            }
        }
    }

    private func confirmed(_ a: Agreement) {
        engine.call.setRinging(dBFS: nil)
        guard let socket = mediaSocket, let parameters = Self.parameters(a) else {
            Log.error("call: the agreed media cannot be used (\(a.codec) to \(a.remote.host):\(a.remote.port)): hanging up")
            call?.hangUp()
            return
        }
        do {
            media = try CallMediaSession(loop: loop, socket: socket, incoming: engine.call.incoming, parameters: parameters)
        } catch {
            Log.error("call: \(error): hanging up")
            call?.hangUp()
            return
        }
        mediaSocket = nil
        media?.onDigit = { [weak self] digit in
            Log.info("call: the far end sent DTMF \(digit)")
            self?.onDigit?(digit)
        }
        agreement = a
        engine.call.start(codec: parameters.codec)   // a new call starts outside the room
        phase = .active(peer: call?.remoteURI ?? "")
        Log.notice("call: up with \(call?.remoteURI ?? "?"), \(a.codec.rawValue), \(Self.securityName(a.security))")
        onChange?(self)
    }

    private func updated(_ a: Agreement) {
        guard let media, let parameters = Self.parameters(a) else { return }
        do { try media.update(parameters) } catch {
            Log.error("call: \(error): hanging up")
            call?.hangUp()
            return
        }
        if parameters.codec != agreement.flatMap({ Self.codec($0.codec) }) { engine.call.start(codec: parameters.codec) }
        agreement = a
        Log.notice("call: \(held ? "on hold" : a.isHeldByRemote ? "held by the far end" : "resumed")")
        onChange?(self)
    }

    private func endCall(reason: String) {
        engine.call.setRinging(dBFS: nil)
        guard phase != .idle || call != nil else { return }
        if let c = call, !c.isEnded { c.hangUp() }
        if let ssrc = media?.remoteSSRC { engine.releaseStream(ssrc: ssrc, leg: .call) }
        engine.call.end()
        media?.close()
        media = nil
        dropMedia()
        call = nil
        agreement = nil
        phase = .idle
        lastEnd = reason
        Log.notice("call: ended (\(reason))")
        onChange?(self)
    }

    /// Why `offer` could not be answered under this account's media settings, or nil: the
    /// answer `answer()` would make, tried with a stand-in port and key (which change nothing
    /// the negotiation decides).
    private func unanswerable(_ offer: SessionDescription) -> String? {
        guard let agent, let settings else { return nil }
        let standIn = SDESKey(inline: String(repeating: "A", count: 40))!
        let security: CallLocalMedia.Security = switch settings.mediaEncryption {
        case .required: .required(standIn)
        case .optional: .preferred(standIn)
        case .off: .plain
        }
        let local = CallLocalMedia(address: agent.localAddress.host, port: 9,
                                   codecs: settings.codecs.compactMap { CallCodec(rawValue: $0) }, security: security)
        do throws(SDPError) {
            _ = try CallAudioNegotiation.answer(to: offer, local: local, origin: SessionDescription.Origin(sessionID: "1"))
            return nil
        } catch {
            return error.description
        }
    }

    // MARK: media

    /// Binds the media socket on the address SIP uses and describes it for the offer or answer,
    /// with a new SDES key per call.
    private func prepareMedia() throws(Refusal) -> CallLocalMedia {
        guard let agent, let settings else { throw Refusal("no SIP account") }
        dropMedia()
        let host = agent.localAddress.host
        let socket: UDPSocket
        do { socket = try UDPSocket(bindingTo: try SocketAddress(ip: host, port: 0)) } catch { throw Refusal("call media: \(error)") }
        let key = SDESKey(inline: Base64.encode(SecureRandom.bytes(30)))!
        let security: CallLocalMedia.Security = switch settings.mediaEncryption {
        case .required: .required(key)
        case .optional: .preferred(key)
        case .off: .plain
        }
        let local = CallLocalMedia(address: host, port: Int(socket.localPort),
                                   codecs: settings.codecs.compactMap { CallCodec(rawValue: $0) }, security: security)
        mediaSocket = socket
        return local
    }

    private func dropMedia() {
        mediaSocket?.close()
        mediaSocket = nil
    }

    static func codec(_ c: CallCodec) -> AudioCodec {
        switch c {
        case .opus: .opus
        case .g722: .g722
        case .pcmu: .pcmu
        case .pcma: .pcma
        }
    }

    static func securityName(_ s: Agreement.Security) -> String {
        switch s {
        case .plain: "plain RTP"
        case .sdes(let suite, _, _): "SRTP \(suite.rawValue)"
        }
    }

    /// The media session's parameters from an agreement; nil when its address or keys are unusable.
    static func parameters(_ a: Agreement) -> CallMediaParameters? {
        guard let port = UInt16(exactly: a.remote.port), let remote = try? SocketAddress(ip: a.remote.host, port: port) else { return nil }
        var keys: CallMediaParameters.SDESKeys?
        if case .sdes(let suite, let localKey, let remoteKey) = a.security {
            guard let profile = SRTPProfile(rawValue: suite.rawValue), let local = Base64.decode(localKey.inline),
                  let far = Base64.decode(remoteKey.inline) else { return nil }
            keys = .init(profile: profile, local: local, remote: far)
        }
        return CallMediaParameters(remote: remote, codec: codec(a.codec), payloadType: a.payloadType,
                                   telephoneEventPayloadType: a.telephoneEvent?.payloadType, srtp: keys,
                                   // Holding the far end (our sendonly), nothing of the room is sent either.
                                   sends: a.localDirection == .sendrecv && a.remoteDirection.receives,
                                   receives: a.localDirection.receives && a.remoteDirection.sends)
    }
}

/// The link, weakly, for the eventfd handler made before the link is complete.
private final class WeakCallLink {
    weak var link: CallLink?
}
