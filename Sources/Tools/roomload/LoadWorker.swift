import Glibc
import RoomBase
import RoomMedia
import RoomMediaCrypto
import RoomProtocol
import RoomSystem
import RoomTLS

/// One synthetic participant: a signalling connection and a media socket, like roomd's.
final class LoadClient {
    let spec: ClientSpec
    var connection: (any StreamTransport)?
    var decoder = FrameDecoder()
    var udp: UDPSocket?
    var participantID: UInt32 = 0
    var ssrc: UInt32 = 0
    var mediaKey: MediaKey?
    /// SRTP when the server sent keys (like roomd): protects what it sends, unprotects what it gets.
    var uplink: SRTPSession?
    var downlink: SRTPSession?
    var welcomed = false
    /// When its TCP connect started (monotonic ns): the join time runs to its `welcome`.
    var connectStartNs: UInt64 = 0
    var bound = false
    /// The server's address cookie, echoed in every binding (docs/protocol.md).
    var cookie: AddressCookie?
    var onStage = false
    var countedReady = false
    var failed = false
    var nextPingNs: UInt64 = 0
    var nextBindingNs: UInt64 = 0
    var lastBindingMs: UInt64 = 0
    // Streamer state.
    var packet: UnsafeMutableRawBufferPointer?
    var packetLength = 0
    var sequence: UInt16 = 0
    var rtpTimestamp: UInt32 = 0
    var counter: UInt32 = 0
    var nextSendNs: UInt64 = 0
    var sentInWindow: UInt64 = 0
    var receivedInWindow: UInt64 = 0
    /// Packets received in the window from each participant index of the room (diagnostics).
    var receivedFrom: [UInt64]

    init(spec: ClientSpec, participants: Int) {
        self.spec = spec
        receivedFrom = Array(repeating: 0, count: participants)
    }

    var isReady: Bool { welcomed && bound && (!spec.streamer || onStage) }
}

/// Payload of every synthetic RTP packet, after the RTP header:
///   0  "RLD1"   4  send time, CLOCK_MONOTONIC ns (UInt64, host order: same host)
///   12 counter (UInt32)   16 sender's index in its room (UInt8)   17… zero padding up to the Opus-like payload size.
enum LoadPayload {
    static let magic: UInt32 = 0x3144_4C52 // "RLD1" read as little-endian UInt32
    static let minimumSize = 17
}

/// The clients of one thread and their event loop. Created inside the thread's body
/// (`EventLoop` and the sockets are not Sendable).
final class LoadWorker {
    let loop: EventLoop
    let plan: LoadPlan
    let clients: [LoadClient]
    let streamers: [LoadClient]
    private var waiting: [LoadClient]
    private var connecting = 0
    private var result = WorkerResult()
    private let readBuffer: UnsafeMutableRawBufferPointer
    private let tlsContext: TLSClientContext?
    private let datagramBuffer: UnsafeMutableRawBufferPointer
    private let bindingBuffer: UnsafeMutableRawBufferPointer
    /// A streamer's packet is copied here and protected (its own buffer keeps the plain
    /// template, rewritten in place for every send).
    private let protectBuffer: UnsafeMutableRawBufferPointer
    private let encoder = FrameEncoder()
    private var windowStart: UInt64 = 0
    private var windowEnd: UInt64 = 0
    // Hot counters kept out of the result struct.
    private let bins: UnsafeMutablePointer<UInt64>
    private var overflow: UInt64 = 0
    private var samples: UInt64 = 0
    private var sumNs: UInt64 = 0
    private var maxNs: UInt64 = 0

    init(plan: LoadPlan, specs: [ClientSpec]) throws(SystemError) {
        loop = try EventLoop()
        self.plan = plan
        clients = specs.map { LoadClient(spec: $0, participants: plan.participantsPerRoom) }
        streamers = clients.filter(\.spec.streamer)
        waiting = clients.reversed()
        readBuffer = .allocate(byteCount: 64 * 1024, alignment: 8)
        // One TLS context per worker: its connections share the worker's loop thread.
        tlsContext = try plan.tlsCAFile.map { (file) throws(SystemError) in try TLSClientContext(settings: TLSClientSettings(caFile: file)) }
        datagramBuffer = .allocate(byteCount: 2048, alignment: 8)
        bindingBuffer = .allocate(byteCount: 64, alignment: 8)
        protectBuffer = .allocate(byteCount: 2048 + SRTPSession.trailerRoom, alignment: 8)
        bins = .allocate(capacity: DelayHistogram.binCount)
        bins.initialize(repeating: 0, count: DelayHistogram.binCount)
        result.clients = clients.count
        result.streamers = streamers.count
    }

