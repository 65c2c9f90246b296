import Glibc
import RoomBase
import RoomSystem

/// Counters of one direction (docs/roomproxy.md names each).
struct DirectionCounters {
    var received = 0
    var forwarded = 0
    var dropped = 0
    var delayed = 0
    var duplicated = 0
    var reordered = 0
    var sendFailed = 0
    var overflow = 0
    var oversize = 0
    var bytesForwarded = 0
    var delaySumNs: UInt64 = 0
    var delayMaxNs: UInt64 = 0
    /// How much later than its deadline a queued datagram left, at most: delay nobody asked
    /// for (the proxy kept off the CPU, or its loop busy), which a test must not blame on the
    /// receiver.
    var lateMaxNs: UInt64 = 0

    var json: String {
        let mean = delayed > 0 ? Double(delaySumNs) / Double(delayed) / 1e6 : 0
        return "{\"received\":\(received),\"forwarded\":\(forwarded),\"dropped\":\(dropped),\"delayed\":\(delayed),"
            + "\"duplicated\":\(duplicated),\"reordered\":\(reordered),\"send_failed\":\(sendFailed),"
            + "\"overflow\":\(overflow),\"oversize\":\(oversize),\"bytes\":\(bytesForwarded),"
            + "\"delay_mean_ms\":\(fixedDecimalText(mean, 2)),\"delay_max_ms\":\(fixedDecimalText(Double(delayMaxNs) / 1e6, 2)),"
            + "\"late_max_ms\":\(fixedDecimalText(Double(lateMaxNs) / 1e6, 2))}"
    }
}


/// One client's media: its address as the proxy sees it and the proxy's own socket towards
/// the server, so the server sees one address per client.
final class Flow {
    let id: UInt32
    let client: SocketAddress
    let socket: UDPSocket
    var lastActiveNs: UInt64
    /// A datagram held back by --reorder, per direction, until the next one of this flow.
    var held: [Held?] = [nil, nil]

    struct Held {
        var slot: Int32
        var length: Int
        var deadline: UInt64
        var token: UInt64
    }

    init(id: UInt32, client: SocketAddress, socket: UDPSocket, now: UInt64) {
        self.id = id
        self.client = client
        self.socket = socket
        lastActiveNs = now
    }
}

/// A signalling connection: client side accepted on the listener, server side connected by
/// the proxy. Bytes are relayed unchanged with flow control (a side stops reading while the
/// other side's outgoing buffer is full).
final class TCPPair {
    let id: Int
    let client: StreamConnection
    let server: StreamConnection
    /// End of stream seen from [client, server]; the other side gets a half-close (SHUT_WR)
    /// once it has sent what was queued, and the pair closes when both directions ended.
    var ended = [false, false]
    var shutdownPending = [false, false]
    init(id: Int, client: StreamConnection, server: StreamConnection) {
        self.id = id
        self.client = client
        self.server = server
    }
}

final class Proxy {
    let options: ProxyOptions
    let loop: EventLoop
    let serverSignalling: SocketAddress
    let serverMedia: SocketAddress
    let listenTCP: SocketAddress
    let listenUDP: SocketAddress
    let seed: UInt64

    private var tcpListener: TCPListener?
    private var udp: UDPSocket?
    private var pairs: [Int: TCPPair] = [:]
    private var nextPairID = 0
    private var tcpAccepted = 0
    private var tcpFailed = 0
    private var tcpBytes = [0, 0]

    private var flows: [UInt32: Flow] = [:]
    private var flowByClient: [SocketAddress: UInt32] = [:]
    private var nextFlowID: UInt32 = 1
    private var flowsOpened = 0
    private var flowsRefused = 0
    private var foreign = 0
    static let maxFlows = 256

    private var counters = [DirectionCounters(), DirectionCounters()]
    private var rng: [SplitMix64]
    private var impairments: [Impairment]
    private var queue: DelayQueue
    private var armedDeadline: UInt64 = .max
    private var armedTimer: EventLoop.TimerID?
    private var nextHoldToken: UInt64 = 1
    private let receiveBuffer: UnsafeMutableRawBufferPointer
    private let tcpBuffer: UnsafeMutableRawBufferPointer
    private let startNs = monotonicNanoseconds()

