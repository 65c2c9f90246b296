import RoomModel
import RoomProtocol
import RoomSystem
import RoomTLS

// Signalling connections: a connection's `Session`, accepting it (TLS or plain), reading and
// framing what it sends (the per-connection request rate, decoding, routing `hello` to admission
// and the rest to dispatch), writing frames and error replies with back-pressure, and closing it:
// with the reconnect grace when the network lost it, at once when the server cut it off.
// Participants lost with their connection are handed to their room here (`drainLost`).

extension RoomServer {
    final class Session {
        let connection: any StreamTransport
        var decoder: FrameDecoder
        var lastHeardMs: Int64
        var participant: Participant?
        var windowStartMs: Int64
        var windowCount = 0
        var closing = false
        /// When it was accepted: the `hello` deadline counts from here.
        let acceptedMs: Int64
        /// The peer's IP address as text, made once (the per-address count of waiting connections).
        let host: String
        /// Accepted, not joined, not closing: counted in `waitingByHost` and queued in
        /// `waitingQueue` until `stopWaiting`.
        var waitingToJoin = true
        /// Its `hello` named a room another worker holds: the connection goes there once the
        /// frames read with the hello are known (`readAvailable`).
        var handOff: (worker: Int, hello: SignalMessage.Hello, requestID: Int?)?

        init(connection: any StreamTransport, maxFrameSize: Int, now: Int64) {
            self.connection = connection
            host = connection.peerAddress.host
            decoder = FrameDecoder(maxFrameSize: maxFrameSize)
            lastHeardMs = now
            windowStartMs = now
            acceptedMs = now
        }
    }

    /// A session on its way from one worker's thread to another's: nothing touches it between
    /// `handOff` and `adopt`, hence `@unchecked`.
    struct SessionParcel: @unchecked Sendable {
        let session: Session
        let hello: SignalMessage.Hello
        let requestID: Int?
        let frames: [[UInt8]]
        let framingError: FrameError?
    }

    func accept(_ stream: StreamConnection, tls: Bool) {
        if isShuttingDown { stream.close(); return }
        if let refusal = refusal(of: stream) {
            statistics.connectionsRefused += 1
            // Once per burst: a flood must not turn into a flood of log lines.
            let now = nowMs()
            if now - lastRefusalLogMs > 10_000 {
                lastRefusalLogMs = now
                Log.warning("roomserver: refusing connections (\(refusal)); \(statistics.connectionsRefused) refused so far")
            }
            stream.close()
            return
        }
        let connection: any StreamTransport
        if tls {
            guard let tlsContext else { stream.close(); return }
            do {
                connection = try TLSConnection(stream: stream, role: .server(tlsContext), loop: loop)
            } catch {
                Log.warning("roomserver: \(stream.peerAddress): \(error)")
                stream.close()
                return
            }
        } else {
            connection = stream
        }
        statistics.connectionsAccepted += 1
        let session = Session(connection: connection, maxFrameSize: options.maxFrameSize, now: nowMs())
        keepSession(session)
        waitingByHost[session.host, default: 0] += 1
        waitingQueue.append(session)
        watch(session)
    }

    /// Sessions held here, and the group's count of open connections with them.
    func keepSession(_ s: Session) {
        sessions[ObjectIdentifier(s.connection)] = s
        workers?.openConnections.add(1, ordering: .relaxed)
    }

    func forgetSession(_ key: ObjectIdentifier) {
        if sessions.removeValue(forKey: key) != nil { workers?.openConnections.subtract(1, ordering: .relaxed) }
    }

    /// Open connections in the process, on every worker.
    var openConnectionCount: Int { workers?.openConnections.load(ordering: .relaxed) ?? sessions.count }

    private func watch(_ session: Session) {
        let connection = session.connection
        connection.setEventHandler { [unowned self, weak session] event in
            guard let session else { return }
            switch event {
            case .readable: self.readAvailable(session)
            case let .closed(error): self.connectionEnded(session, why: "\(error)")
            case .connected, .drained: break
            }
            self.drainLost()
        }
    }

    private func readAvailable(_ s: Session) {
        guard !s.closing else { return }
        let result: StreamConnection.ReadResult
        do {
            result = try s.connection.read(into: readBuffer)
        } catch {
            connectionEnded(s, why: "\(error)")
            return
        }
        switch result {
        case .wouldBlock:
            return
        case .endOfStream:
            connectionEnded(s, why: "closed by the peer")
        case let .bytes(n):
            s.lastHeardMs = nowMs()
            var frames: [[UInt8]] = []
            var framingError: FrameError?
            do {
                try s.decoder.feed(UnsafeRawBufferPointer(rebasing: readBuffer[0 ..< n]), into: &frames)
            } catch {
                framingError = error
            }
            processFrames(frames, framingError: framingError, from: s)
        }
    }

