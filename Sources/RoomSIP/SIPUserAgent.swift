import COSIP
import RoomSDP
import RoomSystem

/// roomd's SIP user agent on libosip2 (docs/calls.md). osip parses and runs the transactions;
/// this class owns everything osip leaves to its user: the transport — a UDP socket, or one TLS
/// connection to the registrar (`SIPStreamLink`), both on roomd's EventLoop, no thread of its
/// own — osip's timers (one loop timer re-armed from
/// `osip_timers_gettimeout` after every step), the requests' text, the digest answers, and the
/// registration's refresh, and the calls (SIPCall, its dialog and offer/answer through RoomSDP).
///
/// Confined to the loop's thread, like everything the loop drives.
public final class SIPUserAgent {
    public let account: SIPAccount
    public private(set) var registrationState: SIPRegistrationState = .unregistered
    /// Called on the loop thread whenever `registrationState` changes.
    public var onRegistrationChange: ((SIPRegistrationState) -> Void)?
    /// How long after a retryable failure (no answer, 5xx) the agent registers again; each
    /// further failure in a row doubles it, up to `maximumRetryInterval`.
    public var retryInterval: Duration = .seconds(60)
    /// The longest wait between retries, and the wait after a refusal that needs a person
    /// (wrong password, 403, 404): two failed logins a quarter of an hour are far below any
    /// registrar's ban threshold, and a fix made on the registrar's side is still picked up
    /// without touching the appliance.
    public var maximumRetryInterval: Duration = .seconds(900)
    /// How long a REGISTER waits for an answer, retransmissions included (osip's timer F,
    /// 64·T1 = 32 s); tests shorten it.
    public var registerTimeout: Duration = .seconds(32)

    /// Called on the loop thread when an INVITE starts a new call; the call rings (180 is sent)
    /// until the application answers or declines it. Without a handler calls are refused (480).
    public var onIncomingCall: ((SIPCall) -> Void)?
    /// The calls alive: at most one confirmed and one ringing (a further INVITE gets 486).
    public internal(set) var calls: [SIPCall] = []
    /// How long a 2xx to an INVITE is resent without an ACK before the call is given up
    /// (timer H, 64·T1 = 32 s); tests shorten it.
    public var ackTimeout: Duration = .seconds(32)
    /// How long a call may ring, either way, before it ends `.timeout` (480 to a caller, CANCEL
    /// to a callee): a caller that never cancels would otherwise hold the one ringing slot.
    public var ringTimeout: Duration = .seconds(120)
    /// The most transactions the agent keeps at once. A server transaction outlives its answer
    /// by up to 32 s (osip's timers J and I, for retransmitted requests), so a stream of
    /// requests from many addresses would otherwise grow the table without bound; past this,
    /// new requests outside the calls in progress are dropped unread (`.transactionsFull`);
    /// sources other than the registrar and the calls' far ends may fill three quarters of it.
    /// Real use needs a handful: a REGISTER, two calls' INVITEs, BYEs, a proxy's OPTIONS.
    public var maximumTransactions = 256
    /// Each source address's datagram budget: a burst, then a steady rate a second; beyond it
    /// datagrams are dropped unparsed (`datagramsOverBudget`). A fuzzing harness that is the
    /// only source widens it.
    public var sourceBudget: (burst: Double, perSecond: Double) {
        get { (budget.burst, budget.perSecond) }
        set { budget.burst = newValue.burst; budget.perSecond = newValue.perSecond }
    }

    /// Counters for tests and status: REGISTERs sent (retransmissions not counted), 2xx
    /// answers to them, datagrams dropped unread (over their source's budget, truncated,
    /// unparseable, responses to nothing of ours), INVITEs refused because the agent was busy.
    public private(set) var registersSent = 0
    public private(set) var registrationsAccepted = 0
    public internal(set) var datagramsDropped = 0
    public internal(set) var datagramsOverBudget = 0
    public internal(set) var callsRefusedBusy = 0

