import RoomMedia
import RoomMediaCrypto
import RoomProtocol
import RoomSystem

/// The UDP half of a session (docs/protocol.md section 6): one socket per joined connection,
/// binding datagrams first and every few seconds, RTP out from the outgoing ring and RTP in
/// to the incoming ring. Nothing here allocates per packet: packets are serialized into and
/// received from two buffers allocated with the session.
extension RoomSession {
    /// Datagrams handled per wake-up (level-triggered: the rest comes next iteration).
    static let datagramsPerWake = 64

    func startMedia(_ welcome: SignalMessage.Welcome) {
        closeMedia()
        guard let server = serverAddress else { return }
        ssrc = welcome.ssrc
        do {
            if let keys = welcome.mediaEncryption {
                mediaCrypto = (try SRTPSession(key: keys.uplink, direction: .protect),
                               try SRTPSession(key: keys.downlink, direction: .unprotect))
                mediaEncryption = keys
            } else if configuration.requireMediaEncryption {
                Log.error("room: the server offers plain RTP (no SRTP keys in welcome) and media encryption is required: no media")
                return
            } else {
                Log.warning("room: media is not encrypted (the server sent no SRTP keys)")
            }
        } catch {
            Log.error("room: cannot set up SRTP: \(error)")
            return
        }
        mediaKey = welcome.mediaKey
        do {
            let destination = try SocketAddress(ip: server.host, port: welcome.udpPort)
            let socket = try UDPSocket(bindingTo: server.family == .ipv6 ? .ipv6Any(port: 0) : .ipv4Any(port: 0))
            try socket.onReadable(loop: loop) { [weak self] socket in self?.receiveDatagrams(socket) }
            udp = socket
            mediaDestination = destination
        } catch {
            Log.error("room: cannot open the media socket: \(error)")
            return
        }
        let now = monotonicNanoseconds()
        mediaStartNs = now
        lastBindingAnswerNs = 0
        sendBinding(now: now)
        scheduleBindingRetry(after: configuration.bindingRetryFirst)
    }

    /// Retries the binding datagram with a doubling wait until the server answers (see
    /// RoomSessionConfiguration.bindingRetryFirst); the session tick takes over once bound.
    private func scheduleBindingRetry(after wait: Duration) {
        cancelBindingRetry()
        bindingRetryWait = wait
        bindingRetryTimer = loop.schedule(after: wait) { [weak self] in
            guard let self else { return }
            self.bindingRetryTimer = nil
            guard self.udp != nil, self.lastBindingAnswerNs == 0 else { return }
            self.sendBinding(now: monotonicNanoseconds())
            self.scheduleBindingRetry(after: min(self.bindingRetryWait * 2, self.configuration.bindingRetryInterval))
        }
    }

    private func cancelBindingRetry() {
        if let timer = bindingRetryTimer { loop.cancel(timer) }
        bindingRetryTimer = nil
    }

    func closeMedia() {
        cancelBindingRetry()
        udp?.close()
        udp = nil
        mediaDestination = nil
        mediaKey = nil
        mediaCrypto = nil
        mediaEncryption = nil
        departedSSRCs = []
        bindingCookie = nil
        challengesAnswered = 0
        if isMediaPathUp {
            isMediaPathUp = false
            emit(.mediaPathChanged(up: false))
        }
    }

    func mediaTick(now: UInt64) {
        guard udp != nil else { return }
        // Before the first answer the retry timer sends them.
        if lastBindingAnswerNs != 0 && now &- lastBindingSentNs >= configuration.bindingInterval.monotonicNanosecondCount {
            sendBinding(now: now)
        }
        let lastHeard = lastBindingAnswerNs == 0 ? mediaStartNs : lastBindingAnswerNs
        if isMediaPathUp && now &- lastHeard >= configuration.mediaSilenceTimeout.monotonicNanosecondCount {
            isMediaPathUp = false
            Log.warning("room: media path silent for \(configuration.mediaSilenceTimeout)")
            emit(.mediaPathChanged(up: false))
        }
    }

    /// One binding datagram (authenticated with the media key, timestamp strictly growing).
    func sendBinding(now: UInt64) {
        guard let udp, let destination = mediaDestination, let key = mediaKey,
              let me = joinInfo?.participantID else { return }
        lastBindingSentNs = now
        let timestamp = max(now / 1_000_000, lastBindingTimestampMs &+ 1)
        lastBindingTimestampMs = timestamp
        do {
            let n = try BindingDatagram(participantID: me, timestampMs: timestamp, cookie: bindingCookie)
                .write(into: sendBuffer, key: key)
            if try udp.send(UnsafeRawBufferPointer(rebasing: sendBuffer[0 ..< n]), to: destination) {
                statistics.bindingsSent += 1
            }
        } catch {
            Log.warning("room: binding datagram to \(destination): \(error)")
        }
    }

