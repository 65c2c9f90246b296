import COSIP
import RoomSDP
import RoomSystem

/// The call layer over osip's transactions (RFC 3261 §12-§15): incoming INVITEs ring and are
/// answered or declined, our INVITEs are sent (answering one digest challenge), dialogs carry
/// BYE and re-INVITEs (hold), CANCEL ends a ringing call, OPTIONS is answered anywhere. What
/// osip leaves to the transaction user is here: ACKs for 2xx and their retransmission, the 2xx
/// resent until its ACK, tags, CSeq, route set and remote target.
extension SIPUserAgent {
    static let allowedMethods = "INVITE, ACK, BYE, CANCEL, OPTIONS"
    /// RFC 3261 §17.1.1.1 T1 and T2, for the 2xx retransmission osip does not do.
    static let t1Milliseconds = 500
    static let t2Milliseconds = 4_000

    var via: String { "SIP/2.0/\(transportName) \(Self.hostPort(localAddress));rport;branch=z9hG4bK\(Self.token(12))" }
    var contactHeader: String { "<\(contactURI)>" }

    // MARK: Placing a call

    /// Calls `uri` (`sip:user@host[:port]`, host an IP address): through the registrar when
    /// registered (it is the proxy that knows where users are), else straight to the URI's
    /// host and port. Over TLS always through the registrar's connection, and the host may be a
    /// name (`sips:` too): the proxy resolves it. Events come on the returned call's `onEvent`.
    public func call(uri: String, localMedia: CallLocalMedia) throws(SIPCallError) -> SIPCall {
        guard osip != nil else { throw SIPCallError("call: the agent is closed") }
        let target: SocketAddress
        if let tlsLink {
            guard Self.isTargetURI(uri) else { throw SIPCallError("call: '\(uri.prefix(80))' is not a sip: or sips: URI with a host") }
            guard tlsLink.isConnected else { throw SIPCallError("call: not connected to the registrar at \(account.registrar) (TLS)") }
            target = account.registrar
        } else {
            guard let address = Self.address(ofURI: uri) else {
                throw SIPCallError("call: '\(uri.prefix(80))' is not a sip: URI with an IP address host")
            }
            target = address
        }
        guard uri.unicodeScalars.allSatisfy({ !SIPAccount.breaksHeader($0) }) else {
            throw SIPCallError("call: the URI contains characters SIP cannot carry there")
        }
        guard !calls.contains(where: { !$0.isConfirmed }), calls.count < 2 else {
            throw SIPCallError("call: a call is already ringing or two are up")
        }
        let tag = Self.token(10)
        let dialog = SIPDialog(callID: Self.token(16) + "@roomd", localTag: tag, remoteTag: nil,
                               localHeader: "<\(account.addressOfRecord)>;tag=\(tag)", remoteHeader: "<\(uri)>",
                               remoteTarget: uri, routeSet: [], localCSeq: UInt32.random(in: 1 ... 10_000), remoteCSeq: nil)
        let call = SIPCall(direction: .outgoing, remoteURI: uri, remoteDisplayName: nil, state: .calling,
                           remoteOffer: nil, dialog: dialog, agent: self)
        call.outgoingDestination = isRegistered || tlsLink != nil ? account.registrar : target
        guard sendInvite(call, localMedia: localMedia) else {
            throw SIPCallError("call: could not build an INVITE for '\(uri.prefix(80))'")
        }
        calls.append(call)
        startRingTimer(call)
        return call
    }

    var isRegistered: Bool { if case .registered = registrationState { true } else { false } }

