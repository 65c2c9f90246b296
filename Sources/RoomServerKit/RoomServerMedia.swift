import RoomMedia
import RoomMediaCrypto
import RoomProtocol
import RoomSystem

// The media forwarder, the hot path: datagrams from the one UDP socket, bindings (budgets, MAC,
// replay guard, address cookies) that move a participant's media address, and RTP/SRTP checked,
// unprotected, rate-limited, level-read and forwarded to the room's other members, re-protected
// per listener, in the server's preallocated buffers. An extension rather than a type of its own:
// every packet reads and writes the server's statistics, participants and address map, and a
// separate forwarder object would put a reference hop between them and the packet.

extension RoomServer {
    func mediaReadable(_ socket: UDPSocket) {
        for _ in 0 ..< 64 {
            let datagram: UDPSocket.Datagram?
            do {
                datagram = try socket.receive(into: datagramBuffer)
            } catch {
                Log.warning("roomserver: media socket: \(error)")
                return
            }
            guard let datagram else { return }
            statistics.datagramsReceived += 1
            if datagram.truncated {
                statistics.dropped.truncated += 1
                continue
            }
            handleDatagram(datagram.count, from: datagram.source, socket: socket)
        }
    }

    /// The datagram is `datagramBuffer[0..<count]` (SRTP is unprotected there, in place).
    private func handleDatagram(_ count: Int, from source: SocketAddress, socket: UDPSocket) {
        let bytes = UnsafeRawBufferPointer(rebasing: datagramBuffer[0 ..< count])
        guard let first = bytes.first else {
            statistics.dropped.garbage += 1
            return
        }
        if BindingDatagram.looksLikeBinding(bytes) {
            handleBinding(bytes, from: source, socket: socket)
        } else if first & 0xC0 == 0x80 {
            handleRTP(count, from: source, socket: socket)
        } else {
            statistics.dropped.garbage += 1
        }
    }

    /// A binding datagram: budgets first (per source address, then per claimed participant),
    /// then the MAC and the replay guard, then the address cookie. Media moves to `source` only
    /// when the binding proves it receives there (docs/protocol.md, "Binding/keepalive
    /// datagram"); otherwise the answer is a challenge carrying that address's cookie, no
    /// larger than the binding, at most as often as the budgets allow.
    private func handleBinding(_ bytes: UnsafeRawBufferPointer, from source: SocketAddress, socket: UDPSocket) {
        let now = nowMs()
        let slot = Int(UInt(bitPattern: source.hashValue) % UInt(sourceBindingBudgets.count))
        guard sourceBindingBudgets[slot].take(now: now, BindingBudget.perSource) else {
            statistics.dropped.bindingRateLimited += 1
            return
        }
        guard let claimed = try? BindingDatagram.claimedParticipantID(bytes), let p = participants[claimed] else {
            statistics.dropped.badBinding += 1
            return
        }
        guard p.bindingBudget.take(now: now, BindingBudget.perParticipant) else {
            statistics.dropped.bindingRateLimited += 1
            return
        }
        guard let binding = try? BindingDatagram.parse(bytes, key: p.mediaKey) else {
            statistics.dropped.badBinding += 1
            return
        }
        guard p.replayGuard.accept(binding.timestampMs, receiverNowMs: now) else {
            statistics.dropped.bindingReplay += 1
            return
        }
        let address = Array(source.description.utf8)
        let epoch = UInt64(max(now, 0)) / Self.cookieEpochMs
        let cookie = AddressCookie.derive(secret: cookieSecret, epoch: epoch, participantID: p.id, address: address)
        let proven = p.mediaAddress == source || binding.cookie.map {
            $0 == cookie || $0 == AddressCookie.derive(secret: cookieSecret, epoch: epoch &- 1, participantID: p.id, address: address)
        } == true
        guard proven else {
            statistics.bindingChallenges += 1
            let challenge = BindingDatagram(participantID: BindingDatagram.serverParticipantID, timestampMs: binding.timestampMs,
                                            cookie: cookie, isChallenge: true)
            guard let n = try? challenge.write(into: replyBuffer, key: p.mediaKey) else { return }
            sendDatagram(UnsafeRawBufferPointer(rebasing: replyBuffer[0 ..< n]), to: source, socket: socket)
            return
        }
        if p.mediaAddress != source {
            if let old = p.mediaAddress, byAddress[old] === p { byAddress[old] = nil }
            if let previous = byAddress[source], previous !== p { previous.mediaAddress = nil }
            byAddress[source] = p
            p.mediaAddress = source
            Log.debug("roomserver: participant \(p.id) media address \(source)")
        }
        p.lastMediaMs = nowMs()
        statistics.bindingsAccepted += 1
        let answer = BindingDatagram(participantID: BindingDatagram.serverParticipantID, timestampMs: binding.timestampMs,
                                     cookie: cookie)
        guard let n = try? answer.write(into: replyBuffer, key: p.mediaKey) else { return }
        sendDatagram(UnsafeRawBufferPointer(rebasing: replyBuffer[0 ..< n]), to: source, socket: socket)
    }