    init(options: ProxyOptions, loop: EventLoop) throws(SystemError) {
        self.options = options
        self.loop = loop
        let server = options.server!
        serverSignalling = server
        serverMedia = try SocketAddress(ip: server.host, port: options.mediaPort!)
        listenTCP = try SocketAddress(ip: options.listenHost, port: server.port ?? 0)
        listenUDP = try SocketAddress(ip: options.listenHost, port: options.mediaPort!)
        if listenTCP == server || listenUDP == serverMedia {
            throw SystemError("--listen \(options.listenHost) is the server's own address: use another (e.g. 127.0.0.2)")
        }
        if let s = options.seed {
            seed = s
        } else {
            var ts = timespec()
            clock_gettime(CLOCK_REALTIME, &ts)
            seed = UInt64(ts.tv_sec) &* 1_000_000_007 &+ UInt64(ts.tv_nsec) ^ UInt64(getpid())
        }
        // Separate streams per direction: the uplink's decisions do not depend on how much the
        // downlink carried.
        rng = [SplitMix64(seed: seed), SplitMix64(seed: seed ^ 0xD1B5_4A32_D192_ED03)]
        impairments = [options.impairment(.up), options.impairment(.down)]
        queue = DelayQueue(slotCount: 8192, slotSize: 2048)
        receiveBuffer = .allocate(byteCount: 65536, alignment: 16)
        tcpBuffer = .allocate(byteCount: 65536, alignment: 16)
    }

    deinit {
        queue.deallocate()
        receiveBuffer.deallocate()
        tcpBuffer.deallocate()
    }

    func start() throws(SystemError) {
        tcpListener = try TCPListener(address: listenTCP, loop: loop) { [weak self] connection in
            self?.accepted(connection)
        }
        let socket = try UDPSocket(bindingTo: listenUDP)
        try socket.onReadable(loop: loop) { [weak self] s in self?.receiveFromClients(s) }
        udp = socket
        loop.schedule(after: .seconds(5), repeating: .seconds(5)) { [weak self] in self?.expireFlows() }
        Log.notice("roomproxy: signalling \(listenTCP) → \(serverSignalling), media \(listenUDP) → \(serverMedia); "
                   + "up: \(describe(impairments[0])), down: \(describe(impairments[1])); seed \(seed)")
    }

    /// Replaces the impairment at run time (`--control`): datagrams already held keep their
    /// times, the next ones get the new treatment.
    func setImpairment(_ im: Impairment, directions: Set<Direction>) {
        impairments = Direction.allCases.map { directions.contains($0) ? im : .none }
        Log.notice("roomproxy: now up: \(describe(impairments[0])), down: \(describe(impairments[1]))")
    }

    private func describe(_ im: Impairment) -> String {
        if im.isNone { return "clean" }
        return "loss \(fixedDecimalText(im.lossPct, 1)) %, delay \(fixedDecimalText(im.baseDelayMs, 1)) ms + 0…\(fixedDecimalText(2 * im.jitterMs, 1)) ms, "
            + "reorder \(fixedDecimalText(im.reorderPct, 1)) %, duplicate \(fixedDecimalText(im.duplicatePct, 1)) %"
    }

    // MARK: Statistics

    func statsJSON(final: Bool) -> String {
        let t = Double(monotonicNanoseconds() - startNs) / 1e9
        return "{\"roomproxy\":true,\"t\":\(fixedDecimalText(t, 2)),\"final\":\(final),\"seed\":\(seed),"
            + "\"flows\":\(flows.count),\"flows_opened\":\(flowsOpened),\"flows_refused\":\(flowsRefused),"
            + "\"foreign\":\(foreign),\"queued\":\(queue.count),\"queue_peak\":\(queue.peak),"
            + "\"tcp\":{\"accepted\":\(tcpAccepted),\"open\":\(pairs.count),\"connect_failed\":\(tcpFailed),"
            + "\"up_bytes\":\(tcpBytes[0]),\"down_bytes\":\(tcpBytes[1])},"
            + "\"up\":\(counters[0].json),\"down\":\(counters[1].json)}"
    }