    /// The address SIP uses here (media binds on its host): the UDP socket's, or the TLS
    /// connection's while it is up (before: the address the registrar is reached from, port 0).
    public var localAddress: SocketAddress { socket?.localAddress ?? tlsLink?.localAddress ?? routeAddress }
    /// "TLS" or "UDP", as Via writes it.
    var transportName: String { tlsLink?.connector.transportName ?? "UDP" }
    /// The TLS connection's counters, for tests and status (nil over UDP).
    public var tlsConnectsStarted: Int? { tlsLink?.connectsStarted }
    public var tlsPongsReceived: Int? { tlsLink?.pongsReceived }
    /// Keep-alive interval on the TLS connection (tests shorten it).
    public var keepAliveInterval: Duration {
        get { tlsLink?.keepAliveInterval ?? .seconds(25) }
        set { tlsLink?.keepAliveInterval = newValue }
    }
    /// The first delay before a lost TLS connection is made again (it doubles up to 60 s).
    public var firstReconnectDelay: Duration {
        get { tlsLink?.firstReconnectDelay ?? .seconds(1) }
        set { tlsLink?.firstReconnectDelay = newValue }
    }

    let loop: EventLoop
    /// The transport: exactly one of the two.
    let socket: UDPSocket?
    let tlsLink: SIPStreamLink?
    private let routeAddress: SocketAddress
    var osip: UnsafeMutablePointer<osip_t>?
    private let receiveBuffer: UnsafeMutableRawBufferPointer
    private var osipTimer: EventLoop.TimerID?
    private var refreshTimer: EventLoop.TimerID?
    /// Transactions osip ended, freed after the step that ended them (osip reports the end
    /// from inside its own loop over the transaction list).
    var finished: [UnsafeMutablePointer<osip_transaction_t>] = []
    /// Transactions alive, freed at `close()`.
    private(set) var live: Set<UnsafeMutablePointer<osip_transaction_t>> = []
    /// Where each transaction's messages go: a server transaction answers the datagram's
    /// source (RFC 3581 rport: NAT and proxies answer there), a client one its next hop.
    var destinations: [UnsafeMutablePointer<osip_transaction_t>: SocketAddress] = [:]
    /// The call each call transaction belongs to.
    var transactionCalls: [UnsafeMutablePointer<osip_transaction_t>: SIPCall] = [:]
    var budget = SIPSourceBudget()
    var badInputLog = SIPBadInputLog()
    private var stepping = false
    private var stepAgain = false
    private var closeRequested = false

    // The registration's dialog-like state (RFC 3261 §10.2: one Call-ID, CSeq rising).
    private let callID: String
    private let fromTag: String
    private var cseq: UInt32
    private var pendingRegister: UnsafeMutablePointer<osip_transaction_t>?
    private var pendingGotFinal = false
    private var askedExpires = 0
    /// Challenges answered since the last success: a second one that is not `stale` means
    /// the credentials were refused.
    private var challengesAnswered = 0
    private var nonceCount: UInt32 = 0
    /// Failures in a row since the last success: the retry's backoff.
    private var consecutiveFailures = 0
    private var lastNonce = ""
    /// `register()` was asked for and `unregister()` not since: over TLS, a new connection
    /// registers again.
    private var registrationWanted = false
    /// The Contact a registrar holds for us from an earlier TLS connection: the next REGISTER
    /// takes it off (expires=0), else the proxy would fork calls to a connection that is gone.
    private var staleContact: String?
    private var registeredContact: String?

    /// Without `tls`: binds a UDP socket on `localAddress` (default: the address the registrar
    /// is reached from, ephemeral port) and watches it on `loop`. With `tls`: no socket of its
    /// own; `register()` connects to the registrar over TLS and everything goes through it.
    public init(loop: EventLoop, account: SIPAccount, localAddress: SocketAddress? = nil, tls: SIPStreamConnector? = nil) throws(SystemError) {
        self.loop = loop
        self.account = account
        let route = LocalAddress.source(toward: account.registrar).map {
            (try? SocketAddress(ip: $0.host, port: 0)) ?? SocketAddress.ipv4Any(port: 0)
        } ?? SocketAddress.ipv4Any(port: 0)
        routeAddress = route
        if let tls {
            socket = nil
            tlsLink = SIPStreamLink(loop: loop, destination: account.registrar, connector: tls)
        } else {
            socket = try UDPSocket(bindingTo: localAddress ?? route)
            tlsLink = nil
        }
        receiveBuffer = .allocate(byteCount: 65_536, alignment: 8)
        callID = Self.token(16) + "@roomd"
        fromTag = Self.token(10)
        cseq = UInt32.random(in: 1 ... 10_000)
        cosip_trace_off()
        var handle: UnsafeMutablePointer<osip_t>?
        guard osip_init(&handle) == OSIP_SUCCESS, let handle else {
            receiveBuffer.deallocate()
            throw SystemError("osip_init failed")
        }
        osip = handle
        Self.installCallbacks(handle)
        if let socket {
            try socket.onReadable(loop: loop) { [weak self] _ in self?.readable() }
        }
        tlsLink?.onConnected = { [weak self] in self?.tlsConnected() }
        tlsLink?.onLost = { [weak self] loss in self?.tlsLost(loss) }
        tlsLink?.onMessage = { [weak self] bytes in
            guard let self else { return }
            self.received(bytes, from: self.account.registrar, onStream: true)
            self.step()
        }
    }