    deinit {
        readBuffer.deallocate()
        datagramBuffer.deallocate()
        bindingBuffer.deallocate()
        protectBuffer.deallocate()
        bins.deallocate()
        for c in clients { c.packet?.deallocate() }
    }

    /// Joins every client, streams until told to stop, returns the totals.
    func run() -> WorkerResult {
        startMoreConnections()
        // Pacing: a 1 ms tick sends whatever is due (the loop's timers have millisecond
        // resolution; each streamer keeps its own 10 ms schedule and phase).
        loop.schedule(after: .milliseconds(1), repeating: .milliseconds(1)) { [unowned self] in self.sendTick() }
        loop.schedule(after: .milliseconds(50), repeating: .milliseconds(50)) { [unowned self] in self.housekeeping() }
        do {
            try loop.run()
        } catch {
            result.failures.append("event loop: \(error)")
        }
        finish()
        return result
    }

    // MARK: - Signalling

    private func startMoreConnections() {
        while connecting < plan.maxConnecting, let client = waiting.popLast() {
            connecting += 1
            client.connectStartNs = monotonicNanoseconds()
            do {
                let stream = try StreamConnection.connect(to: plan.server, loop: loop)
                let connection: any StreamTransport = try tlsContext.map { (context) throws(SystemError) in
                    try TLSConnection(stream: stream, role: .client(context, serverName: plan.server.host), loop: loop)
                } ?? stream
                connection.setEventHandler { [unowned self, unowned client] event in self.signallingEvent(client, event) }
                client.connection = connection
            } catch {
                fail(client, "connect: \(error)")
            }
        }
    }

    private func signallingEvent(_ c: LoadClient, _ event: StreamConnection.Event) {
        switch event {
        case .connected:
            let hello = SignalMessage.Hello(
                client: "roomload/\(roomdVersion)", token: c.spec.token, role: c.spec.streamer ? .streamer : .audience)
            send(.hello(hello), to: c)
        case .readable:
            readSignalling(c)
        case .drained:
            break
        case let .closed(error):
            fail(c, "connection closed: \(error)")
        }
    }

    private func send(_ body: SignalMessage.Body, to c: LoadClient) {
        do {
            let frame = try encoder.frame(try SignalMessage(body).encode())
            _ = c.connection?.write(frame)
        } catch {
            fail(c, "encode \(body.typeName): \(error)")
        }
    }

    private func readSignalling(_ c: LoadClient) {
        guard let connection = c.connection else { return }
        let r: StreamConnection.ReadResult
        do {
            r = try connection.read(into: readBuffer)
        } catch {
            fail(c, "read: \(error)")
            return
        }
        switch r {
        case .wouldBlock: return
        case .endOfStream: fail(c, "server closed the connection")
        case let .bytes(n):
            var frames: [[UInt8]] = []
            do {
                try c.decoder.feed(UnsafeRawBufferPointer(rebasing: readBuffer[0 ..< n]), into: &frames)
            } catch {
                fail(c, "framing: \(error)")
            }
            for frame in frames {
                guard !c.failed else { return }
                do {
                    handle(try SignalMessage.decode(frame), c)
                } catch {
                    fail(c, "decode: \(error)")
                }
            }
        }
    }

    private func handle(_ message: SignalMessage, _ c: LoadClient) {
        switch message.body {
        case let .welcome(w):
            welcomed(c, w)
        case let .participantUpdated(info) where info.id == c.participantID:
            c.onStage = info.stage == .onStage
            checkReady(c)
        case let .error(e):
            fail(c, "error \(e.code): \(e.message)")
        case let .removed(reason, text):
            fail(c, "removed (\(reason.rawValue)): \(text)")
        default:
            break // pong, participant_joined, active_speakers …: nothing to do
        }
    }