    /// Sends an INVITE: the call's first (no remote tag yet) or a re-INVITE inside its dialog.
    /// False when osip would not take it (a URI it cannot parse); the call is left as it was.
    @discardableResult
    func sendInvite(_ call: SIPCall, localMedia: CallLocalMedia, authorization: (header: String, value: String)? = nil) -> Bool {
        let offer = CallAudioNegotiation.offer(localMedia, origin: call.nextOrigin())
        call.dialog.localCSeq &+= 1
        var text = call.dialog.request("INVITE", cseq: call.dialog.localCSeq, via: via, contact: contactHeader,
                                       body: ("application/sdp", offer.text))
        if let authorization {
            text = text.replacingFirst("User-Agent: roomd\r\n", with: "User-Agent: roomd\r\n\(authorization.header): \(authorization.value)\r\n")
        }
        guard let destination = call.dialog.remoteTag == nil ? call.outgoingDestination : nextHop(call.dialog),
              let tr = startTransaction(text, type: ICT, to: destination) else {
            call.dialog.localCSeq &-= 1
            return false
        }
        transactionCalls[tr] = call
        call.clientInvite = tr
        call.inviteText = text
        call.inviteCSeq = call.dialog.localCSeq
        call.offerSent = localMedia
        step()
        return true
    }

    /// CANCEL for our ringing INVITE (RFC 3261 §9.1: same Request-URI, Call-ID, From, To, CSeq
    /// number and top Via as the INVITE). Its 487 ends the call as cancelled.
    func cancelOutgoing(_ call: SIPCall) {
        call.cancelRequested = true
        guard let inviteText = call.inviteText, let invite = Self.parse(inviteText) else { end(call, .cancelled); return }
        defer { osip_message_free(invite) }
        guard let view = SIPMessageView(invite), let destination = call.outgoingDestination ?? nextHop(call.dialog) else {
            end(call, .cancelled)
            return
        }
        let text = "CANCEL \(call.dialog.remoteTarget) SIP/2.0\r\n" + view.lines("Via") + view.lines("Route")
            + "Max-Forwards: 70\r\nFrom: \(call.dialog.localHeader)\r\nTo: \(view.value("To") ?? "")\r\n"
            + "Call-ID: \(call.dialog.callID)\r\nCSeq: \(call.inviteCSeq) CANCEL\r\nUser-Agent: roomd\r\nContent-Length: 0\r\n\r\n"
        if let tr = startTransaction(text, type: NICT, to: destination) { transactionCalls[tr] = call }
        step()
    }

    /// BYE inside the call's dialog; the call ends at once with `reason` (the BYE's answer
    /// changes nothing the application could act on).
    func sendBye(_ call: SIPCall, endingWith reason: SIPCallEndReason = .localHungUp) {
        call.dialog.localCSeq &+= 1
        let text = call.dialog.request("BYE", cseq: call.dialog.localCSeq, via: via, contact: contactHeader)
        if let destination = nextHop(call.dialog), let tr = startTransaction(text, type: NICT, to: destination) {
            transactionCalls[tr] = call
        }
        end(call, reason)
        step()
    }

    // MARK: Answering a call

    func answerIncoming(_ call: SIPCall, localMedia: CallLocalMedia) throws(SIPCallError) {
        guard let tr = call.serverInvite, let offer = call.remoteOffer else { throw SIPCallError("answer: the INVITE is gone") }
        let answer: SessionDescription
        let agreement: Agreement
        do throws(SDPError) {
            (answer, agreement) = try CallAudioNegotiation.answer(to: offer, local: localMedia, origin: call.nextOrigin())
        } catch {
            Log.warning("sip: cannot answer the offer of \(call.remoteURI.prefix(80)), refused with 488: \(Self.warningText(error.description))")
            respondToInvite(call, tr, code: 488, extra: "Warning: 305 roomd \"\(Self.warningText(error.description))\"\r\n")
            end(call, .rejected(code: 488))
            throw SIPCallError("answer: \(error)")
        }
        call.localMedia = localMedia
        send2xx(call, tr, answer: answer, agreement: agreement, isInitial: true)
    }

    func rejectIncoming(_ call: SIPCall, code: Int, warning: String? = nil) {
        guard let tr = call.serverInvite else { return }
        if let warning, let source = call.inviteSource {
            reportBadInput(kind: "offers refused \(code)", from: source, level: .warning) {
                "sip: refused the offer of \(call.remoteURI.prefix(80)) (\(source)) with \(code): \(Self.warningText(warning))"
            }
        }
        respondToInvite(call, tr, code: code, extra: warning.map { "Warning: 305 roomd \"\(Self.warningText($0))\"\r\n" } ?? "")
        // An offer refused as it arrives is refused statelessly, like an INVITE refused before
        // ringing (`inviteReceived`): the far end's own retransmission of the INVITE brings the
        // answer again, and a forged source is not sent the 488 ten times over.
        if warning != nil { forgetAfterAnswer(tr) }
        end(call, .rejected(code: code))
    }