    deinit {
        close()
        receiveBuffer.deallocate()
    }

    /// Stops timers, frees osip's transactions and closes the socket; nothing is sent (call
    /// `unregister()` first and let the loop run to take the binding off the registrar).
    public func close() {
        // From inside an osip callback (an onRegistrationChange handler): after the step.
        if stepping { closeRequested = true; return }
        if let t = osipTimer { loop.cancel(t); osipTimer = nil }
        if let t = refreshTimer { loop.cancel(t); refreshTimer = nil }
        for call in calls {
            if let t = call.retransmitTimer { loop.cancel(t) }
            if let t = call.ringTimer { loop.cancel(t) }
        }
        calls.removeAll()
        transactionCalls.removeAll()
        destinations.removeAll()
        socket?.close()
        tlsLink?.close()
        guard let osip else { return }
        for tr in live {
            osip_remove_transaction(osip, tr)
            osip_transaction_free2(tr)
        }
        live.removeAll()
        finished.removeAll()
        osip_release(osip)
        self.osip = nil
    }

    // MARK: Registration

    /// Registers (again), asking for `account.expires` seconds, and keeps the binding fresh.
    /// Over TLS, connects first (and again whenever the connection is lost).
    public func register() {
        registrationWanted = true
        askedExpires = account.expires
        challengesAnswered = 0
        if case .registered = registrationState {} else { setState(.registering) }
        if let tlsLink, !tlsLink.isConnected {
            tlsLink.connect()
            return
        }
        sendRegister(authorization: nil)
    }

    /// Asks the registrar to drop the binding (Expires: 0) and stops refreshing.
    public func unregister() {
        registrationWanted = false
        if let t = refreshTimer { loop.cancel(t); refreshTimer = nil }
        askedExpires = 0
        challengesAnswered = 0
        if let tlsLink, !tlsLink.isConnected {
            setState(.unregistered)
            return
        }
        sendRegister(authorization: nil)
    }

    /// A TLS connection is up (its certificate checked): register on it, taking the binding of
    /// the previous connection off.
    private func tlsConnected() {
        Log.info("sip: TLS connection to \(account.registrar) up from \(localAddress)")
        guard registrationWanted else { return }
        if let old = registeredContact, old != contactURI { staleContact = old }
        askedExpires = account.expires
        challengesAnswered = 0
        sendRegister(authorization: nil)
    }

    /// The TLS connection failed or was closed: the registration is gone with it (the proxy
    /// cannot reach us); `SIPStreamLink` reconnects and `tlsConnected` registers again.
    private func tlsLost(_ loss: SIPStreamLink.Loss) {
        pendingRegister = nil
        if let t = refreshTimer { loop.cancel(t); refreshTimer = nil }
        let what: String
        switch loss {
        case .certificate(let reason): what = "registrar's certificate refused: \(reason)"
        case .connection(let reason): what = "TLS connection lost: \(reason)"
        }
        guard registrationWanted else {
            Log.info("sip: \(what)")
            return
        }
        fail(SIPRegistrationFailure(statusCode: nil, reason: what, willRetry: true), scheduleRetry: false)
    }

    private func setState(_ state: SIPRegistrationState) {
        guard state != registrationState else { return }
        registrationState = state
        onRegistrationChange?(state)
    }

    /// Over TLS the Contact names this connection's own address with `transport=tls`: the proxy
    /// sends calls for us to that address over TLS, which is the connection we opened.
    var contactURI: String {
        let uri = "sip:\(account.user)@\(Self.hostPort(localAddress))"
        return tlsLink == nil ? uri : uri + ";transport=" + transportName.lowercased()
    }