    /// An RTP or SRTP packet in `datagramBuffer[0..<received]`.
    ///
    /// SRTP authenticates the RTP header but leaves it readable, so the address and SSRC checks
    /// come first; the publisher's budget is charged after the tag has verified (see below), and
    /// the RFC 6464 level is read after it too (a forged level could otherwise steer the top-N
    /// selection). A flood with a publisher's address and SSRC spoofed costs a tag check per
    /// packet (~1 µs), never the publisher's budget.
    private func handleRTP(_ received: Int, from source: SocketAddress, socket: UDPSocket) {
        guard let p = byAddress[source] else {
            statistics.dropped.unknownAddress += 1
            return
        }
        guard received >= RTPPacket.fixedHeaderSize else {
            statistics.dropped.malformedRTP += 1
            return
        }
        let claimedSSRC = UInt32(datagramBuffer[8]) << 24 | UInt32(datagramBuffer[9]) << 16
            | UInt32(datagramBuffer[10]) << 8 | UInt32(datagramBuffer[11])
        guard claimedSSRC == p.ssrc else {
            statistics.dropped.wrongSSRC += 1
            return
        }
        let now = nowMs()
        // The budget is charged for packets that prove to be the publisher's: with SRTP after the
        // tag has verified (a flood with the publisher's address and SSRC spoofed would
        // otherwise spend its budget and silence it); plain RTP cannot tell, so before.
        if p.crypto == nil {
            guard p.mediaAllowance.take(bytes: received, now: now, limits: configuration.limits) else {
                statistics.dropped.rateLimited += 1
                return
            }
        }
        var length = received
        if let crypto = p.crypto {
            switch crypto.uplink.unprotect(datagramBuffer, length: received) {
            case let .rtp(plain): length = plain
            case .authenticationFailure:
                statistics.dropped.srtpAuthentication += 1
                return
            case .replay:
                statistics.dropped.srtpReplay += 1
                return
            case .malformed:
                statistics.dropped.malformedRTP += 1
                return
            }
            guard p.mediaAllowance.take(bytes: received, now: now, limits: configuration.limits) else {
                statistics.dropped.rateLimited += 1
                return
            }
        }
        let bytes = UnsafeRawBufferPointer(rebasing: datagramBuffer[0 ..< length])
        guard let packet = try? RTPPacket.parse(bytes) else {
            statistics.dropped.malformedRTP += 1
            return
        }
        p.lastMediaMs = now
        let state = p.room
        guard p.session != nil else {
            // Its signalling is gone (reconnect grace): it cannot be told about the room, so
            // the room does not hear it either until it is back.
            statistics.dropped.disconnected += 1
            return
        }
        if let level = packet.audioLevel {
            p.level = level.level
            state.room.updateAudioLevel(p.id, level: level.level, voice: level.voiceActivity, now: now)
        }
        guard state.room.mayPublish(p.id) else {
            statistics.dropped.notPublishing += 1
            p.rebaseSequence = true
            return
        }
        guard state.room.isForwarded(p.id) else {
            // Not among the loudest `top_n`: dropped on purpose. The listeners must not read
            // the gap as loss (they reported it, and every publisher's encoder went to SILK
            // with 10 % expected loss for the rest of a four-party call: issue 27), so the
            // next forwarded packet follows the last one forwarded.
            statistics.dropped.notForwarded += 1
            p.rebaseSequence = true
            return
        }
        statistics.packetsForwarded += 1
        state.statistics.packetsForwarded += 1
        rebaseSequence(of: p, packet: packet)
        let idle = options.mediaIdleTimeoutMs
        for other in state.members where other !== p {
            guard let address = other.mediaAddress, other.session != nil, now - other.lastMediaMs <= idle else { continue }
            if sendBatch.isFull { sendForwarded(socket: socket) }
            if let downlink = other.crypto?.downlink {
                // Hop by hop: each listener gets the packet protected with its own key, in its
                // own slot (the batch holds every copy until it is sent).
                let start = sendBatch.count * Self.forwardSlotSize
                let slot = UnsafeMutableRawBufferPointer(rebasing: forwardBuffer[start ..< start + Self.forwardSlotSize])
                slot.baseAddress!.copyMemory(from: bytes.baseAddress!, byteCount: length)
                guard let n = downlink.protect(slot, length: length) else {
                    statistics.sendFailures += 1
                    continue
                }
                sendBatch.append(UnsafeRawBufferPointer(rebasing: slot[0 ..< n]), to: address)
            } else {
                sendBatch.append(bytes, to: address)
            }
        }
        sendForwarded(socket: socket)
    }