    // MARK: TCP (signalling): unchanged bytes

    private func accepted(_ client: StreamConnection) {
        tcpAccepted += 1
        let server: StreamConnection
        do {
            server = try StreamConnection.connect(to: serverSignalling, loop: loop)
        } catch {
            tcpFailed += 1
            Log.warning("roomproxy: \(client.peerAddress): cannot reach the server: \(error)")
            client.close()
            return
        }
        let id = nextPairID
        nextPairID += 1
        let pair = TCPPair(id: id, client: client, server: server)
        pairs[id] = pair
        Log.info("roomproxy: signalling connection \(id) from \(client.peerAddress)")
        client.handler = { [weak self, weak pair] _, event in
            guard let self, let pair else { return }
            self.streamEvent(pair, from: pair.client, to: pair.server, index: 0, event)
        }
        server.handler = { [weak self, weak pair] _, event in
            guard let self, let pair else { return }
            self.streamEvent(pair, from: pair.server, to: pair.client, index: 1, event)
        }
    }

    /// `from` produced `event`; `to` is the other side. `index` 0: client → server.
    private func streamEvent(_ pair: TCPPair, from: StreamConnection, to: StreamConnection, index: Int,
                             _ event: StreamConnection.Event) {
        switch event {
        case .connected:
            break
        case .readable:
            let room = to.outgoingLimit - to.bufferedByteCount
            if room < 4096 {
                from.isReadingPaused = true // resumed when `to` drains
                return
            }
            let chunk = UnsafeMutableRawBufferPointer(rebasing: tcpBuffer[0..<min(room, tcpBuffer.count)])
            do {
                switch try from.read(into: chunk) {
                case .bytes(let n):
                    tcpBytes[index] += n
                    if to.write(UnsafeRawBufferPointer(rebasing: chunk[0..<n])) != .accepted { finish(pair) }
                case .wouldBlock:
                    break
                case .endOfStream:
                    // Pass the half-close on once what is queued for the other side has gone
                    // out; keep relaying the other direction until it ends too.
                    from.isReadingPaused = true
                    pair.ended[index] = true
                    if pair.ended[1 - index] {
                        to.closeAfterFlush()
                        from.closeAfterFlush()
                        forget(pair)
                    } else if to.bufferedByteCount == 0 {
                        _ = Glibc.shutdown(to.fileDescriptor, Int32(SHUT_WR))
                    } else {
                        pair.shutdownPending[index] = true
                    }
                }
            } catch {
                Log.info("roomproxy: signalling connection \(pair.id): \(error)")
                finish(pair)
            }
        case .drained:
            // `from` sent all it had queued: the other side may read again, and a half-close
            // seen from the other side can be passed on.
            if !pair.ended[1 - index] { to.isReadingPaused = false }
            if pair.shutdownPending[1 - index] {
                pair.shutdownPending[1 - index] = false
                _ = Glibc.shutdown(from.fileDescriptor, Int32(SHUT_WR))
            }
        case .closed(let error):
            if index == 1 && !from.isConnected { tcpFailed += 1 }
            Log.info("roomproxy: signalling connection \(pair.id): \(error)")
            to.closeAfterFlush()
            forget(pair)
        }
    }

    private func finish(_ pair: TCPPair) {
        pair.client.close()
        pair.server.close()
        forget(pair)
    }

    private func forget(_ pair: TCPPair) {
        pairs.removeValue(forKey: pair.id)
        // A side flushing before it closes must outlive the pair: StreamConnection keeps its
        // registration only while referenced, so keep the two until they are closed.
        for side in [pair.client, pair.server] where side.isOpen { lingering.append(side) }
        if !lingering.isEmpty && lingerTimer == nil {
            lingerTimer = loop.schedule(after: .milliseconds(200), repeating: .milliseconds(200)) { [weak self] in
                guard let self else { return }
                self.lingering.removeAll { !$0.isOpen }
                if self.lingering.isEmpty, let t = self.lingerTimer { self.loop.cancel(t); self.lingerTimer = nil }
            }
        }
    }

    private var lingering: [StreamConnection] = []
    private var lingerTimer: EventLoop.TimerID?

    // MARK: UDP (media): per-client flows with impairment