    private func sendRegister(authorization: (header: String, value: String)?) {
        let ruri = "sip:\(account.domain)"
        var extra = "Expires: \(askedExpires)\r\n"
        if askedExpires > 0, let stale = staleContact { extra += "Contact: <\(stale)>;expires=0\r\n" }
        if let authorization { extra += "\(authorization.header): \(authorization.value)\r\n" }
        cseq &+= 1
        let text = "REGISTER \(ruri) SIP/2.0\r\n"
            + "Via: SIP/2.0/\(transportName) \(Self.hostPort(localAddress));rport;branch=z9hG4bK\(Self.token(12))\r\n"
            + "Max-Forwards: 70\r\n"
            + "From: <\(account.addressOfRecord)>;tag=\(fromTag)\r\n"
            + "To: <\(account.addressOfRecord)>\r\n"
            + "Call-ID: \(callID)\r\n"
            + "CSeq: \(cseq) REGISTER\r\n"
            + "Contact: <\(contactURI)>\r\n"
            + "User-Agent: roomd\r\n"
            + extra
            + "Content-Length: 0\r\n\r\n"
        guard let tr = startTransaction(text, type: NICT, to: account.registrar) else {
            fail(SIPRegistrationFailure(statusCode: nil, reason: "could not build a REGISTER for \(account.addressOfRecord)", willRetry: false))
            return
        }
        // osip starts timer F with the transaction, from its compiled-in T1; the agent's own
        // timeout replaces it (on osip's clock, as osip set it).
        if let nict = tr.pointee.nict_context {
            let ms = Int32(clamping: registerTimeout.components.seconds * 1000 + registerTimeout.components.attoseconds / 1_000_000_000_000_000)
            nict.pointee.timer_f_length = ms
            osip_gettimeofday(&nict.pointee.timer_f_start, nil)
            add_gettimeofday(&nict.pointee.timer_f_start, ms)
        }
        pendingRegister = tr
        pendingGotFinal = false
        registersSent += 1
        step()
    }

    func registerAnswered(_ tr: UnsafeMutablePointer<osip_transaction_t>, _ response: UnsafeMutablePointer<osip_message_t>) {
        guard tr == pendingRegister else { return }
        pendingGotFinal = true
        let code = Int(response.pointee.status_code)
        let reasonPhrase = response.pointee.reason_phrase.map { String(cString: $0) } ?? ""
        switch code {
        case 200 ..< 300:
            challengesAnswered = 0
            if askedExpires == 0 {
                setState(.unregistered)
                return
            }
            let granted = grantedExpires(response) ?? askedExpires
            if granted == 0 {
                // A 2xx that lists our contact with expires=0 did not keep the binding.
                fail(SIPRegistrationFailure(statusCode: code, reason: "registrar answered \(code) but kept no binding (expires 0)", willRetry: true))
                return
            }
            registrationsAccepted += 1
            registeredContact = contactURI
            staleContact = nil
            tlsLink?.connectionProved()
            consecutiveFailures = 0
            setState(.registered(expires: granted))
            scheduleRefresh(after: granted)
        case 401, 407:
            answerChallenge(response, proxy: code == 407)
        case 423:
            // Interval Too Brief: ask again for the registrar's minimum, once.
            if let text = cosip_header(response, "min-expires").map({ String(cString: $0) }),
               let minimum = Int(text.trimmed), minimum > askedExpires, minimum <= 86_400 {
                askedExpires = minimum
                sendRegister(authorization: nil)
            } else {
                fail(SIPRegistrationFailure(statusCode: code, reason: "registrar \(account.registrar) wants a longer registration (\(reasonPhrase))", willRetry: false))
            }
        default:
            fail(SIPRegistrationFailure(statusCode: code, reason: "registrar \(account.registrar) refused \(account.addressOfRecord): \(reasonPhrase)", willRetry: code >= 500))
        }
    }