    private func respondToInvite(_ call: SIPCall, _ tr: UnsafeMutablePointer<osip_transaction_t>, code: Int, extra: String = "") {
        guard let request = tr.pointee.orig_request.flatMap(SIPMessageView.init) else { return }
        let text = response(to: request, code: code, toTag: call.dialog.localTag, extra: extra)
        call.lastFinalToInvite = text
        call.serverInvite = nil
        respond(tr, text)
        step()
    }

    /// Sends the 2xx through the INVITE's transaction, then resends it (T1 doubling to T2)
    /// until the ACK or `ackTimeout`.
    private func send2xx(_ call: SIPCall, _ tr: UnsafeMutablePointer<osip_transaction_t>, answer: SessionDescription,
                         agreement: Agreement, isInitial: Bool) {
        guard let request = tr.pointee.orig_request.flatMap(SIPMessageView.init),
              let destination = destinations[tr] else { return }
        let text = response(to: request, code: 200, toTag: call.dialog.localTag,
                            extra: "Contact: \(contactHeader)\r\nAllow: \(Self.allowedMethods)\r\n", body: answer.text)
        call.serverInvite = nil
        call.lastFinalToInvite = text
        call.unacknowledged2xx = (text, request.cseqNumber ?? 0, agreement, isInitial)
        call.retransmitInterval = Self.t1Milliseconds
        call.retransmitDeadline = monotonicNanoseconds() &+ ackTimeout.monotonicNanosecondCount
        respond(tr, text)
        schedule2xxRetransmission(call, to: destination)
        step()
    }

    private func schedule2xxRetransmission(_ call: SIPCall, to destination: SocketAddress) {
        // The next resend, or timer H if that comes first.
        let now = monotonicNanoseconds()
        let remainingMs = call.retransmitDeadline > now ? Int((call.retransmitDeadline - now + 999_999) / 1_000_000) : 0
        call.retransmitTimer = loop.schedule(after: .milliseconds(min(call.retransmitInterval, remainingMs))) { [weak self, weak call] in
            guard let self, let call, let pending = call.unacknowledged2xx else { return }
            call.retransmitTimer = nil
            if monotonicNanoseconds() >= call.retransmitDeadline {
                call.unacknowledged2xx = nil
                // Timer H: no ACK. The dialog is given up with a BYE (RFC 3261 §13.3.1.4).
                self.sendBye(call, endingWith: .timeout)
                return
            }
            self.sendRaw(pending.text, to: destination)
            call.retransmitInterval = min(call.retransmitInterval * 2, Self.t2Milliseconds)
            self.schedule2xxRetransmission(call, to: destination)
        }
    }

    /// A response to `request` with its Via, From, To (our tag added), Call-ID, CSeq and, for a
    /// dialog-making answer, its Record-Route.
    func response(to request: SIPMessageView, code: Int, toTag: String?, extra: String = "", body: String? = nil) -> String {
        var to = request.value("To") ?? ""
        if request.toTag == nil, let toTag, code != 100 { to += ";tag=\(toTag)" }
        var text = "SIP/2.0 \(code) \(Self.reasonPhrase(code))\r\n" + request.lines("Via")
        if request.method == "INVITE", code > 100, code < 300 { text += request.lines("Record-Route") }
        text += "From: \(request.value("From") ?? "")\r\nTo: \(to)\r\nCall-ID: \(request.callID ?? "")\r\n"
            + "CSeq: \(request.value("CSeq") ?? "")\r\nUser-Agent: roomd\r\n" + extra
        if let body {
            text += "Content-Type: application/sdp\r\nContent-Length: \(body.utf8.count)\r\n\r\n\(body)"
        } else {
            text += "Content-Length: 0\r\n\r\n"
        }
        return text
    }

    // MARK: Requests from the network