    /// Sends the forwarded copies gathered in `sendBatch`: one system call for the listeners.
    private func sendForwarded(socket: UDPSocket) {
        let queued = sendBatch.count
        guard queued > 0 else { return }
        let sent = socket.send(sendBatch)
        statistics.datagramsSent += sent
        statistics.sendFailures += queued - sent
    }

    /// Rewrites the (decrypted) packet's sequence number in `datagramBuffer` to continue the
    /// publisher's forwarded sequence after a resume or a deliberate drop
    /// (`Participant.rebaseSequence`); plain RTP too, which is otherwise forwarded as received.
    private func rebaseSequence(of p: Participant, packet: RTPPacket) {
        if p.rebaseSequence {
            p.rebaseSequence = false
            if let last = p.lastForwardedSequence { p.sequenceOffset = last &+ 1 &- packet.sequenceNumber }
        }
        let forwarded = packet.sequenceNumber &+ p.sequenceOffset
        if p.sequenceOffset != 0 {
            datagramBuffer[2] = UInt8(forwarded >> 8)
            datagramBuffer[3] = UInt8(truncatingIfNeeded: forwarded)
        }
        p.lastForwardedSequence = forwarded
    }

    private func sendDatagram(_ bytes: UnsafeRawBufferPointer, to address: SocketAddress, socket: UDPSocket) {
        do {
            if try socket.send(bytes, to: address) {
                statistics.datagramsSent += 1
            } else {
                statistics.sendFailures += 1
            }
        } catch {
            statistics.sendFailures += 1
        }
    }
}

/// A publisher's media budget: a token bucket per packets and per bytes, each holding one
/// second of its limit, refilled with the time since the last packet.
struct MediaAllowance {
    private var packets: Double = -1
    private var bytes: Double = 0
    private var lastMs: Int64 = 0

    /// Takes one packet of `count` bytes; false (and nothing taken) when either budget is out.
    mutating func take(bytes count: Int, now: Int64, limits: RoomServerLimits) -> Bool {
        let packetRate = Double(limits.mediaPacketsPerSecond), byteRate = Double(limits.mediaBytesPerSecond)
        if packets < 0 {
            packets = packetRate
            bytes = byteRate
        } else {
            let seconds = Double(max(0, now - lastMs)) / 1000
            packets = min(packetRate, packets + seconds * packetRate)
            bytes = min(byteRate, bytes + seconds * byteRate)
        }
        lastMs = now
        guard packets >= 1, bytes >= Double(count) else { return false }
        packets -= 1
        bytes -= Double(count)
        return true
    }
}

/// A token bucket for binding datagrams: `rate` a second, up to `burst` at once. A client sends
/// one every 5 s and one more per challenge; the budgets are many times that.
struct BindingBudget {
    struct Limit {
        var rate: Double
        var burst: Double
    }
    static let perSource = Limit(rate: 20, burst: 40)
    static let perParticipant = Limit(rate: 10, burst: 20)

    private var tokens: Double
    private var lastMs: Int64 = 0

    init(_ limit: Limit) { tokens = limit.burst }

    mutating func take(now: Int64, _ limit: Limit) -> Bool {
        tokens = min(limit.burst, tokens + Double(max(now - lastMs, 0)) * limit.rate / 1000)
        lastMs = now
        guard tokens >= 1 else { return false }
        tokens -= 1
        return true
    }
}