    private func answerChallenge(_ response: UnsafeMutablePointer<osip_message_t>, proxy: Bool) {
        let code = Int(response.pointee.status_code)
        guard let challenge = Self.challenge(in: response, proxy: proxy) else {
            fail(SIPRegistrationFailure(statusCode: code, reason: "challenge without a digest we can read", willRetry: false))
            return
        }
        if challengesAnswered > 0 && !challenge.stale {
            fail(SIPRegistrationFailure(statusCode: code, reason: "registrar \(account.registrar) refused the credentials of auth user \(account.authUser) (wrong user or password)", willRetry: false))
            return
        }
        challengesAnswered += 1
        if challenge.nonce != lastNonce { lastNonce = challenge.nonce; nonceCount = 0 }
        nonceCount += 1
        do {
            let value = try SIPDigest.authorization(
                challenge: challenge, method: "REGISTER", uri: "sip:\(account.domain)",
                user: account.authUser, password: account.password, cnonce: Self.token(12), nonceCount: nonceCount)
            sendRegister(authorization: (proxy ? "Proxy-Authorization" : "Authorization", value))
        } catch {
            fail(SIPRegistrationFailure(statusCode: code, reason: error.description, willRetry: false))
        }
    }

    func registerEndedWithoutAnswer(_ tr: UnsafeMutablePointer<osip_transaction_t>) {
        guard tr == pendingRegister else { return }
        pendingRegister = nil
        if pendingGotFinal { return }
        if askedExpires == 0 { setState(.unregistered); return }
        fail(SIPRegistrationFailure(statusCode: nil, reason: "no answer from the registrar at \(account.registrar)", willRetry: true))
    }

    /// Reports the failure and schedules the next try: never a tight loop. A transient failure
    /// (no answer, 5xx) is retried after `retryInterval`, doubled for each failure in a row up
    /// to `maximumRetryInterval`; a refusal only a person can fix waits `maximumRetryInterval`.
    /// `scheduleRetry` false: the TLS connection's own reconnect brings the next try.
    private func fail(_ failure: SIPRegistrationFailure, scheduleRetry: Bool = true) {
        var failure = failure
        consecutiveFailures += 1
        let ceiling = max(maximumRetryInterval, retryInterval)
        if askedExpires == 0 || !scheduleRetry {
            failure.retryDelay = nil   // an un-REGISTER that failed: nothing to register again
        } else if failure.willRetry {
            failure.retryDelay = min(retryInterval * (1 << min(consecutiveFailures - 1, 16)), ceiling)
        } else {
            failure.retryDelay = ceiling
        }
        Log.warning("sip: registration of \(account.addressOfRecord) failed: \(failure)")
        setState(.failed(failure))
        if let t = refreshTimer { loop.cancel(t); refreshTimer = nil }
        if let delay = failure.retryDelay {
            refreshTimer = loop.schedule(after: delay) { [weak self] in
                self?.refreshTimer = nil
                self?.register()
            }
        }
    }

    /// Refreshes half-way through the granted time (at least 1 s after), so one lost REGISTER
    /// and its retransmissions (timer F, 32 s) still fit before a long registration expires.
    private func scheduleRefresh(after granted: Int) {
        if let t = refreshTimer { loop.cancel(t) }
        let delayMs = max(1_000, granted * 500)
        refreshTimer = loop.schedule(after: .milliseconds(delayMs)) { [weak self] in
            guard let self else { return }
            self.refreshTimer = nil
            self.askedExpires = self.account.expires
            self.challengesAnswered = 0
            self.sendRegister(authorization: nil)
        }
    }

    /// The time the registrar granted our contact: its `expires` parameter in the 2xx's
    /// Contact list, else the Expires header (RFC 3261 §10.2.4).
    private func grantedExpires(_ response: UnsafeMutablePointer<osip_message_t>) -> Int? {
        let ours = contactURI
        var i: Int32 = 0
        while let contact = cosip_contact(response, i) {
            i += 1
            var text: UnsafeMutablePointer<CChar>?
            guard osip_uri_to_str(contact.pointee.url, &text) == OSIP_SUCCESS, let text else { continue }
            let uri = String(cString: text)
            cosip_free(text)
            if uri == ours, let e = cosip_contact_expires(contact), let n = Self.deltaSeconds(String(cString: e)) {
                return n
            }
        }
        if let e = cosip_header(response, "expires"), let n = Self.deltaSeconds(String(cString: e)) { return n }
        return nil
    }

    /// A delta-seconds value (RFC 3261 §25.1: digits only): nil for anything else (a sign,
    /// spaces inside, garbage), so a hostile answer cannot schedule a negative refresh;
    /// capped at a day, the longest an account may ask for.
    static func deltaSeconds(_ text: String) -> Int? {
        let digits = text.trimmed
        guard !digits.isEmpty, digits.utf8.allSatisfy({ $0 >= 0x30 && $0 <= 0x39 }) else { return nil }
        let significant = digits.drop { $0 == "0" }
        guard significant.count <= 6, let n = Int(significant.isEmpty ? "0" : String(significant)) else { return 86_400 }
        return min(n, 86_400)
    }