    /// A request osip matched to no transaction: an ACK for a 2xx, a retransmitted INVITE whose
    /// transaction ended at its 2xx, or a new request (a new server transaction).
    func newRequest(_ event: UnsafeMutablePointer<osip_event_t>, _ message: UnsafeMutablePointer<osip_message_t>, from source: SocketAddress) {
        guard let osip, let view = SIPMessageView(message), let method = view.method, view.callID != nil,
              view.cseqNumber != nil, view.fromTag != nil, view.topViaBranch != nil else {
            drop(.requestWithoutTags, from: source)
            osip_event_free(event)
            return
        }
        if method == "ACK" {
            ackReceived(view)
            osip_event_free(event)
            return
        }
        if method == "INVITE", view.toTag == nil,
           let call = calls.first(where: { $0.dialog.callID == view.callID && $0.inviteBranch == view.topViaBranch }) {
            // The INVITE again, after its transaction ended: the same answer again.
            if let last = call.lastFinalToInvite { sendRaw(last, to: source) }
            osip_event_free(event)
            return
        }
        // The calls in progress always get through (their BYE, CANCEL, re-INVITE): only new
        // business waits for room in the table, and strangers may fill three quarters of it,
        // so that the registrar's requests (the calls it relays) still find room in a flood.
        let room = isKnownPeer(source) ? maximumTransactions : maximumTransactions * 3 / 4
        guard live.count < room || calls.contains(where: { $0.dialog.callID == view.callID }) else {
            drop(.transactionsFull, from: source)
            osip_event_free(event)
            return
        }
        guard let tr = osip_create_transaction(osip, event) else {
            drop(.noTransaction, from: source)
            osip_event_free(event)
            return
        }
        adopt(tr, destination: source)
        osip_transaction_add_event(tr, event)
    }

    /// osip's report on a transaction: a request for a server transaction, a response for a
    /// client one.
    func transactionEvent(_ type: osip_message_callback_type_t, _ tr: UnsafeMutablePointer<osip_transaction_t>,
                          _ message: UnsafeMutablePointer<osip_message_t>) {
        switch type {
        case OSIP_IST_INVITE_RECEIVED:
            guard let view = SIPMessageView(message) else { return }
            inviteReceived(tr, view)
        case OSIP_NIST_BYE_RECEIVED, OSIP_NIST_OPTIONS_RECEIVED, OSIP_NIST_CANCEL_RECEIVED, OSIP_NIST_INFO_RECEIVED,
             OSIP_NIST_NOTIFY_RECEIVED, OSIP_NIST_SUBSCRIBE_RECEIVED, OSIP_NIST_REGISTER_RECEIVED, OSIP_NIST_UNKNOWN_REQUEST_RECEIVED:
            guard let view = SIPMessageView(message) else { return }
            nonInviteReceived(tr, view)
        case OSIP_NICT_STATUS_2XX_RECEIVED, OSIP_NICT_STATUS_3XX_RECEIVED, OSIP_NICT_STATUS_4XX_RECEIVED,
             OSIP_NICT_STATUS_5XX_RECEIVED, OSIP_NICT_STATUS_6XX_RECEIVED:
            registerAnswered(tr, message)
        case OSIP_ICT_STATUS_1XX_RECEIVED:
            guard let call = transactionCalls[tr], call.state == .calling, let view = SIPMessageView(message) else { return }
            if view.statusCode > 100 { call.set(.ringing, event: .ringing) }
        case OSIP_ICT_STATUS_2XX_RECEIVED, OSIP_ICT_STATUS_2XX_RECEIVED_AGAIN:
            guard let call = transactionCalls[tr], let view = SIPMessageView(message) else { return }
            invite2xx(call, view)
        case OSIP_ICT_STATUS_3XX_RECEIVED, OSIP_ICT_STATUS_4XX_RECEIVED, OSIP_ICT_STATUS_5XX_RECEIVED, OSIP_ICT_STATUS_6XX_RECEIVED:
            guard let call = transactionCalls[tr], let view = SIPMessageView(message) else { return }
            inviteFailed(call, tr, view, message)
        case OSIP_ICT_STATUS_TIMEOUT:
            guard let call = transactionCalls[tr], call.clientInvite == tr else { return }
            call.clientInvite = nil
            if call.isConfirmed { return }   // a re-INVITE nobody answered: the call stays as it was
            end(call, call.cancelRequested ? .cancelled : .timeout)
        default:
            break
        }
    }