    /// The frames read from `s` and the framing error after them, if any: processed in order,
    /// until the session closes or its hello names a room another worker holds (then the rest
    /// go with it).
    private func processFrames(_ frames: [[UInt8]], framingError: FrameError?, from s: Session) {
        for (index, frame) in frames.enumerated() {
            if s.closing { return }
            process(frame, from: s)
            if s.handOff != nil {
                // Not from here: the connection's own code (TLS's read loop) is on the stack
                // below this handler and touches it after the handler returns. Deaf until
                // then; what arrives meanwhile waits in the socket and TLS buffers and moves.
                s.connection.setEventHandler(nil)
                let rest = Array(frames[(index + 1)...])
                loop.schedule(after: .zero) { [weak self] in self?.handOff(s, frames: rest, framingError: framingError) }
                return
            }
        }
        if let framingError, !s.closing {
            statistics.framingErrors += 1
            Log.info("roomserver: \(s.connection.peerAddress): \(framingError); closing")
            refuse(s, .malformedMessage, framingError.description, requestID: nil, close: true)
        }
    }

    /// The peer closed or reset the connection.
    private func connectionEnded(_ s: Session, why: String) {
        if let p = s.participant {
            Log.info("roomserver: participant \(p.id) connection lost: \(why)")
        } else if let tls = s.connection as? TLSConnection, !tls.isHandshakeComplete {
            // Debug only: a scan or a flood of bad handshakes must not flood the log.
            Log.debug("roomserver: \(s.connection.peerAddress): \(why)")
        }
        closeSession(s, flush: false, grace: true)
    }

    /// Closes a connection (after flushing what is queued, when `flush`). A participant still
    /// attached loses its connection: with `grace` (the network lost it: reset, end of stream,
    /// silence) it keeps its seat, unannounced, for the reconnect grace
    /// (`RoomConfig.reconnectGraceMs`; docs/protocol.md, "Keepalive and dead peers"): a blip
    /// must not flash "left" on every screen. Without it (the server cut the peer off for
    /// what it sent or failed to read) it is removed at once with reason `timeout`.
    func closeSession(_ s: Session, flush: Bool, grace: Bool = false) {
        guard !s.closing else { return }
        s.closing = true
        stopWaiting(s)
        if let p = s.participant {
            s.participant = nil
            p.session = nil
            if grace && p.room.room.config.reconnectGraceMs > 0 && !isShuttingDown {
                p.lostAtMs = nowMs()
                // Nothing is sent to the dead address meanwhile; a resume binds a new one.
                if let address = p.mediaAddress, byAddress[address] === p { byAddress[address] = nil }
                p.mediaAddress = nil
            } else {
                lostQueue.append(p.id)
            }
        }
        if flush {
            s.connection.closeAfterFlush()
            if s.connection.isOpen {
                loop.schedule(after: .milliseconds(options.closeFlushTimeoutMs)) { [weak s] in s?.connection.close() }
            }
        } else {
            s.connection.close()
        }
        if !s.connection.isOpen { forgetSession(ObjectIdentifier(s.connection)) }
    }

    func reapSessions() {
        for (key, s) in sessions where s.closing && !s.connection.isOpen { forgetSession(key) }
    }

    // MARK: - Between workers

    /// Gives `s`, whose hello named a room another worker holds, to that worker with the
    /// frames read after the hello: off this loop, posted to the other one, which joins it
    /// (`adopt`). Still open, it stays in the group's connection count. Runs from a timer of
    /// its own, so that nothing of the connection is on the stack when it leaves.
    private func handOff(_ s: Session, frames: [[UInt8]], framingError: FrameError?) {
        guard let workers, let (target, hello, requestID) = s.handOff else { return }
        let key = ObjectIdentifier(s.connection)
        // Closed meanwhile (shutdown): `closeSession` has it, and its count.
        guard sessions[key] === s, !s.closing else { return }
        sessions[key] = nil
        guard s.connection.leaveLoop() else {
            // Closed or failing meanwhile: nothing to hand over.
            dropInTransit(s)
            return
        }
        let parcel = SessionParcel(session: s, hello: hello, requestID: requestID, frames: frames, framingError: framingError)
        if !workers.perform(on: target, { server in server.adopt(parcel) }) {
            // Not running (a worker that failed to start takes the process down with it).
            dropInTransit(s)
        }
    }

    /// Closes a session between workers (in no worker's `sessions`) and takes it out of the
    /// group's connection count.
    private func dropInTransit(_ s: Session) {
        s.connection.close()
        workers?.openConnections.subtract(1, ordering: .relaxed)
    }