    // MARK: osip

    /// Starts a client transaction (NICT, or ICT for an INVITE) sending `text` to `destination`.
    func startTransaction(_ text: String, type: osip_fsm_type_t, to destination: SocketAddress) -> UnsafeMutablePointer<osip_transaction_t>? {
        guard let osip, let message = Self.parse(text) else { return nil }
        var tr: UnsafeMutablePointer<osip_transaction_t>?
        guard osip_transaction_init(&tr, type, osip, message) == OSIP_SUCCESS, let tr else {
            osip_message_free(message)
            return nil
        }
        adopt(tr, destination: destination)
        osip_transaction_add_event(tr, osip_new_outgoing_sipmessage(message))
        return tr
    }

    /// Gives a server transaction osip made for a request its answer `text` (osip sends it and
    /// resends it on retransmitted requests).
    func respond(_ tr: UnsafeMutablePointer<osip_transaction_t>, _ text: String) {
        guard let message = Self.parse(text) else {
            Log.warning("sip: could not build the response \(text.prefix(40))")
            return
        }
        osip_transaction_add_event(tr, osip_new_outgoing_sipmessage(message))
    }

    func adopt(_ tr: UnsafeMutablePointer<osip_transaction_t>, destination: SocketAddress) {
        osip_transaction_set_your_instance(tr, Unmanaged.passUnretained(self).toOpaque())
        live.insert(tr)
        destinations[tr] = destination
    }

    static func parse(_ text: String) -> UnsafeMutablePointer<osip_message_t>? {
        var message: UnsafeMutablePointer<osip_message_t>?
        guard osip_message_init(&message) == OSIP_SUCCESS, let message else { return nil }
        guard text.withCString({ osip_message_parse(message, $0, text.utf8.count) }) == OSIP_SUCCESS else {
            osip_message_free(message)
            return nil
        }
        return message
    }

    /// Sends text outside any transaction: an ACK for a 2xx, a 2xx resent until its ACK.
    func sendRaw(_ text: String, to destination: SocketAddress) {
        transmit(Array(text.utf8), to: destination)
    }

    /// Over UDP a datagram to `destination`; over TLS the connection, whatever the destination
    /// (the registrar is the outbound proxy: every request and response goes through it).
    @discardableResult
    func transmit(_ bytes: [UInt8], to destination: SocketAddress) -> Bool {
        if let tlsLink { return tlsLink.send(bytes) }
        return (try? socket?.send(bytes, to: destination)) ?? false
    }

    /// Runs what osip has queued (events, due timers), frees the transactions that ended, and
    /// arms the loop timer for osip's next deadline.
    /// A request started from inside an osip callback (the answer to a challenge) only asks
    /// for another round: osip's execute functions must not be entered again from within.
    func step() {
        guard let osip else { return }
        if stepping { stepAgain = true; return }
        stepping = true
        repeat {
            stepAgain = false
            osip_ict_execute(osip)
            osip_ist_execute(osip)
            osip_nict_execute(osip)
            osip_nist_execute(osip)
            osip_timers_ict_execute(osip)
            osip_timers_ist_execute(osip)
            osip_timers_nict_execute(osip)
            osip_timers_nist_execute(osip)
            osip_ict_execute(osip)
            osip_ist_execute(osip)
            osip_nict_execute(osip)
            osip_nist_execute(osip)
            // Each once: a transaction forgotten after its answer (`forgetAfterAnswer`) must not
            // be freed twice should osip also report its end in the same step.
            for tr in Set(finished) {
                live.remove(tr)
                destinations[tr] = nil
                transactionCalls[tr] = nil
                osip_transaction_free2(tr)
            }
            finished.removeAll()
        } while stepAgain && self.osip != nil
        stepping = false
        if closeRequested { close(); return }
        if let t = osipTimer { loop.cancel(t); osipTimer = nil }
        guard self.osip != nil, !live.isEmpty else { return }
        let ms = cosip_next_timeout_ms(osip)
        guard ms >= 0 else { return }
        osipTimer = loop.schedule(after: .milliseconds(max(Int(ms), 1))) { [weak self] in
            self?.osipTimer = nil
            self?.step()
        }
    }