    func transactionEnded(_ tr: UnsafeMutablePointer<osip_transaction_t>) {
        guard let call = transactionCalls[tr] else { return }
        if call.clientInvite == tr { call.clientInvite = nil }
        if call.serverInvite == tr { call.serverInvite = nil }
    }

    private func inviteReceived(_ tr: UnsafeMutablePointer<osip_transaction_t>, _ request: SIPMessageView) {
        if request.toTag != nil {
            reinviteReceived(tr, request)
            return
        }
        let tag = Self.token(10)
        let source = destinations[tr]
        /// Refused before any call exists: the answer is sent once and the transaction forgotten
        /// at once (a stateless refusal, RFC 3261 §8.2.7), instead of osip resending it for 32 s
        /// until an ACK. A flood of INVITEs (forged sources included) then leaves nothing behind
        /// and is not answered ten times over; a caller that missed the answer sends its INVITE
        /// again and is refused again.
        func refuse(_ code: Int, _ why: String = "") {
            respond(tr, response(to: request, code: code, toTag: tag,
                                 extra: why.isEmpty ? "" : "Warning: 399 roomd \"\(Self.warningText(why))\"\r\n"))
            forgetAfterAnswer(tr)
            if let source {
                let caller = SIPMessageView.nameAndURI(request.value("From") ?? "").uri
                reportBadInput(kind: "INVITEs refused \(code)", from: source, level: code == 486 || code == 480 ? .notice : .warning) {
                    "sip: refused an INVITE from \(caller.prefix(80)) (\(source)): \(code) \(Self.reasonPhrase(code))"
                        + (why.isEmpty ? "" : ": \(Self.warningText(why))")
                }
            }
        }
        guard onIncomingCall != nil else { refuse(480, "no one takes calls here (no handler)"); return }
        if calls.contains(where: { !$0.isConfirmed }) || calls.count >= 2 {
            callsRefusedBusy += 1
            refuse(486, "a call rings already or two are up")
            return
        }
        guard let contact = request.contactURI, isUsableTarget(contact) else {
            refuse(400, tlsLink == nil ? "no Contact with an IP address host" : "no Contact with a sip: or sips: URI")
            return
        }
        let offer: SessionDescription
        do throws(SDPError) {
            guard request.value("Content-Type")?.lowercased().hasPrefix("application/sdp") == true else {
                throw SDPError(line: nil, field: "body", message: "an INVITE without an SDP offer is not supported")
            }
            offer = try SessionDescription(parsing: request.body)
        } catch {
            refuse(488, error.description)
            return
        }
        let from = request.value("From") ?? ""
        let (name, uri) = SIPMessageView.nameAndURI(from)
        let dialog = SIPDialog(callID: request.callID ?? "", localTag: tag, remoteTag: request.fromTag,
                               localHeader: (request.value("To") ?? "") + ";tag=\(tag)", remoteHeader: from,
                               remoteTarget: contact, routeSet: request.values("Record-Route"),
                               localCSeq: UInt32.random(in: 1 ... 10_000), remoteCSeq: request.cseqNumber)
        let call = SIPCall(direction: .incoming, remoteURI: uri, remoteDisplayName: name, state: .ringing,
                           remoteOffer: offer, dialog: dialog, agent: self)
        call.serverInvite = tr
        call.inviteBranch = request.topViaBranch
        call.inviteSource = source
        transactionCalls[tr] = call
        calls.append(call)
        respond(tr, response(to: request, code: 100, toTag: nil))
        startRingTimer(call)
        onIncomingCall?(call)
        // Ringing once the application has looked at the call: one it answered, declined or
        // whose offer it refused at once never rings at the far end either.
        if call.isRinging, call.serverInvite == tr {
            respond(tr, response(to: request, code: 180, toTag: tag, extra: "Contact: \(contactHeader)\r\n"))
        }
    }

