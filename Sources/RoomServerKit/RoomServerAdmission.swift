import FoundationEssentials
import RoomBase
import RoomMediaCrypto
import RoomModel
import RoomProtocol
import RoomSystem

// Who gets in: connections at capacity and per address (the queue of connections that have not
// joined, the oldest evicted first), then `hello`: the token and its application, the room opened
// on first join, a seat resumed within its reconnect grace or a new one with a fresh SSRC and SRTP
// keys.

extension RoomServer {
    /// Why a new connection is turned away, if it is: the server is full (or near its file
    /// descriptor limit), or the peer's address already has as many connections waiting to
    /// join as one host may.
    /// Why `connection` cannot be taken, or nil. At capacity the oldest connection that has not
    /// joined gives way instead (`statistics.connectionsEvicted`): otherwise whoever opens the
    /// most connections first — 1100 that never say hello — would hold every slot, and an
    /// appliance reconnecting after a blip could not join until the flood stopped. Joined
    /// participants are never evicted; only when every slot holds one is the newcomer refused.
    /// The per-address cap is checked first, so one address cannot evict the others' waits.
    ///
    /// Constant time: the counts per address and the queue of waiting connections (oldest first)
    /// are kept as connections come, join and close. (Scanning every session here made 4000
    /// silent connections cost the server 6.3 s of CPU, a real join 3.5 s and a live call 250
    /// late packets: issue 27.)
    func refusal(of connection: any StreamTransport) -> String? {
        let host = connection.peerAddress.host
        let waiting = waitingByHost[host] ?? 0
        if waiting >= configuration.limits.maxUnjoinedPerAddress {
            return "\(host) has \(waiting) connections that have not joined"
        }
        // Closing sessions count: they hold their descriptor until flushed. Of several workers,
        // every worker's count (only the front door has connections waiting to be evicted).
        let open = openConnectionCount
        if open >= connectionCapacity {
            guard let victim = oldestWaiting() else { return "\(open) connections open and joined, the most this server takes" }
            statistics.connectionsEvicted += 1
            closeSession(victim, flush: false)
        }
        return nil
    }

    /// The connection that has waited longest without joining (the queue's front, once those
    /// that joined or closed meanwhile are dropped from it).
    func oldestWaiting() -> Session? {
        while waitingHead < waitingQueue.count, !waitingQueue[waitingHead].waitingToJoin { waitingHead += 1 }
        if waitingHead > 1024 && waitingHead * 2 > waitingQueue.count {
            waitingQueue.removeFirst(waitingHead)
            waitingHead = 0
        }
        return waitingHead < waitingQueue.count ? waitingQueue[waitingHead] : nil
    }

    /// `s` joined or is closing: no longer counted as waiting.
    func stopWaiting(_ s: Session) {
        guard s.waitingToJoin else { return }
        s.waitingToJoin = false
        if let n = waitingByHost[s.host], n > 1 { waitingByHost[s.host] = n - 1 } else { waitingByHost[s.host] = nil }
    }

    // MARK: - Join

