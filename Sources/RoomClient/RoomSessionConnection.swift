import RoomModel
import RoomProtocol
import RoomSystem
import RoomTLS

/// The signalling connection (TCP, TLS when configured): one attempt to open it, its events
/// (`hello` once connected), frames in and out, and its teardown. What a failed attempt or a
/// lost connection leads to is in RoomSessionRecovery.swift.
extension RoomSession {
    func attempt() {
        retryTimer = nil
        let endpoint = configuration.endpoints[reconnect.addressIndex % configuration.endpoints.count]
        let address: SocketAddress
        do {
            let addresses = try endpoint.resolve()
            address = addresses[reconnect.consecutiveFailures % addresses.count]  // a failure moves to the next one
        } catch {
            statistics.connectAttempts += 1
            attemptFailed("\(error)")
            return
        }
        serverAddress = address
        statistics.connectAttempts += 1
        phase = .connecting
        decoder = FrameDecoder(maxFrameSize: configuration.maxFrameSize)
        let connection: any StreamTransport
        do {
            let stream = try StreamConnection.connect(to: address, loop: loop)
            if let tls = configuration.tls {
                let context: TLSClientContext
                if let tlsContext { context = tlsContext } else {
                    do {
                        context = try TLSClientContext(settings: tls)
                    } catch {
                        // A missing or broken CA file does not mend itself: say so at once.
                        stream.close()
                        attemptFailed("\(error)", fatal: true)
                        return
                    }
                    tlsContext = context
                }
                connection = try TLSConnection(stream: stream, role: .client(context, serverName: endpoint.host), loop: loop)
            } else {
                connection = stream
            }
        } catch {
            attemptFailed("\(error)")
            return
        }
        connection.setEventHandler { [weak self, weak connection] event in
            guard let self, let connection else { return }
            self.handle(connection, event)
        }
        self.connection = connection
        handshakeTimer = loop.schedule(after: configuration.handshakeTimeout) { [weak self] in
            guard let self else { return }
            self.handshakeTimer = nil
            self.attemptFailed("no welcome from \(address) within \(self.configuration.handshakeTimeout)")
        }
    }

    private func handle(_ c: any StreamTransport, _ event: StreamConnection.Event) {
        guard c === connection else { return }
        switch event {
        case .connected:
            lastReceivedNs = monotonicNanoseconds()
            phase = .awaitingWelcome
            if let tls = c as? TLSConnection {
                let ms = tls.handshakeDuration.map { " in \(formatMilliseconds($0))" } ?? ""
                Log.info("room: signalling to \(c.peerAddress) over \(tls.sessionDescription), server certificate checked\(ms)")
            }
            let hello = SignalMessage.Hello(
                client: configuration.clientName, token: configuration.token, role: askedRole,
                previousParticipantID: previousParticipantID)
            if !send(SignalMessage(.hello(hello))) { attemptFailed("cannot send hello") }
        case .readable:
            readAvailable(c)
        case .drained:
            break
        case .closed(let error):
            // A certificate that fails its checks will fail the same way next time: report
            // `failed` with the reason now, so `roomctl status` shows it (the session keeps
            // trying, for the installer who is fixing the server meanwhile).
            if let tls = c as? TLSConnection, tls.failedCertificateChecks, phase != .joined {
                attemptFailed("\(error)", fatal: true)
            } else {
                connectionLost("\(error)")
            }
        }
    }

    private func readAvailable(_ c: any StreamTransport) {
        var frames: [[UInt8]] = []
        var ended = false
        var framingError: FrameError?
        for _ in 0 ..< 16 {
            let result: StreamConnection.ReadResult
            do {
                result = try readBuffer.withUnsafeMutableBytes { (raw) throws(SystemError) in try c.read(into: raw) }
            } catch {
                connectionLost("\(error)")
                return
            }
            guard case .bytes(let n) = result else {
                ended = result == .endOfStream
                break
            }
            do {
                try decoder.feed(readBuffer[0 ..< n], into: &frames)
            } catch {
                framingError = error
                break
            }
        }
        if !frames.isEmpty { lastReceivedNs = monotonicNanoseconds() }
        for frame in frames {
            // A handler may have closed or replaced the connection (removed, welcome error).
            guard c === connection else { return }
            handleFrame(frame)
        }
        guard c === connection else { return }
        if let framingError {
            connectionLost("framing error from server: \(framingError)")
        } else if ended {
            connectionLost("the server closed the connection")
        }
    }

    @discardableResult
    func send(_ message: SignalMessage) -> Bool {
        guard let connection else { return false }
        do {
            let bytes = try encoder.frame(try message.encode())
            return connection.write(bytes) == .accepted
        } catch {
            Log.error("room: cannot encode \(message.body.typeName): \(error)")
            return false
        }
    }

    private func handleFrame(_ frame: [UInt8]) {
        let message: SignalMessage
        do {
            message = try SignalMessage.decode(frame)
        } catch {
            statistics.malformedFrames += 1
            Log.warning("room: dropped a frame from the server: \(error)")
            return
        }
        if phase == .awaitingWelcome {
            handleHandshake(message)
        } else {
            handleMessage(message)
        }
    }

    /// Closes the TCP connection and the media socket, cancels per-connection timers and
    /// fails the requests still waiting for an answer. Silent (no state change).
    func teardownConnection() {
        if let connection {
            connection.setEventHandler(nil)
            connection.close()
        }
        connection = nil
        cancelTimer(&handshakeTimer)
        cancelTimer(&tickTimer)
        closeMedia()
        for (id, request) in pending.removeAll() {
            fail(id: id, type: request.type, completion: request.completion,
                 RoomRequestError(code: RoomRequestError.connectionLost, message: "the connection closed before an answer"))
        }
    }
}

/// "2.4 ms": a duration for a log line, to a tenth of a millisecond.
func formatMilliseconds(_ d: Duration) -> String {
    let tenths = (d.components.seconds * 10_000) + d.components.attoseconds / 100_000_000_000_000
    return "\(tenths / 10).\(tenths % 10) ms"
}