    private func reinviteReceived(_ tr: UnsafeMutablePointer<osip_transaction_t>, _ request: SIPMessageView) {
        guard let call = dialogCall(request) else {
            respond(tr, response(to: request, code: 481, toTag: nil))
            return
        }
        if let last = call.dialog.remoteCSeq, let n = request.cseqNumber, n <= last {
            respond(tr, response(to: request, code: 500, toTag: nil, extra: "Retry-After: 1\r\n"))
            return
        }
        call.dialog.remoteCSeq = request.cseqNumber
        guard call.isConfirmed, let media = call.localMedia else {
            respond(tr, response(to: request, code: 491, toTag: nil))
            return
        }
        // Glare: our own offer is out (RFC 3261 §14.2).
        if call.clientInvite != nil || call.unacknowledged2xx != nil {
            respond(tr, response(to: request, code: 491, toTag: nil))
            return
        }
        if let contact = request.contactURI, isUsableTarget(contact) { call.dialog.remoteTarget = contact }
        do throws(SDPError) {
            let offer = try SessionDescription(parsing: request.body)
            let (answer, agreement) = try CallAudioNegotiation.answer(to: offer, local: media, origin: call.nextOrigin())
            call.serverInvite = tr
            transactionCalls[tr] = call
            send2xx(call, tr, answer: answer, agreement: agreement, isInitial: false)
        } catch {
            respond(tr, response(to: request, code: 488, toTag: nil,
                                 extra: "Warning: 305 roomd \"\(Self.warningText(error.description))\"\r\n"))
            reportBadInput(kind: "re-INVITEs refused 488", from: destinations[tr] ?? account.registrar, level: .warning) {
                "sip: refused the re-INVITE of \(call.remoteURI.prefix(80)) with 488, the call keeps its media: \(Self.warningText(error.description))"
            }
        }
    }

    private func nonInviteReceived(_ tr: UnsafeMutablePointer<osip_transaction_t>, _ request: SIPMessageView) {
        switch request.method {
        case "OPTIONS":
            respond(tr, response(to: request, code: 200, toTag: Self.token(10),
                                 extra: "Allow: \(Self.allowedMethods)\r\nAccept: application/sdp\r\n"))
        case "CANCEL":
            guard let call = calls.first(where: { $0.dialog.callID == request.callID && $0.inviteBranch == request.topViaBranch
                                                  && $0.direction == .incoming }) else {
                respond(tr, response(to: request, code: 481, toTag: nil))
                return
            }
            respond(tr, response(to: request, code: 200, toTag: call.dialog.localTag))
            if call.isRinging, let invite = call.serverInvite {
                respondToInvite(call, invite, code: 487)
                end(call, .cancelled)
            }
        case "BYE":
            guard let call = dialogCall(request) else {
                respond(tr, response(to: request, code: 481, toTag: nil))
                return
            }
            respond(tr, response(to: request, code: 200, toTag: nil))
            end(call, .remoteHungUp)
        default:
            respond(tr, response(to: request, code: 405, toTag: Self.token(10), extra: "Allow: \(Self.allowedMethods)\r\n"))
        }
    }

    /// The call whose dialog a request belongs to: its Call-ID, our tag in To, theirs in From.
    private func dialogCall(_ request: SIPMessageView) -> SIPCall? {
        calls.first { $0.dialog.callID == request.callID && $0.dialog.localTag == request.toTag
            && $0.dialog.remoteTag == request.fromTag && !$0.isEnded }
    }

    private func ackReceived(_ ack: SIPMessageView) {
        guard let call = dialogCall(ack), let pending = call.unacknowledged2xx, ack.cseqNumber == pending.cseq else { return }
        call.unacknowledged2xx = nil
        if let t = call.retransmitTimer { loop.cancel(t); call.retransmitTimer = nil }
        call.agreement = pending.agreement
        call.set(.confirmed(pending.agreement), event: pending.isInitial ? .confirmed(pending.agreement) : .updated(pending.agreement))
    }

    // MARK: Responses to our INVITEs