    private func readable() {
        guard let socket, osip != nil else { return }
        // At most 64 datagrams a wake-up: a flood cannot keep the loop from its other work.
        for _ in 0 ..< 64 {
            let datagram: UDPSocket.Datagram?
            do { datagram = try socket.receive(into: UnsafeMutableRawBufferPointer(rebasing: receiveBuffer[0 ..< 65_535])) } catch { break }
            guard let datagram else { break }
            guard !datagram.truncated else {
                // Counted against its source's budget all the same.
                if budget.admit(datagram.source, now: monotonicNanoseconds(), isKnownPeer: { isKnownPeer(datagram.source) }) {
                    drop(.truncated, from: datagram.source)
                } else {
                    drop(.overBudget, from: datagram.source)
                }
                continue
            }
            received(UnsafeRawBufferPointer(rebasing: receiveBuffer[0 ..< datagram.count]), from: datagram.source, onStream: false)
        }
        step()
    }

    /// One message: a datagram, or one the TLS stream's framer cut out (`onStream`: it came on
    /// the connection to the registrar, so it is the registrar's).
    func received(_ bytes: UnsafeRawBufferPointer, from source: SocketAddress, onStream: Bool) {
        guard let osip else { return }
        // Anyone may call: each source gets a budget before osip parses anything of it.
        guard budget.admit(source, now: monotonicNanoseconds(), isKnownPeer: { onStream || isKnownPeer(source) }) else {
            drop(.overBudget, from: source)
            return
        }
        guard bytes.count > 0, bytes.count < receiveBuffer.count else {
            drop(.truncated, from: source)
            return
        }
        // osip reads a NUL-terminated copy (the datagram is already in place).
        if bytes.baseAddress != UnsafeRawPointer(receiveBuffer.baseAddress) {
            UnsafeMutableRawBufferPointer(rebasing: receiveBuffer[0 ..< bytes.count]).copyMemory(from: bytes)
        }
        receiveBuffer[bytes.count] = 0
        let base = receiveBuffer.baseAddress!.assumingMemoryBound(to: CChar.self)
        guard let event = osip_parse(base, bytes.count) else {
            drop(.unparseable, from: source)
            return
        }
        guard let message = event.pointee.sip, cosip_is_complete(message) else {
            drop(.incomplete, from: source)
            osip_event_free(event)
            return
        }
        if cosip_is_response(message) {
            // osip reads a status line's code without checking it has three digits
            // ("SIP/2.0 42.3" is status 42, found by the sip fuzz target): a response outside
            // 100-699 is dropped here, before any transaction takes it as final.
            guard (100 ... 699).contains(message.pointee.status_code) else {
                drop(.statusOutOfRange, from: source)
                osip_event_free(event)
                return
            }
            // Answers come from where our requests went (the registrar, a call's next hop); a
            // stranger's response is dropped however well it matches. On the TLS connection
            // everything is the registrar's, whose certificate was checked.
            guard onStream || destinations.values.contains(source)
                || calls.contains(where: { $0.outgoingDestination == source || nextHop($0.dialog) == source }) else {
                drop(.responseFromStranger, from: source)
                osip_event_free(event)
                return
            }
            if osip_find_transaction_and_add_event(osip, event) != OSIP_SUCCESS {
                // A 2xx resent after osip's INVITE transaction ended is the dialog's to ACK.
                if !strayResponse(message, from: source) { drop(.responseToNothing, from: source) }
                osip_event_free(event)
            }
        } else if !cosip_is_request(message) || osip_find_transaction_and_add_event(osip, event) != OSIP_SUCCESS {
            // A new request (or an ACK for a 2xx, which has no transaction): the call layer's.
            newRequest(event, message, from: source)
        }
    }