    private func welcomed(_ c: LoadClient, _ w: SignalMessage.Welcome) {
        c.welcomed = true
        result.joinMs.append(Double(monotonicNanoseconds() - c.connectStartNs) / 1e6)
        c.participantID = w.participantID
        c.ssrc = w.ssrc
        c.mediaKey = w.mediaKey
        if let keys = w.mediaEncryption {
            do {
                c.uplink = try SRTPSession(key: keys.uplink, direction: .protect)
                c.downlink = try SRTPSession(key: keys.downlink, direction: .unprotect)
            } catch {
                fail(c, "SRTP: \(error)")
                return
            }
            result.srtpClients += 1
        }
        Shared.mediaPort.store(Int(w.udpPort), ordering: .relaxed)
        c.onStage = w.participants.first { $0.id == w.participantID }?.stage == .onStage
        connecting -= 1
        startMoreConnections()
        let now = monotonicNanoseconds()
        // Independent clients keep independent phases: spread the 5 s keepalives so 500 of
        // them never arrive at the server in one burst.
        c.nextPingNs = now + UInt64.random(in: 1_000_000_000 ... 5_000_000_000)
        do {
            let local: SocketAddress = plan.server.family == .ipv6 ? .ipv6Loopback(port: 0) : .ipv4Loopback(port: 0)
            let socket = try UDPSocket(bindingTo: local)
            // A connected UDP socket: send() without an address, and only the server's
            // datagrams are delivered.
            try connectDatagramSocket(socket.fileDescriptor, host: plan.server.host, port: w.udpPort)
            try socket.onReadable(loop: loop) { [unowned self, unowned c] _ in self.mediaReadable(c) }
            c.udp = socket
        } catch {
            fail(c, "media socket: \(error)")
            return
        }
        if c.spec.streamer { preparePacket(c) }
        sendBinding(c, now: now)
    }

    private func checkReady(_ c: LoadClient) {
        if !c.countedReady, c.isReady {
            c.countedReady = true
            Shared.ready.add(1, ordering: .relaxed)
        }
    }

    private func fail(_ c: LoadClient, _ why: String) {
        guard !c.failed else { return }
        c.failed = true
        if !c.welcomed { connecting -= 1; startMoreConnections() }
        let text = "room \(c.spec.room) participant \(c.spec.index): \(why)"
        if result.failures.count < 5 { result.failures.append(text) }
        Shared.noteError(text)
        Shared.failed.add(1, ordering: .relaxed)
        c.connection?.close()
        c.udp?.close()
    }

    // MARK: - Media

    private func sendBinding(_ c: LoadClient, now: UInt64) {
        guard let udp = c.udp, let key = c.mediaKey else { return }
        // Milliseconds of the monotonic clock, strictly increasing per participant.
        let ms = max(now / 1_000_000, c.lastBindingMs + 1)
        c.lastBindingMs = ms
        let binding = BindingDatagram(participantID: c.participantID, timestampMs: ms, cookie: c.cookie)
        guard let n = try? binding.write(into: bindingBuffer, key: key) else { return }
        if Glibc.send(udp.fileDescriptor, bindingBuffer.baseAddress, n, Int32(MSG_DONTWAIT)) < 0 { result.sendFailures += 1 }
        // Retry after 1 s until answered, then every 5 s (protocol: binding keepalive).
        c.nextBindingNs = now + (c.bound ? UInt64(BindingDatagram.interval) * 1_000_000_000 : 1_000_000_000)
    }