    private func receiveFromClients(_ socket: UDPSocket) {
        for _ in 0..<64 {
            let datagram: UDPSocket.Datagram?
            do {
                datagram = try socket.receive(into: receiveBuffer)
            } catch {
                Log.warning("roomproxy: \(error)")
                return
            }
            guard let datagram else { return }
            guard let flow = flow(for: datagram.source) else { continue }
            handle(datagram, flow: flow, direction: .up)
        }
    }

    private func receiveFromServer(_ flow: Flow) {
        for _ in 0..<64 {
            let datagram: UDPSocket.Datagram?
            do {
                datagram = try flow.socket.receive(into: receiveBuffer)
            } catch {
                Log.warning("roomproxy: \(error)")
                return
            }
            guard let datagram else { return }
            if datagram.source != serverMedia { foreign += 1; continue }
            handle(datagram, flow: flow, direction: .down)
        }
    }

    private func flow(for client: SocketAddress) -> Flow? {
        if let id = flowByClient[client], let f = flows[id] { return f }
        guard flows.count < Self.maxFlows else { flowsRefused += 1; return nil }
        let socket: UDPSocket
        do {
            socket = try UDPSocket(bindingTo: serverMedia.family == .ipv6 ? .ipv6Any(port: 0) : .ipv4Any(port: 0))
        } catch {
            flowsRefused += 1
            Log.warning("roomproxy: cannot open a socket for \(client): \(error)")
            return nil
        }
        let id = nextFlowID
        nextFlowID &+= 1
        let flow = Flow(id: id, client: client, socket: socket, now: monotonicNanoseconds())
        do {
            try socket.onReadable(loop: loop) { [weak self, weak flow] _ in
                guard let self, let flow else { return }
                self.receiveFromServer(flow)
            }
        } catch {
            flowsRefused += 1
            Log.warning("roomproxy: \(error)")
            return nil
        }
        flows[id] = flow
        flowByClient[client] = id
        flowsOpened += 1
        Log.info("roomproxy: media flow \(id): \(client) ↔ \(socket.localAddress) → \(serverMedia)")
        return flow
    }

    private func expireFlows() {
        let now = monotonicNanoseconds()
        let idle = UInt64(options.flowIdleSeconds * 1e9)
        for (id, flow) in flows where now &- flow.lastActiveNs > idle {
            Log.info("roomproxy: media flow \(id) idle, closed")
            for d in Direction.allCases { if let h = flow.held[d.rawValue] { queue.releaseSlot(h.slot) } }
            flow.socket.close()
            flows.removeValue(forKey: id)
            flowByClient.removeValue(forKey: flow.client)
        }
    }

    /// One datagram in `receiveBuffer`: decide its fate and send or queue it.
    private func handle(_ datagram: UDPSocket.Datagram, flow: Flow, direction d: Direction) {
        let di = d.rawValue
        let now = monotonicNanoseconds()
        flow.lastActiveNs = now
        counters[di].received += 1
        let im = impairments[di]
        let bytes = UnsafeRawBufferPointer(rebasing: receiveBuffer[0..<datagram.count])
        if im.isNone {
            send(bytes, flow: flow, direction: d)
            return
        }
        if datagram.truncated || datagram.count > queue.slotSize {
            counters[di].oversize += 1
            return
        }
        let decision = Decision.draw(&rng[di], im)
        // A datagram held by --reorder leaves right after this one (or alone if this one is lost).
        let held = flow.held[di]
        flow.held[di] = nil
        defer { if let held { release(held, after: decision.drop ? now : now &+ decision.delayNs, flow: flow, direction: d) } }

        if decision.drop {
            counters[di].dropped += 1
            return
        }
        if decision.reorder && held == nil {
            // Hold it back until the next datagram of this flow and direction has been sent.
            guard let slot = queue.store(bytes) else { counters[di].overflow += 1; return }
            let token = nextHoldToken
            nextHoldToken += 1
            flow.held[di] = Flow.Held(slot: slot, length: bytes.count, deadline: now &+ decision.delayNs, token: token)
            counters[di].reordered += 1
            let maxHold = Duration.nanoseconds(Int64(options.maxHoldMs * 1e6))
            loop.schedule(after: maxHold) { [weak self, weak flow] in
                // No next datagram came in time: let it go alone.
                guard let self, let flow, let h = flow.held[di], h.token == token else { return }
                flow.held[di] = nil
                self.release(h, after: monotonicNanoseconds(), flow: flow, direction: d)
            }
        } else {
            schedule(bytes, delayNs: decision.delayNs, now: now, flow: flow, direction: d)
        }
        if decision.duplicate {
            counters[di].duplicated += 1
            schedule(bytes, delayNs: decision.duplicateDelayNs, now: now, flow: flow, direction: d)
        }
    }