    /// A session handed over by another worker, on this worker's thread: watched by this loop,
    /// then its hello joined here and the frames that came with it processed.
    func adopt(_ parcel: SessionParcel) {
        let s = parcel.session
        do {
            try s.connection.joinLoop(loop)
        } catch {
            Log.warning("roomserver: \(s.connection.peerAddress): cannot take the connection over: \(error)")
            dropInTransit(s)
            return
        }
        s.handOff = nil
        sessions[ObjectIdentifier(s.connection)] = s
        watch(s)
        join(s, parcel.hello, requestID: parcel.requestID)
        processFrames(parcel.frames, framingError: parcel.framingError, from: s)
        drainLost()
    }

    /// Removes participants whose connections were lost, outside any effect loop.
    func drainLost() {
        while !lostQueue.isEmpty {
            let id = lostQueue.removeFirst()
            guard let p = participants[id] else { continue }
            let effects: [RoomEffect]
            do {
                effects = try p.room.room.handle(.connectionLost(id), now: nowMs())
            } catch {
                // Closed room: drop the bookkeeping only.
                detach(p)
                continue
            }
            execute(effects, in: p.room)
        }
    }

    /// Seats whose reconnect grace ran out (checked on the tick): now the room hears of it,
    /// `participant_left {reason: "timeout"}`. In id order, so the effects are deterministic.
    func expireGrace(now: Int64) {
        for p in participants.values.sorted(by: { $0.id < $1.id }) where p.session == nil {
            guard let lost = p.lostAtMs, now - lost >= p.room.room.config.reconnectGraceMs else { continue }
            p.lostAtMs = nil
            Log.info("roomserver: participant \(p.id) did not come back within \(p.room.room.config.reconnectGraceMs) ms")
            lostQueue.append(p.id)
        }
    }

    // MARK: - Frames

    private func process(_ payload: [UInt8], from s: Session) {
        statistics.framesReceived += 1
        let now = nowMs()
        if now - s.windowStartMs >= 1000 {
            s.windowStartMs = now
            s.windowCount = 0
        }
        s.windowCount += 1
        if s.windowCount > options.maxRequestsPerSecond {
            statistics.floodDisconnects += 1
            Log.warning("roomserver: \(s.connection.peerAddress): more than \(options.maxRequestsPerSecond) requests/s; cut off")
            refuse(s, .rateLimited, "more than \(options.maxRequestsPerSecond) requests per second", requestID: nil, close: true)
            return
        }

        let message: SignalMessage
        do {
            message = try SignalMessage.decode(payload)
        } catch {
            let peek = SignalMessage.peek(payload)
            if s.participant == nil, peek.type == "hello", let version = peek.protocolVersion, version != roomProtocolVersion {
                refuseVersion(s, version, requestID: peek.id)
                return
            }
            statistics.badMessages += 1
            refuse(s, error.code, error.description, requestID: peek.id, close: false)
            return
        }
        if message.body.direction == .serverToClient {
            refuse(s, .unexpectedMessage, "\"\(message.body.typeName)\" is sent by servers only", requestID: message.id, close: false)
            return
        }
        if case let .hello(hello) = message.body {
            if s.participant != nil {
                refuse(s, .alreadyJoined, "this connection has joined already", requestID: message.id, close: false)
            } else {
                join(s, hello, requestID: message.id)
            }
            return
        }
        guard let p = s.participant else {
            refuse(s, .notJoined, "send hello first", requestID: message.id, close: false)
            return
        }
        request(message, from: p, session: s)
    }

    func write(_ message: SignalMessage, to s: Session) {
        let bytes: [UInt8]
        do {
            bytes = try FrameEncoder(maxFrameSize: options.maxFrameSize).encode(message)
        } catch {
            Log.error("roomserver: cannot encode \(message.body.typeName): \(error)")
            return
        }
        write(bytes, to: s)
    }

    func write(_ bytes: [UInt8], to s: Session) {
        guard !s.closing else { return }
        switch s.connection.write(bytes) {
        case .accepted:
            break
        case .backpressure:
            statistics.backpressureDisconnects += 1
            Log.warning("roomserver: \(s.connection.peerAddress) does not read (\(s.connection.bufferedByteCount) bytes queued); cut off")
            closeSession(s, flush: false)
        case .closed:
            closeSession(s, flush: false, grace: true)
        }
    }

    func refuse(_ s: Session, _ code: ErrorCode, _ text: String, requestID: Int?, close: Bool) {
        statistics.requestsRefused += 1
        write(SignalMessage(.error(.init(code: code, message: text, requestID: requestID))), to: s)
        if close { closeSession(s, flush: true) }
    }

    /// The same with the error frame already encoded (one refusal sent to many), then closed.
    func refuseAndClose(_ s: Session, encodedError frame: [UInt8]) {
        statistics.requestsRefused += 1
        write(frame, to: s)
        closeSession(s, flush: true)
    }

    func refuseVersion(_ s: Session, _ version: Int, requestID: Int?) {
        statistics.joinsRefused += 1
        refuse(s, .unsupportedVersion, "this server speaks protocol \(roomProtocolVersion), not \(version)",
               requestID: requestID, close: true)
    }
}