    func join(_ s: Session, _ hello: SignalMessage.Hello, requestID: Int?) {
        if hello.protocolVersion != roomProtocolVersion {
            refuseVersion(s, hello.protocolVersion, requestID: requestID)
            return
        }
        func refuseJoin(_ code: ErrorCode, _ text: String) {
            statistics.joinsRefused += 1
            Log.info("roomserver: \(s.connection.peerAddress): join refused: \(code): \(text)")
            refuse(s, code, text, requestID: requestID, close: true)
        }
        let claims: RoomTokenClaims
        do {
            // The hello names no room: the token's own room is the one joined (its
            // signature is checked before the claim is believed).
            let room = try verifier.verifySignatureAndTime(hello.token).room
            claims = try verifier.verify(hello.token, room: room, wantsRole: hello.role)
            try checkApp(hello.token, claims)
        } catch {
            refuseJoin(error.code, error.description)
            return
        }
        if isShuttingDown {
            refuseJoin(.roomClosed, "the server is shutting down")
            return
        }
        let key = RoomKey(app: claims.app, name: claims.room)
        if let workers, case let worker = workers.worker(for: key), worker != workerIndex {
            // Its room is another worker's: the connection goes there (`readAvailable`), which
            // checks the token again and joins it.
            stopWaiting(s)
            s.handOff = (worker, hello, requestID)
            return
        }
        let state: RoomState
        if let existing = rooms[key] {
            state = existing
        } else {
            do {
                state = RoomState(key: key, room: try Room(config: configuration.room),
                                  messageLimit: configuration.limits.appMessagesPerRoom)
            } catch {
                refuseJoin(.internalError, "room configuration: \(error)")
                return
            }
            rooms[key] = state
            Log.info("roomserver: room \(key) opened\(workerCount > 1 ? " on worker \(workerIndex)" : "")")
        }
        if let seat = resumableSeat(in: state, claims: claims, hello: hello) {
            resume(seat, session: s, claims: claims, requestID: requestID)
            return
        }
        if state.room.count >= configuration.maxParticipants, state.room.participant(userID: claims.sub) == nil {
            refuseJoin(.roomFull, "room \"\(claims.room)\" has \(configuration.maxParticipants) participants")
            return
        }

        let crypto: ParticipantCrypto?
        do {
            crypto = try newCrypto()
        } catch {
            Log.error("roomserver: cannot set up SRTP for a participant: \(error)")
            refuseJoin(.internalError, "media encryption could not be set up")
            return
        }
        let id = nextParticipantID
        let step = RoomParticipantID(workerCount)
        nextParticipantID = id > UInt32.max - step ? Self.firstParticipantID(index: workerIndex, count: workerCount) : id + step
        let now = nowMs()
        let request = RoomJoinRequest(
            participantID: id, userID: claims.sub, name: claims.name, grants: claims.grants,
            desiredRole: hello.role, tokenExpiresAt: roomInstant(forExpiry: claims.exp, now: now),
            previousParticipantID: hello.previousParticipantID)
        let effects: [RoomEffect]
        do {
            effects = try state.room.handle(.join(request), now: now)
        } catch {
            refuseJoin(ErrorCode(error.code), error.message)
            return
        }
        let p = Participant(id: id, room: state, ssrc: newSSRC(avoiding: state.retiredSSRCs), mediaKey: .random(), crypto: crypto, claims: claims,
                            messageLimit: configuration.limits.appMessagesPerParticipant)
        p.session = s
        s.participant = p
        stopWaiting(s)
        participants[id] = p
        usedSSRCs.insert(p.ssrc)
        state.members.append(p)
        state.emptySinceMs = nil
        statistics.joins += 1
        state.statistics.joins += 1
        Log.info("roomserver: \(claims.sub) (\"\(claims.name)\") joined room \(key) as participant \(id) from \(s.connection.peerAddress)")
        execute(effects, in: state)
    }

    /// A seat this `hello` may take back silently: the same user of the same application, with
    /// the same name and grants (anything else changes what the others see, so it joins the
    /// ordinary way: the old seat is `replaced` and announced), and either
    /// - the seat is waiting out its reconnect grace; a `previous_participant_id`, when given,
    ///   must name it, none is fine (a restarted appliance has forgotten its id), or
    /// - the seat's connection still looks alive but the hello names it in
    ///   `previous_participant_id`: the client saw the connection die before the server did
    ///   (a network change leaves no FIN; both sides wait 15 s of silence, the client then
    ///   retries within 0.5 s). That is the same blip, not a second device.
    private func resumableSeat(in state: RoomState, claims: RoomTokenClaims, hello: SignalMessage.Hello) -> Participant? {
        guard let p = state.members.first(where: { $0.claims.sub == claims.sub }),
              p.claims.app == claims.app, p.claims.name == claims.name, p.claims.grants == claims.grants
        else { return nil }
        if p.session == nil {
            guard p.lostAtMs != nil, hello.previousParticipantID == nil || hello.previousParticipantID == p.id else { return nil }
        } else {
            guard hello.previousParticipantID == p.id else { return nil }
        }
        return p
    }