    /// Sends now (no delay) or queues until `now + delayNs`.
    private func schedule(_ bytes: UnsafeRawBufferPointer, delayNs: UInt64, now: UInt64, flow: Flow, direction d: Direction) {
        if delayNs == 0 {
            send(bytes, flow: flow, direction: d)
            return
        }
        guard let slot = queue.store(bytes) else { counters[d.rawValue].overflow += 1; return }
        enqueue(slot: slot, length: bytes.count, deadline: now &+ delayNs, delayNs: delayNs, flow: flow, direction: d)
    }

    /// A held datagram goes out no earlier than `after` (the send time of the datagram it
    /// was swapped with; queued later, so it leaves after it at an equal deadline).
    private func release(_ held: Flow.Held, after: UInt64, flow: Flow, direction d: Direction) {
        let now = monotonicNanoseconds()
        let deadline = max(held.deadline, after)
        if deadline <= now && queue.count == 0 {
            send(UnsafeRawBufferPointer(start: queue.buffer(held.slot).baseAddress, count: held.length), flow: flow, direction: d)
            queue.releaseSlot(held.slot)
            return
        }
        enqueue(slot: held.slot, length: held.length, deadline: deadline, delayNs: deadline > now ? deadline - now : 0,
                flow: flow, direction: d)
    }

    private func enqueue(slot: Int32, length: Int, deadline: UInt64, delayNs: UInt64, flow: Flow, direction d: Direction) {
        let di = d.rawValue
        counters[di].delayed += 1
        counters[di].delaySumNs &+= delayNs
        counters[di].delayMaxNs = max(counters[di].delayMaxNs, delayNs)
        queue.push(deadline: deadline, slot: slot, length: length, flow: flow.id, direction: d)
        arm()
    }

    /// Keeps one loop timer on the earliest deadline.
    private func arm() {
        guard let earliest = queue.earliest else { return }
        if armedTimer != nil && armedDeadline <= earliest { return }
        if let t = armedTimer { loop.cancel(t) }
        let now = monotonicNanoseconds()
        armedDeadline = earliest
        armedTimer = loop.schedule(after: .nanoseconds(Int64(earliest > now ? earliest - now : 0))) { [weak self] in
            guard let self else { return }
            self.armedTimer = nil
            self.armedDeadline = .max
            self.sendDue()
        }
    }

    private func sendDue() {
        let now = monotonicNanoseconds()
        while let (e, deadline) = queue.popDue(now: now) {
            let d = Direction(rawValue: Int(e.direction))!
            counters[d.rawValue].lateMaxNs = max(counters[d.rawValue].lateMaxNs, now &- deadline)
            if let flow = flows[e.flow] {
                send(UnsafeRawBufferPointer(start: queue.buffer(e.slot).baseAddress, count: Int(e.length)), flow: flow, direction: d)
            }
            queue.releaseSlot(e.slot)
        }
        arm()
    }

    private func send(_ bytes: UnsafeRawBufferPointer, flow: Flow, direction d: Direction) {
        let di = d.rawValue
        do {
            let ok: Bool
            switch d {
            case .up: ok = try flow.socket.send(bytes, to: serverMedia)
            case .down:
                guard let udp else { return }
                ok = try udp.send(bytes, to: flow.client)
            }
            if ok {
                counters[di].forwarded += 1
                counters[di].bytesForwarded += bytes.count
            } else {
                counters[di].sendFailed += 1
            }
        } catch {
            counters[di].sendFailed += 1
            Log.debug("roomproxy: \(error)")
        }
    }
}