    private func preparePacket(_ c: LoadClient) {
        let header = RTPPacket(sequenceNumber: 0, timestamp: 0, ssrc: c.ssrc,
                               audioLevel: RTPAudioLevel(voiceActivity: true, level: plan.audioLevel))
        let payloadSize = max(plan.payloadBytes, LoadPayload.minimumSize)
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: header.serializedHeaderLength + payloadSize, alignment: 8)
        buffer.initializeMemory(as: UInt8.self, repeating: 0)
        c.packetLength = (try? header.serializeHeader(into: buffer)).map { $0 + payloadSize } ?? 0
        c.packet = buffer
        c.sequence = UInt16.random(in: 0 ... .max)
        c.rtpTimestamp = UInt32.random(in: 0 ... .max)
        // Spread the streamers' phases evenly over the period, as independent talkers would be.
        let phase = plan.packetIntervalNs * UInt64(c.spec.streamerOrdinal) / UInt64(max(plan.totalStreamers, 1))
        let now = monotonicNanoseconds()
        c.nextSendNs = now - now % plan.packetIntervalNs + plan.packetIntervalNs + phase
    }

    private func sendTick() {
        if Shared.stop.load(ordering: .relaxed) {
            loop.stop()
            return
        }
        if windowStart == 0 {
            windowStart = Shared.windowStart.load(ordering: .acquiring)
            windowEnd = Shared.windowEnd.load(ordering: .relaxed)
        }
        var now = monotonicNanoseconds()
        let interval = plan.packetIntervalNs
        for c in streamers where c.bound && c.onStage && !c.failed {
            guard now >= c.nextSendNs, let packet = c.packet, let udp = c.udp else { continue }
            if now - c.nextSendNs >= interval {
                // More than a period late: skip the missed packets rather than burst them.
                let missed = (now - c.nextSendNs) / interval
                if windowStart != 0 && now >= windowStart && now < windowEnd { result.skippedSends &+= missed }
                c.sequence &+= UInt16(truncatingIfNeeded: missed)
                c.rtpTimestamp &+= UInt32(truncatingIfNeeded: missed &* 480)
                c.nextSendNs += missed * interval
            }
            let base = packet.baseAddress!
            base.storeBytes(of: c.sequence.bigEndian, toByteOffset: 2, as: UInt16.self)
            base.storeBytes(of: c.rtpTimestamp.bigEndian, toByteOffset: 4, as: UInt32.self)
            let p = c.packetLength - max(plan.payloadBytes, LoadPayload.minimumSize)
            now = monotonicNanoseconds()
            base.storeBytes(of: LoadPayload.magic, toByteOffset: p, as: UInt32.self)
            base.storeBytes(of: now, toByteOffset: p + 4, as: UInt64.self)
            base.storeBytes(of: c.counter, toByteOffset: p + 12, as: UInt32.self)
            base.storeBytes(of: UInt8(truncatingIfNeeded: c.spec.index), toByteOffset: p + 16, as: UInt8.self)
            var sendFrom = UnsafeRawPointer(base), sendLength = c.packetLength
            if let uplink = c.uplink {
                protectBuffer.baseAddress!.copyMemory(from: base, byteCount: c.packetLength)
                guard let n = uplink.protect(protectBuffer, length: c.packetLength) else {
                    result.srtpFailures &+= 1
                    c.nextSendNs += interval
                    continue
                }
                sendFrom = UnsafeRawPointer(protectBuffer.baseAddress!)
                sendLength = n
            }
            if Glibc.send(udp.fileDescriptor, sendFrom, sendLength, Int32(MSG_DONTWAIT)) < 0 {
                result.sendFailures &+= 1
            } else if windowStart != 0 && now >= windowStart && now < windowEnd {
                c.sentInWindow &+= 1
            }
            c.sequence &+= 1
            c.rtpTimestamp &+= 480 // 10 ms at 48 kHz
            c.counter &+= 1
            c.nextSendNs += interval
        }
    }

    private func mediaReadable(_ c: LoadClient) {
        guard let udp = c.udp else { return }
        let fd = udp.fileDescriptor
        let buffer = datagramBuffer.baseAddress!
        for _ in 0 ..< 64 {
            let n = retryingEINTR { Glibc.recv(fd, buffer, datagramBuffer.count, Int32(MSG_DONTWAIT)) }
            if n < 0 { return } // EAGAIN (or ECONNREFUSED from an earlier send: consumed)
            let now = monotonicNanoseconds()
            guard n >= 12 else { continue }
            let b0 = datagramBuffer[0]
            if b0 & 0xC0 == 0x80 {
                var n = n
                if let downlink = c.downlink {
                    guard case let .rtp(plain) = downlink.unprotect(datagramBuffer, length: n) else {
                        result.srtpFailures &+= 1
                        continue
                    }
                    n = plain
                }
                // RTP: RoomMedia's parser finds our payload past the CSRCs and the extension.
                guard let rtp = try? RTPPacket.parse(UnsafeRawBufferPointer(start: buffer, count: n)) else { continue }
                let offset = rtp.payloadOffset
                guard rtp.payloadLength >= LoadPayload.minimumSize,
                      buffer.loadUnaligned(fromByteOffset: offset, as: UInt32.self) == LoadPayload.magic
                else { continue }
                let sent = buffer.loadUnaligned(fromByteOffset: offset + 4, as: UInt64.self)
                guard sent >= windowStart, sent < windowEnd, windowStart != 0 else { continue }
                c.receivedInWindow &+= 1
                let from = Int(buffer.loadUnaligned(fromByteOffset: offset + 16, as: UInt8.self))
                if from < c.receivedFrom.count { c.receivedFrom[from] &+= 1 }
                let delay = now >= sent ? now - sent : 0
                samples &+= 1
                sumNs &+= delay
                if delay > maxNs { maxNs = delay }
                let bin = delay / DelayHistogram.binNs
                if bin < UInt64(DelayHistogram.binCount) { bins[Int(bin)] &+= 1 } else { overflow &+= 1 }
            } else if b0 == 0x52, let key = c.mediaKey {
                guard let answer = try? BindingDatagram.parse(UnsafeRawBufferPointer(rebasing: datagramBuffer[0 ..< n]), key: key),
                      answer.participantID == BindingDatagram.serverParticipantID
                else { continue }
                if let cookie = answer.cookie { c.cookie = cookie }
                if answer.isChallenge {
                    sendBinding(c, now: now)   // echo the cookie from this address
                    continue
                }
                if !c.bound {
                    c.bound = true
                    c.nextBindingNs = now + UInt64.random(in: 1 ... UInt64(BindingDatagram.interval) * 1_000_000_000)
                    checkReady(c)
                }
            }
        }
    }

    /// Keepalives: ping every 5 s on signalling, binding every 5 s on media.
    private func housekeeping() {
        let now = monotonicNanoseconds()
        for c in clients where c.welcomed && !c.failed {
            if now >= c.nextPingNs {
                send(.ping(t: Int64(now / 1_000_000)), to: c)
                // Independent clients keep independent phases: spread the 5 s keepalives so 500 of
        // them never arrive at the server in one burst.
        c.nextPingNs = now + UInt64.random(in: 1_000_000_000 ... 5_000_000_000)
            }
            if now >= c.nextBindingNs { sendBinding(c, now: now) }
        }
    }

    // MARK: - Totals

    private func finish() {
        var h = DelayHistogram()
        for i in 0 ..< DelayHistogram.binCount { h.bins[i] = bins[i] }
        h.overflow = overflow
        h.samples = samples
        h.sumNs = sumNs
        h.maxNs = maxNs
        result.histogram = h
        // Expected: every packet a streamer sent in the window, once for each other member of
        // its room that was there to receive it.
        var byRoom: [Int: [LoadClient]] = [:]
        for c in clients { byRoom[c.spec.room, default: []].append(c) }
        for members in byRoom.values {
            let receivers = members.filter { $0.bound && !$0.failed }
            for s in members where s.spec.streamer {
                result.sentInWindow &+= s.sentInWindow
                let others = receivers.filter { $0 !== s }.count
                result.expectedInWindow &+= s.sentInWindow &* UInt64(others)
            }
            for r in receivers {
                result.receivedInWindow &+= r.receivedInWindow
                let due = members.filter { $0.spec.streamer && $0 !== r }.reduce(UInt64(0)) { $0 + $1.sentInWindow }
                if due > r.receivedInWindow {
                    if Environment.get("ROOMLOAD_DEBUG") != nil {
                        let detail = members.filter { $0.spec.streamer && $0 !== r }
                            .map { "from \($0.spec.index): \(r.receivedFrom[$0.spec.index])/\($0.sentInWindow)" }
                        printError("roomload: room \(r.spec.room) participant \(r.spec.index) missed \(due - r.receivedInWindow): \(detail.joined(separator: ", "))")
                    }
                    result.lossyReceivers += 1
                    result.worstReceiverLossPct = max(result.worstReceiverLossPct,
                                                      Double(due - r.receivedInWindow) / Double(due) * 100)
                }
            }
        }
        result.streamersOnStage = streamers.filter { $0.onStage && !$0.failed }.count
        for c in clients {
            c.connection?.close()
            c.udp?.close()
        }
    }
}

/// connect(2) on a UDP socket to a numeric IPv4/IPv6 host.
func connectDatagramSocket(_ fd: Int32, host: String, port: UInt16) throws(SystemError) {
    var rc: Int32 = -1
    var a4 = sockaddr_in()
    if inet_pton(AF_INET, host, &a4.sin_addr) == 1 {
        a4.sin_family = sa_family_t(AF_INET)
        a4.sin_port = port.bigEndian
        rc = withUnsafePointer(to: &a4) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
    } else {
        var a6 = sockaddr_in6()
        guard inet_pton(AF_INET6, host, &a6.sin6_addr) == 1 else { throw SystemError("connect udp \(host): not numeric") }
        a6.sin6_family = sa_family_t(AF_INET6)
        a6.sin6_port = port.bigEndian
        rc = withUnsafePointer(to: &a6) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in6>.size)) }
        }
    }
    if rc != 0 { throw .errno("connect udp \(host):\(port)") }
}