    private static func installCallbacks(_ osip: UnsafeMutablePointer<osip_t>) {
        osip_set_cb_send_message(osip) { tr, message, _, _, _ in
            guard let tr, let message, let ua = agentOf(tr) else { return -1 }
            return ua.send(tr, message) ? 0 : -1
        }
        let onMessage: osip_message_cb_t = { type, tr, message in
            guard let tr, let message, let ua = agentOf(tr) else { return }
            ua.transactionEvent(osip_message_callback_type_t(rawValue: UInt32(type)), tr, message)
        }
        for type in OSIP_ICT_STATUS_1XX_RECEIVED.rawValue ..< OSIP_MESSAGE_CALLBACK_COUNT.rawValue {
            osip_set_message_callback(osip, Int32(type), onMessage)
        }
        for type in [OSIP_ICT_KILL_TRANSACTION, OSIP_IST_KILL_TRANSACTION, OSIP_NICT_KILL_TRANSACTION, OSIP_NIST_KILL_TRANSACTION] {
            osip_set_kill_transaction_callback(osip, Int32(type.rawValue)) { _, tr in
                guard let tr, let ua = agentOf(tr) else { return }
                ua.finished.append(tr)
                if let osip = ua.osip { osip_remove_transaction(osip, tr) }
                ua.registerEndedWithoutAnswer(tr)
                ua.transactionEnded(tr)
            }
        }
    }

    /// Sends what a transaction asks for (first send and retransmissions) where it goes.
    fileprivate func send(_ tr: UnsafeMutablePointer<osip_transaction_t>, _ message: UnsafeMutablePointer<osip_message_t>) -> Bool {
        var text: UnsafeMutablePointer<CChar>?
        var length = 0
        guard osip_message_to_str(message, &text, &length) == OSIP_SUCCESS, let text else { return false }
        defer { cosip_free(text) }
        return transmit(Array(UnsafeRawBufferPointer(start: text, count: length)), to: destinations[tr] ?? account.registrar)
    }

    // MARK: Text

    static func challenge(in response: UnsafeMutablePointer<osip_message_t>, proxy: Bool) -> SIPDigestChallenge? {
        guard let h = proxy ? cosip_proxy_authenticate(response, 0) : cosip_www_authenticate(response, 0) else { return nil }
        func field(_ p: UnsafeMutablePointer<CChar>?) -> String? { p.map { unquoted(String(cString: $0)) } }
        guard let scheme = field(osip_www_authenticate_get_auth_type(h)), scheme.lowercased() == "digest",
              let realm = field(osip_www_authenticate_get_realm(h)),
              let nonce = field(osip_www_authenticate_get_nonce(h)) else { return nil }
        let qop = field(osip_www_authenticate_get_qop_options(h))?
            .split(separator: ",").map { String($0).trimmed } ?? []
        return SIPDigestChallenge(
            realm: realm, nonce: nonce, opaque: field(osip_www_authenticate_get_opaque(h)), qop: qop,
            algorithm: field(osip_www_authenticate_get_algorithm(h)),
            stale: field(osip_www_authenticate_get_stale(h))?.lowercased() == "true")
    }

    /// osip keeps the quotes of quoted parameters; the digest needs the value inside.
    static func unquoted(_ s: String) -> String {
        guard s.count >= 2, s.hasPrefix("\""), s.hasSuffix("\"") else { return s }
        var out = ""
        var escaped = false
        for c in s.dropFirst().dropLast() {
            if escaped { out.append(c); escaped = false } else if c == "\\" { escaped = true } else { out.append(c) }
        }
        return out
    }

    static func hostPort(_ address: SocketAddress) -> String {
        let host = address.family == .ipv6 ? "[\(address.host)]" : address.host
        return "\(host):\(address.port ?? 5060)"
    }

    /// A random token for tags, branches, Call-IDs and cnonces (the system's generator).
    static func token(_ count: Int) -> String {
        let alphabet = Array("abcdefghijklmnopqrstuvwxyz0123456789")
        var g = SystemRandomNumberGenerator()
        return String((0 ..< count).map { _ in alphabet[Int(g.next() % UInt64(alphabet.count))] })
    }
}

/// The agent a transaction belongs to (set at its start): osip's callbacks are C function
/// pointers, which carry no context of their own.
private func agentOf(_ tr: UnsafeMutablePointer<osip_transaction_t>) -> SIPUserAgent? {
    guard let raw = osip_transaction_get_your_instance(tr) else { return nil }
    return Unmanaged<SIPUserAgent>.fromOpaque(raw).takeUnretainedValue()
}

extension StringProtocol {
    /// Without leading and trailing spaces and tabs (SIP's whitespace inside a header value).
    var trimmed: String {
        var s = Substring(self)
        while let f = s.first, f == " " || f == "\t" { s.removeFirst() }
        while let l = s.last, l == " " || l == "\t" { s.removeLast() }
        return String(s)
    }
}