    /// Gives a seat in its reconnect grace to a new connection: the same participant id, SSRC,
    /// stage, hand (and its place in the queue) and mute, a fresh media key; a `welcome` to the
    /// newcomer and nothing to anyone else (no `participant_left` / `participant_joined`
    /// pair). The hello's role is not applied: the seat is resumed as it was, and the
    /// `welcome` says what that is. The new token's expiry replaces the old one.
    private func resume(_ p: Participant, session s: Session, claims: RoomTokenClaims, requestID: Int?) {
        let state = p.room
        let now = nowMs()
        let crypto: ParticipantCrypto?
        do {
            crypto = try newCrypto()
        } catch {
            Log.error("roomserver: cannot set up SRTP for a participant: \(error)")
            statistics.joinsRefused += 1
            refuse(s, .internalError, "media encryption could not be set up", requestID: requestID, close: true)
            return
        }
        let effects: [RoomEffect]
        do {
            effects = try state.room.handle(.refreshToken(p.id, expiresAt: roomInstant(forExpiry: claims.exp, now: now)), now: now)
        } catch {
            statistics.joinsRefused += 1
            refuse(s, ErrorCode(error.code), error.message, requestID: requestID, close: true)
            return
        }
        if let old = p.session {
            // The connection the client gave up on: closed quietly, the seat moves on.
            Log.info("roomserver: participant \(p.id) reconnected before its old connection was seen to die; closing that one")
            old.participant = nil
            p.session = nil
            closeSession(old, flush: false)
        }
        let away = now - (p.lostAtMs ?? now)
        p.lostAtMs = nil
        p.claims = claims
        p.mediaKey = .random()
        p.replayGuard = BindingReplayGuard()
        p.crypto = crypto
        p.rebaseSequence = true
        // Media starts afresh: nothing is sent until the new connection's binding arrives.
        if let address = p.mediaAddress, byAddress[address] === p { byAddress[address] = nil }
        p.mediaAddress = nil
        p.session = s
        s.participant = p
        stopWaiting(s)
        statistics.joins += 1
        state.statistics.joins += 1
        statistics.resumes += 1
        Log.info("roomserver: \(claims.sub) resumed participant \(p.id) in room \(state.key) after \(away) ms from \(s.connection.peerAddress)")
        send(.stateSync(state.room.snapshot(for: p.id)), to: [p.id], in: state)
        execute(effects, in: state)
    }

    /// The key that signed the token must belong to the token's application.
    func checkApp(_ token: String, _ claims: RoomTokenClaims) throws(TokenError) {
        guard let kid = Self.keyID(of: token), let appID = configuration.keys[kid]?.appID ?? configuration.publicKeys[kid]?.appID else {
            throw .malformed("header has no kid")
        }
        guard appID == claims.app else {
            throw .unknownKey("\(kid) (it signs for application \"\(appID)\", not \"\(claims.app)\")")
        }
    }

    private struct KeyIDHeader: Decodable { var kid: String? }

    /// The `kid` of a token whose signature has been verified already.
    static func keyID(of token: String) -> String? {
        guard let first = token.split(separator: ".", maxSplits: 1).first,
              let bytes = Base64URL.decode(first),
              let header = try? JSONDecoder().decode(KeyIDHeader.self, from: Data(bytes))
        else { return nil }
        return header.kid
    }

    /// Token expiry (epoch seconds) on the rooms' monotonic millisecond clock. The verifier's
    /// leeway applies here too, so a token accepted a few seconds after `exp` is not removed
    /// at the very next tick.
    func roomInstant(forExpiry exp: Int, now: Int64) -> RoomInstant {
        let seconds = Int64(exp) + Int64(verifier.leeway) - Int64(options.wallClock())
        let (ms, overflow) = seconds.multipliedReportingOverflow(by: 1000)
        if overflow { return seconds > 0 ? Int64.max / 2 : now }
        return now + ms
    }

    /// An SSRC nobody uses and nobody who left `retired`'s room used.
    /// Of several workers, one equal to this worker's index modulo their count, which is how its
    /// media finds this worker (`RoomServerWorkers`).
    private func newSSRC(avoiding retired: Set<UInt32>) -> UInt32 {
        let count = UInt32(workerCount), index = UInt32(workerIndex)
        while true {
            let candidate = options.ssrcCandidate()
            let base = candidate - candidate % count
            guard base <= UInt32.max - index else { continue }
            let ssrc = base + index
            if ssrc != 0, !usedSSRCs.contains(ssrc), !retired.contains(ssrc) { return ssrc }
        }
    }

    /// Fresh SRTP for a participant session, or nil when `media.srtp = no`.
    private func newCrypto() throws(SRTPError) -> ParticipantCrypto? {
        configuration.srtp ? try ParticipantCrypto() : nil
    }
}