    /// Drains the outgoing ring (woken by `outgoingSignal`). Every packet is taken, so the
    /// audio thread never finds the ring full; those that may not be sent are counted.
    func drainOutgoing() {
        let sending = isSendingMedia
        let muted = (localParticipant?.muted ?? false) || isSelfMuted
        let onStage = localParticipant?.stage == .onStage
        while var packet = outgoing.pop() {
            guard sending, let udp, let destination = mediaDestination else {
                if phase != .joined || udp == nil {
                    statistics.droppedNotConnected += 1
                } else if !onStage {
                    statistics.droppedNotOnStage += 1
                } else if muted {
                    statistics.droppedMuted += 1
                } else {
                    statistics.droppedNotConnected += 1
                }
                continue
            }
            // The engine's timestamp is kept (the server forwards unchanged); the sequence
            // counts sent packets only (see `sequence`), and the SSRC is the server's.
            packet.ssrc = ssrc
            packet.sequenceNumber = sequence
            do {
                var n = try packet.serializeRTP(into: sendBuffer)
                if let uplink = mediaCrypto?.uplink {
                    guard let protected = uplink.protect(sendBuffer, length: n) else {
                        statistics.srtpProtectFailures += 1
                        statistics.droppedSendFailed += 1
                        sequence &+= 1
                        continue
                    }
                    n = protected
                }
                if try udp.send(UnsafeRawBufferPointer(rebasing: sendBuffer[0 ..< n]), to: destination) {
                    statistics.packetsSent += 1
                } else {
                    statistics.droppedSendFailed += 1
                }
            } catch {
                statistics.droppedSendFailed += 1
            }
            // A packet that failed to leave is a loss the listener should see and conceal.
            sequence &+= 1
        }
    }

    func receiveDatagrams(_ socket: UDPSocket) {
        for _ in 0 ..< Self.datagramsPerWake {
            let datagram: UDPSocket.Datagram?
            do {
                datagram = try socket.receive(into: receiveBuffer)
            } catch {
                Log.warning("room: media socket: \(error)")
                return
            }
            guard let datagram else { return }
            guard datagram.source == mediaDestination else {
                statistics.foreignDatagrams += 1
                continue
            }
            let bytes = UnsafeRawBufferPointer(rebasing: receiveBuffer[0 ..< datagram.count])
            if datagram.truncated || bytes.isEmpty {
                statistics.garbageDatagrams += 1
                continue
            }
            let first = bytes[0]
            if first & 0xC0 == 0x80 {
                receiveRTP(datagram.count)
            } else if BindingDatagram.looksLikeBinding(bytes) {
                receiveBinding(bytes)
            } else {
                statistics.garbageDatagrams += 1
            }
        }
    }

    /// RTP or SRTP in `receiveBuffer[0..<received]`, unprotected there in place.
    private func receiveRTP(_ received: Int) {
        let arrival = mediaClockSamples(nanoseconds: monotonicNanoseconds())
        var length = received
        if let downlink = mediaCrypto?.downlink {
            if received >= 12, !departedSSRCs.isEmpty {
                let b = receiveBuffer
                let ssrc = UInt32(b[8]) << 24 | UInt32(b[9]) << 16 | UInt32(b[10]) << 8 | UInt32(b[11])
                if departedSSRCs.contains(ssrc) {
                    statistics.srtpReplays += 1
                    return
                }
            }
            switch downlink.unprotect(receiveBuffer, length: received) {
            case let .rtp(plain): length = plain
            case .authenticationFailure:
                statistics.srtpAuthenticationFailures += 1
                return
            case .replay:
                statistics.srtpReplays += 1
                return
            case .malformed:
                statistics.garbageDatagrams += 1
                return
            }
        }
        let bytes = UnsafeRawBufferPointer(rebasing: receiveBuffer[0 ..< length])
        let packet: MediaPacket
        do {
            packet = try MediaPacket(rtp: bytes, arrivalSamples: arrival)
        } catch {
            statistics.garbageDatagrams += 1
            return
        }
        if incoming.push(packet) {
            statistics.packetsReceived += 1
        } else {
            statistics.droppedIncomingRingFull += 1
        }
    }

    private func receiveBinding(_ bytes: UnsafeRawBufferPointer) {
        guard let key = mediaKey,
              let answer = try? BindingDatagram.parse(bytes, key: key),
              answer.participantID == BindingDatagram.serverParticipantID
        else {
            statistics.invalidBindingDatagrams += 1
            return
        }
        let now = monotonicNanoseconds()
        if answer.isChallenge {
            // The server has not seen this address prove itself: echo its cookie from here.
            statistics.bindingChallenges += 1
            bindingCookie = answer.cookie
            if challengesAnswered < 3 {
                challengesAnswered += 1
                sendBinding(now: now)
            }
            return
        }
        if let cookie = answer.cookie { bindingCookie = cookie }
        challengesAnswered = 0
        let nowMs = now / 1_000_000
        statistics.bindingAnswers += 1
        lastBindingAnswerNs = now
        cancelBindingRetry()
        if answer.timestampMs <= nowMs { statistics.lastMediaRTTMs = Int(nowMs - answer.timestampMs) }
        if !isMediaPathUp {
            isMediaPathUp = true
            emit(.mediaPathChanged(up: true))
        }
    }
}