    private func invite2xx(_ call: SIPCall, _ response: SIPMessageView) {
        let firstAnswer = call.dialog.remoteTag == nil
        if firstAnswer {
            guard let contact = response.contactURI, isUsableTarget(contact), let tag = response.toTag else {
                end(call, .failed("the 2xx has no Contact with an IP address host or no To tag"))
                return
            }
            call.dialog.remoteTag = tag
            call.dialog.remoteHeader = response.value("To") ?? call.dialog.remoteHeader
            call.dialog.remoteTarget = contact
            call.dialog.routeSet = response.values("Record-Route").reversed()
        } else if response.toTag != call.dialog.remoteTag {
            return   // a second fork's answer: not followed (one dialog per call)
        }
        let ack = call.dialog.request("ACK", cseq: response.cseqNumber ?? call.inviteCSeq, via: via, contact: contactHeader)
        call.ackText = ack
        call.ackCSeq = response.cseqNumber ?? 0
        if let hop = nextHop(call.dialog) { sendRaw(ack, to: hop) }
        guard call.clientInvite != nil || firstAnswer else { return }   // a resent 2xx: the ACK again, nothing else
        call.clientInvite = nil
        if call.cancelRequested && firstAnswer {
            // Answered while our CANCEL was on its way: the call was still not wanted.
            sendBye(call, endingWith: .cancelled)
            return
        }
        guard let offered = call.offerSent else { return }
        do throws(SDPError) {
            let agreement = try CallAudioNegotiation.accept(answer: SessionDescription(parsing: response.body), to: offered)
            call.localMedia = offered
            call.agreement = agreement
            call.set(.confirmed(agreement), event: firstAnswer ? .confirmed(agreement) : .updated(agreement))
        } catch {
            if firstAnswer {
                Log.warning("sip: the answer of \(call.remoteURI.prefix(80)) is unusable, hanging up: \(Self.warningText(error.description))")
                sendBye(call, endingWith: .failed("the answer is unusable: \(error)"))
            } else {
                Log.warning("sip: the answer to our re-INVITE is unusable (\(error)); the call keeps its media")
            }
        }
    }

    /// A 2xx to an INVITE whose transaction osip already ended (its retransmission): ACKed again.
    func strayResponse(_ message: UnsafeMutablePointer<osip_message_t>, from source: SocketAddress) -> Bool {
        guard let view = SIPMessageView(message), view.cseqMethod == "INVITE", (200 ..< 300).contains(view.statusCode),
              let call = calls.first(where: { $0.dialog.callID == view.callID && $0.dialog.remoteTag == view.toTag }),
              let ack = call.ackText, view.cseqNumber == call.ackCSeq, let hop = nextHop(call.dialog) else { return false }
        sendRaw(ack, to: hop)
        return true
    }

    private func inviteFailed(_ call: SIPCall, _ tr: UnsafeMutablePointer<osip_transaction_t>, _ response: SIPMessageView,
                              _ message: UnsafeMutablePointer<osip_message_t>) {
        guard call.clientInvite == tr else { return }
        call.clientInvite = nil
        let code = response.statusCode
        if call.isConfirmed {
            // A refused re-INVITE leaves the session as it was (RFC 3261 §14.1).
            Log.warning("sip: re-INVITE refused: \(code)")
            return
        }
        if (code == 401 || code == 407) && !call.challengeAnswered && !call.cancelRequested,
           let challenge = Self.challenge(in: message, proxy: code == 407), let media = call.offerSent {
            call.challengeAnswered = true
            do throws(SIPDigestError) {
                let value = try SIPDigest.authorization(challenge: challenge, method: "INVITE", uri: call.dialog.remoteTarget,
                                                        user: account.authUser, password: account.password, cnonce: Self.token(12))
                if !sendInvite(call, localMedia: media, authorization: (code == 407 ? "Proxy-Authorization" : "Authorization", value)) {
                    end(call, .failed("could not build the INVITE answering the \(code) challenge"))
                }
            } catch {
                end(call, .failed(error.description))
            }
            return
        }
        let phrase = message.pointee.reason_phrase.map { String(cString: $0) } ?? ""
        end(call, call.cancelRequested && code == 487 ? .cancelled : .declined(code: code, reason: phrase))
    }

    // MARK: Helpers

    private func startRingTimer(_ call: SIPCall) {
        call.ringTimer = loop.schedule(after: ringTimeout) { [weak self, weak call] in
            guard let self, let call else { return }
            call.ringTimer = nil
            switch (call.direction, call.state) {
            case (.incoming, .ringing):
                if let tr = call.serverInvite { self.respondToInvite(call, tr, code: 480) }
                self.end(call, .timeout)
            case (.outgoing, .calling), (.outgoing, .ringing):
                self.cancelOutgoing(call)
                self.end(call, .timeout)
            default:
                break
            }
        }
    }

    func end(_ call: SIPCall, _ reason: SIPCallEndReason) {
        if let t = call.retransmitTimer { loop.cancel(t); call.retransmitTimer = nil }
        if let t = call.ringTimer { loop.cancel(t); call.ringTimer = nil }
        calls.removeAll { $0 === call }
        call.set(.ended(reason), event: .ended(reason))
    }

    /// Where a dialog's next request goes, as a socket address (IP hosts only; no DNS yet).
    /// Over TLS the registrar's connection, whatever the route says.
    func nextHop(_ dialog: SIPDialog) -> SocketAddress? {
        if tlsLink != nil { return account.registrar }
        return Self.address(ofURI: dialog.nextHopURI)
    }

    /// A Contact the dialog can target: over UDP one we can send to (an IP address host), over
    /// TLS any sip: or sips: URI with a host (the proxy takes the request there).
    func isUsableTarget(_ uri: String) -> Bool {
        tlsLink == nil ? Self.address(ofURI: uri) != nil : Self.isTargetURI(uri)
    }

    /// A sip: or sips: URI osip parses, with a host.
    static func isTargetURI(_ uri: String) -> Bool {
        guard uri.utf8.count <= 1024 else { return false }
        var url: UnsafeMutablePointer<osip_uri_t>?
        guard osip_uri_init(&url) == OSIP_SUCCESS, let url else { return false }
        defer { osip_uri_free(url) }
        guard uri.withCString({ osip_uri_parse(url, $0) }) == OSIP_SUCCESS,
              let scheme = url.pointee.scheme.map({ String(cString: $0).lowercased() }), scheme == "sip" || scheme == "sips",
              let host = url.pointee.host, host.pointee != 0 else { return false }
        return true
    }

    /// A sip: URI's host and port as a socket address (port 5060 when none), or nil.
    static func address(ofURI uri: String) -> SocketAddress? {
        guard uri.utf8.count <= 1024 else { return nil }
        var url: UnsafeMutablePointer<osip_uri_t>?
        guard osip_uri_init(&url) == OSIP_SUCCESS, let url else { return nil }
        defer { osip_uri_free(url) }
        guard uri.withCString({ osip_uri_parse(url, $0) }) == OSIP_SUCCESS,
              let scheme = url.pointee.scheme.map({ String(cString: $0) }), scheme.lowercased() == "sip",
              let host = url.pointee.host.map({ String(cString: $0) }) else { return nil }
        var port: UInt16 = 5060
        if let p = url.pointee.port.map({ String(cString: $0) }) {
            guard let n = UInt16(p), n > 0 else { return nil }
            port = n
        }
        return try? SocketAddress(ip: host, port: port)
    }

    /// Text safe inside a Warning header's quoted string.
    static func warningText(_ s: String) -> String {
        String(s.unicodeScalars.filter { $0.value >= 0x20 && $0.value < 0x7F && $0 != "\"" && $0 != "\\" }.prefix(200))
    }

    static func reasonPhrase(_ code: Int) -> String {
        switch code {
        case 100: "Trying"
        case 180: "Ringing"
        case 200: "OK"
        case 400: "Bad Request"
        case 405: "Method Not Allowed"
        case 480: "Temporarily Unavailable"
        case 481: "Call/Transaction Does Not Exist"
        case 486: "Busy Here"
        case 487: "Request Terminated"
        case 488: "Not Acceptable Here"
        case 491: "Request Pending"
        case 500: "Server Internal Error"
        case 603: "Decline"
        default: "Unknown"
        }
    }
}

extension String {
    func replacingFirst(_ target: String, with replacement: String) -> String {
        guard let range = firstRange(of: target) else { return self }
        var copy = self
        copy.replaceSubrange(range, with: replacement)
        return copy
    }
}
