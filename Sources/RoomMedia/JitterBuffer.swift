/// A per-stream adaptive jitter buffer for one incoming Opus RTP stream.
///
/// It lives on the audio thread. Everything is allocated at init; `insert` and `nextFrame`
/// never allocate, lock or log. The network thread never touches it: it pushes received
/// datagrams (with their arrival time) into an SPSC ring, and the audio thread, once per
/// period, drains the ring into `insert(...)` and then calls `nextFrame(nowSamples:)` until it
/// has a period's worth of samples.
///
/// Time is counted in RTP clock ticks (samples at 48 kHz). `arrivalSamples` and
/// `nowSamples` must come from the same receiver clock (e.g. CLOCK_MONOTONIC scaled to
/// 48 kHz); it need not be synchronised with the sender's.
///
/// The buffer works in timestamps, not in frames: each packet lasts what it says (the caller
/// passes the Opus packet's duration; without it the buffer infers it from the timestamp steps
/// between consecutive packets), packets are kept by sequence number and played in sequence
/// order at the time their timestamp is due. Any Opus frame size (2.5 … 120 ms) plays, and a
/// sender may change it mid-stream. Every decision says how many samples it covers; the
/// caller asks again when it has played them.
///
/// How it decides (docs/jitter-buffer.md has the full story):
/// - Each packet's *relative delay* is `arrival - (timestamp - firstTimestamp)`. Over a
///   sliding window (the last 2 s of packets) the smallest relative delay is the fastest path
///   through the network; the target delay is the 95th percentile of (delay - smallest) taken
///   from a fixed 1 ms histogram, plus a margin of half a playout step, clamped to
///   minimum...maximum. It rises at once (also when late packets show it was too short twice
///   within the window) and falls at most 20 ms per second.
/// - A backlog is not jitter: a packet later than the maximum delay (an outage), and the
///   packets that drain right behind a late or outage packet (arriving at more than 4× real
///   time: a stall of the network, the server or our receive thread), do not enter the delay
///   window; they play if they are still in time and are counted as `backlog`.
/// - A packet with timestamp `t` is due at `t + smallest + target`. Each `nextFrame` compares
///   the playout point with that schedule: more than half a step early → insert concealment
///   (stretch); at least one packet late → drop (skip: missing audio or silence at once, a
///   packet with audio after the excess has lasted `skipHoldMs` — `silenceWaitMs` when the
///   excess is under two packets, waiting for a pause to drop silence instead; more than
///   `jumpThresholdMs` behind → jump back to the schedule at once). A backlog is shed within
///   a second whatever the talker does.
/// - Missing audio whose deadline has come is classified with sequence numbers: as many
///   packets missing as the gap holds → loss → `.decodeFEC` from the next packet for the
///   stretch right before it, `.conceal` for the rest; no packet missing → the sender sent
///   nothing (DTX) → `.silence`. With nothing buffered the two cannot be told apart yet:
///   conceal for `concealBeforeSilenceMs`, then silence.
///
/// The parts, each a value type owning its fields and allocated here at init (the class keeps
/// the playout point and the orchestration, `insert` and `nextFrame`):
/// - `JitterSlotStore`: the packets waiting, by sequence number, and their payloads;
/// - `JitterLossTracker`: the numbering, duplicates, the lost count, whether a loss is recent;
/// - `JitterArrivalPattern`: the packet duration the timestamps show, backlog bursts;
/// - `JitterDelayEstimator`: the delay window, the target delay and the schedule;
/// - `JitterBufferTiming`: the settings in samples; `JitterBufferStatistics`: the counters.
///
/// Why `@unchecked Sendable`: the buffer is owned by one thread at a time (built on the
/// control thread, handed to the audio thread once, through a synchronising hand-off, and
/// used only there). It holds raw storage the compiler cannot check; it is not safe to
/// call from two threads at once.
public final class JitterBuffer: @unchecked Sendable {
    /// A packet handed out for decoding; `payload` points into the buffer's storage.
    public struct Packet {
        public let sequenceNumber: UInt16
        public let timestamp: UInt32
        /// How long the packet plays, in RTP clock ticks (what the caller said when inserting
        /// it, else inferred from the stream's timestamps).
        public let durationSamples: Int
        public let payload: UnsafeRawBufferPointer
    }

    private enum Missing { case loss, fec, dtx }

    /// Audio missing at the playout point, as the next packet present classifies it.
    private struct MissingStretch {
        var kind: Missing
        /// What this decision covers.
        var chunk: Int64
        /// The part of the gap before the next packet that no missing packet accounts for
        /// (DTX); `.max` with nothing buffered.
        var silentPart: Int64
    }

    public let configuration: JitterBufferConfiguration
    /// Samples assumed for a packet whose duration is not known yet (480 at 10 ms).
    public var frameSamples: Int64 { timing.frameSamples }
    /// Number of packet slots.
    public var capacity: Int { slots.capacity }

    private let timing: JitterBufferTiming
    private var slots: JitterSlotStore
    private var loss: JitterLossTracker
    private var arrivals: JitterArrivalPattern
    private var delay: JitterDelayEstimator

    // Playout.
    private var started = false
    private var playPosition: Int64 = 0         // relative timestamp of the next sample to play
    private var lastPlayedSequence: Int64 = 0
    private var lastDuration: Int64
    private var emptySamples: Int64 = 0         // played (or dropped) with nothing buffered
    private var excessSince: Int64 = JitterBufferTiming.none
    private var outOfRangeRun = 0
    /// Newest packets in a row later than the buffer may wait (outages) that did not drain
    /// behind one another, and where that run began (arrival, relative timestamp): arriving
    /// at real-time pace, they say the path itself got longer (`pathGotLonger`).
    private var outageRun = 0
    private var outageRunStart: (arrival: Int64, relative: Int64) = (0, 0)

    public private(set) var statistics = JitterBufferStatistics()

    public init(configuration: JitterBufferConfiguration = JitterBufferConfiguration()) {
        let c = configuration
        precondition((1...120).contains(c.frameDurationMs), "frameDurationMs must be 1...120")
        precondition((1...120).contains(c.playoutStepMs), "playoutStepMs must be 1...120")
        precondition(c.clockRate >= 8000 && c.clockRate % 2000 == 0, "clockRate must be a multiple of 2 kHz")
        precondition(c.minimumDelayMs >= 0 && c.maximumDelayMs >= c.minimumDelayMs && c.maximumDelayMs <= 2000,
                     "delays must satisfy 0 <= minimum <= maximum <= 2000 ms")
        precondition(c.maxPayloadBytes > 0 && c.delayWindowMs >= 10 && c.capacityPackets >= 8)
        precondition(c.delayPercentile > 0.5 && c.delayPercentile <= 1)
        precondition(c.targetMarginMs >= 0)
        self.configuration = c
        let timing = JitterBufferTiming(c)
        self.timing = timing
        lastDuration = timing.frameSamples
        // Everything is allocated here: the slots and their payloads, the delay window and
        // histogram (the loss tracker's bitmap and the recent timestamp steps are inline).
        slots = JitterSlotStore(capacity: c.capacityPackets, maxPayloadBytes: c.maxPayloadBytes)
        loss = JitterLossTracker(lossMemory: Int64(c.lossMemoryMs) * timing.samplesPerMs)
        arrivals = JitterArrivalPattern(timing: timing)
        delay = JitterDelayEstimator(configuration: c, timing: timing)
        publishStatistics()
    }

    // MARK: - Public interface

    /// Starts over on a new stream (call on SSRC change). Statistics are kept (the lost
    /// count of the old stream is folded in); the target delay is kept as a starting point.
    public func reset() {
        loss.restart()
        slots.removeAll()
        started = false
        emptySamples = 0
        excessSince = JitterBufferTiming.none
        outOfRangeRun = 0
        delay.restart()
        arrivals.restart()
        lastDuration = timing.frameSamples
        publishStatistics()
    }

    /// Zeroes the counters (not the state).
    public func resetStatistics() {
        statistics = JitterBufferStatistics()
        loss.restartCount()
        publishStatistics()
    }

    /// Stores one packet. Copies `payload` into a preallocated slot.
    /// `arrivalSamples`: when the datagram arrived, on the receiver clock, in samples.
    /// `durationSamples`: how long the packet plays, in RTP clock ticks (for Opus,
    /// `opus_packet_get_nb_samples` at 48 kHz); 0 or negative when unknown: the buffer then
    /// uses the timestamp step between consecutive packets.
    @discardableResult
    public func insert(
        sequenceNumber: UInt16, timestamp: UInt32, arrivalSamples: Int64, payload: UnsafeRawBufferPointer,
        durationSamples: Int = 0
    ) -> JitterBufferInsertResult {
        guard payload.count <= configuration.maxPayloadBytes else {
            statistics.oversize += 1
            return .payloadTooLarge
        }
        let given = durationSamples > 0 ? min(Int64(durationSamples), timing.longestPacket) : 0
        let result = insertChecked(sequenceNumber, timestamp, arrivalSamples, payload, given)
        if result == .outOfRange {
            outOfRangeRun += 1
            statistics.outOfRange += 1
            if outOfRangeRun >= configuration.resyncAfterOutOfRange {
                reset()
                statistics.resyncs += 1
                let again = insertChecked(sequenceNumber, timestamp, arrivalSamples, payload, given)
                publishStatistics()
                return again == .accepted ? .acceptedAfterResync : again
            }
        } else if result != .duplicate {
            outOfRangeRun = 0
        }
        publishStatistics()
        return result
    }

    /// Stores the payload of a parsed packet; `datagram` is the buffer it was parsed from.
    @discardableResult
    public func insert(_ packet: RTPPacket, datagram: UnsafeRawBufferPointer, arrivalSamples: Int64,
                       durationSamples: Int = 0) -> JitterBufferInsertResult {
        insert(sequenceNumber: packet.sequenceNumber, timestamp: packet.timestamp,
               arrivalSamples: arrivalSamples, payload: packet.payload(in: datagram), durationSamples: durationSamples)
    }

    /// Decides what to play next and for how many samples (`PlayoutDecision.samples`); call
    /// again when those samples have been played, after inserting what arrived.
    /// `nowSamples`: the receiver clock (same clock as the arrival times) at the moment the
    /// first of those samples is produced — when several decisions fill one period, advance
    /// it by what the period already holds. `upTo`: the samples (RTP clock) left in the
    /// caller's period. Silence and concealment stop there, so that the next decision falls on
    /// a period boundary, where what arrived during the period has been inserted; a packet
    /// always plays whole.
    public func nextFrame(nowSamples now: Int64, upTo room: Int = .max) -> PlayoutDecision {
        let room = max(timing.granule, min(Int64(min(room, Int(Int32.max))), timing.longestPacket))
        delay.steer(at: now, lossRecent: loss.isRecent(at: now), lastDuration: lastDuration)
        defer { publishStatistics() }

        if !started, let filling = startPlayout(now: now, room: room) { return filling }

        // Positive: playing earlier than the target delay asks for (delay too short).
        var ahead = delay.ahead(of: playPosition, at: now)

        // Far too much delay (the audio thread stalled while packets kept coming, a burst):
        // jump straight back to the target instead of dropping one packet at a time.
        ahead += catchUp(ahead: ahead, beyond: timing.jumpThreshold)

        var skippedThisCall = false
        while true {
            statistics.currentDelayMs = delay.delayMs(of: playPosition, at: now)
            let next = dropPlayedPackets()
            if let i = next, slots[i].relative <= playPosition + timing.tolerance {
                // The packet at the playout point is here.
                if let decision = playPacket(at: i, ahead: &ahead, now: now, room: room, skippedThisCall: &skippedThisCall) {
                    return decision
                }
                continue
            }
            // Missing at the playout point. The next packet present tells loss from DTX.
            let missing = classifyMissing(next: next, room: room)
            if let decision = playMissing(missing, next: next, ahead: &ahead, now: now, room: room,
                                          skippedThisCall: &skippedThisCall) {
                return decision
            }
        }
    }

    // MARK: - Playout steps

    /// Before playout has started: silence while the first packet is not due yet, else starts
    /// playout on it and returns nil.
    private func startPlayout(now: Int64, room: Int64) -> PlayoutDecision? {
        guard slots.count > 0, let first = slots.lowest() else {
            return .silence(samples: Int(min(timing.step, lastDuration, room)))
        }
        let slot = slots[first]
        // Start as soon as the first packet is within the band playout keeps to (no more
        // than half a step early): on a clean path that is the first period after it
        // arrived, not up to a period later.
        let ahead = delay.ahead(of: slot.relative, at: now)
        if ahead >= Double(min(timing.step, slot.duration)) / 2 {
            return .silence(samples: Int(min(timing.step, slot.duration, room)))   // still filling
        }
        started = true
        playPosition = slot.relative
        lastPlayedSequence = slot.sequence - 1
        lastDuration = slot.duration
        emptySamples = 0
        excessSince = JitterBufferTiming.none
        return nil
    }

    /// The slot of the next packet to play, after dropping those wholly before the playout
    /// point: a copy under another sequence number, or timestamps that overlap, has nothing
    /// left to play.
    private func dropPlayedPackets() -> Int? {
        var next = nextBuffered()
        while let i = next, slots[i].relative + slots[i].duration <= playPosition {
            lastPlayedSequence = slots[i].sequence
            slots.free(i)
            statistics.duplicates += 1
            next = nextBuffered()
        }
        return next
    }

    /// The packet in slot `i` is at the playout point: decode it, or — when playout is off the
    /// schedule — insert concealment before it or drop it. Returns nil after a drop (the caller
    /// decides again on what follows).
    private func playPacket(
        at i: Int, ahead: inout Double, now: Int64, room: Int64, skippedThisCall: inout Bool
    ) -> PlayoutDecision? {
        if !slots[i].told {
            let inferred = slots.inferredLength(of: i, inferred: arrivals.inferredDuration, granule: timing.granule)
            slots.setDuration(inferred, at: i)
        }
        let slot = slots[i]
        emptySamples = 0
        let unit = min(timing.step, slot.duration)
        if ahead >= Double(unit) / 2 {
            // Well below the target: insert concealment, play this packet next time.
            statistics.stretched += 1
            excessSince = JitterBufferTiming.none
            return .conceal(samples: Int(min(unit, room)))
        }
        if ahead <= -Double(slot.duration) {
            // Over target by a packet or more. A small excess (under two packets) waits
            // a while for a pause, where silence goes at no cost; a larger one, or one
            // that found no pause, drops audio, one packet per hold.
            if excessSince == JitterBufferTiming.none { excessSince = now }
            let small = -ahead < Double(2 * max(slot.duration, timing.step))
            if now - excessSince >= (small ? timing.silenceWait : timing.skipHold), !skippedThisCall {
                let before = playPosition
                lastPlayedSequence = slot.sequence
                lastDuration = slot.duration
                slots.free(i)
                playPosition = max(playPosition, slot.relative + slot.duration)
                ahead += Double(playPosition - before)
                shed(playPosition - before)
                excessSince = now
                skippedThisCall = true
                return nil
            }
        } else {
            excessSince = JitterBufferTiming.none
        }
        lastPlayedSequence = slot.sequence
        lastDuration = slot.duration
        playPosition = max(playPosition, slot.relative + slot.duration)
        statistics.decoded += 1
        let p = slots.packet(at: i)
        slots.free(i)
        return .decode(p)
    }

    /// Audio is missing at the playout point; `next`: the slot of the next packet present.
    private func classifyMissing(next: Int?, room: Int64) -> MissingStretch {
        guard let i = next else {
            let kind: Missing = emptySamples < timing.concealLimit ? .loss : .dtx
            return MissingStretch(kind: kind, chunk: min(lastDuration, room), silentPart: .max)
        }
        emptySamples = 0
        let n = slots[i]
        let gap = n.relative - playPosition
        let missingPackets = n.sequence - lastPlayedSequence - 1
        // Packets missing are taken to be the ones right before the next packet (so the
        // stretch just before it can come back through FEC); the rest of the gap is DTX.
        let lossPart = min(gap, max(0, missingPackets) * n.duration)
        let silentPart = gap - lossPart
        if silentPart > timing.tolerance {
            return MissingStretch(kind: .dtx, chunk: min(silentPart, lastDuration, room), silentPart: silentPart)
        } else if abs(gap - n.duration) <= timing.tolerance {
            // In one piece, whatever the period: libopus rebuilds a frame from FEC only
            // when asked for the whole of it (less is concealment).
            return MissingStretch(kind: .fec, chunk: gap, silentPart: silentPart)
        } else {
            // Lost packets before it, one packet length at a time (the packet grid), or
            // the rest of one partly concealed already.
            return MissingStretch(kind: .loss, chunk: gap > n.duration ? min(gap - n.duration, n.duration) : gap,
                                  silentPart: silentPart)
        }
    }

    /// Plays (or waits, or drops) a stretch of missing audio. Returns nil after a drop (the
    /// caller decides again on what follows).
    private func playMissing(
        _ missing: MissingStretch, next: Int?, ahead: inout Double, now: Int64, room: Int64, skippedThisCall: inout Bool
    ) -> PlayoutDecision? {
        let kind = missing.kind, chunk = missing.chunk
        let unit = min(timing.step, lastDuration)
        // Silence is free to stretch or cut: there it keeps within half a step of the
        // schedule (the band a packet plays in), so the next talk spurt starts at the target
        // delay, not up to a step above it. Missing audio waits while its deadline has not
        // come (its packet may still arrive).
        if kind == .dtx ? ahead >= Double(unit) / 2 : ahead > 0 {
            statistics.stretched += 1
            let wait = Int(min(unit, room))
            return kind == .dtx ? .silence(samples: wait) : .conceal(samples: wait)
        }
        if !skippedThisCall {
            // Above target: silence and missing audio are dropped at once, nothing audible
            // is lost. Silence goes in whole steps (as many as bring playout within half a
            // step of the schedule), so decisions stay on the caller's period boundaries.
            let excess = -ahead
            var drop: Int64 = 0
            if kind == .dtx, excess > Double(unit) / 2 {
                let steps = Int64(min((excess + Double(unit) / 2) / Double(unit), 1e12))
                drop = min(steps, missing.silentPart / unit) * unit
            } else if kind != .dtx, excess >= Double(chunk) {
                drop = chunk
            }
            if drop > 0 {
                playPosition += drop
                ahead += Double(drop)
                if next == nil { emptySamples += drop }
                shed(drop)
                excessSince = JitterBufferTiming.none
                skippedThisCall = true
                return nil
            }
        }
        playPosition += chunk
        if next == nil { emptySamples += chunk }
        // Sequence numbers prove a loss: keep a packet of look-ahead for a while, so that
        // the next one can come back through FEC.
        if kind != .dtx, next != nil { loss.noteLoss(at: now) }
        switch kind {
        case .fec:
            statistics.fecRecovered += 1
            return .decodeFEC(slots.packet(at: next!), samples: Int(chunk))
        case .loss:
            statistics.concealed += 1
            return .conceal(samples: Int(chunk))
        case .dtx:
            statistics.silence += 1
            return .silence(samples: Int(chunk))
        }
    }

    // MARK: - Insert

    private func insertChecked(
        _ sequence: UInt16, _ timestamp: UInt32, _ arrival: Int64, _ payload: UnsafeRawBufferPointer, _ given: Int64
    ) -> JitterBufferInsertResult {
        if !loss.anchored {
            let s = loss.anchor(sequence: sequence, timestamp: timestamp)
            arrivals.forgetNewest()
            let backlog = noteArrival(sequence: s, relative: 0, arrival: arrival, newest: true, late: false)
            return store(sequence: s, timestamp: timestamp, relative: 0, duration: given > 0 ? given : arrivals.inferredDuration,
                         told: given > 0, arrival: arrival, payload: payload, newest: true, backlog: backlog)
        }

        let (seq, relative) = loss.peek(sequence: sequence, timestamp: timestamp)
        if loss.isTooOld(seq) { return .outOfRange }      // older than we can judge
        if loss.isDuplicate(seq) {
            statistics.duplicates += 1
            return .duplicate
        }
        let highestSequence = loss.highestSequence
        let newest = seq > highestSequence
        var duration = given > 0 ? given : arrivals.inferredDuration
        // A gap in the numbering whose turn has already come (playout is past where the first
        // missing packet starts): packets lost and concealed without their successor's FEC,
        // which was not here yet. Keep a packet of look-ahead from now on. (A gap still ahead of
        // playout may be mere reordering.)
        if seq > highestSequence + 1, seq < highestSequence + Int64(capacity), started,
           arrivals.newestArrival != JitterBufferTiming.none,
           playPosition > arrivals.newestRelative + arrivals.inferredDuration + timing.tolerance {
            loss.noteLoss(at: arrival)
        }

        if started {
            // Playout far behind the schedule this packet's arrival implies (nextFrame has
            // not been called for a while): catch up before judging the packet.
            if delay.hasDelays {
                _ = catchUp(ahead: delay.ahead(of: playPosition, at: arrival), beyond: delay.maximumTarget)
            }
            if relative >= playPosition + timing.horizon || seq > lastPlayedSequence + Int64(capacity) { return .outOfRange }
            if seq <= lastPlayedSequence || relative + duration <= playPosition {
                return insertLate(sequence: seq, timestamp: timestamp, relative: relative, arrival: arrival, payload: payload,
                                  given: given, newest: newest)
            }
        } else if slots.count > 0 {
            let spread = slots.spread(with: seq, relative: relative)
            if spread.sequences >= Int64(capacity) || spread.time >= timing.horizon { return .outOfRange }
        }
        if !slots.isFree(slots.index(of: seq)) { return .outOfRange }   // defensive: never overwrite
        let backlog = noteArrival(sequence: seq, relative: relative, arrival: arrival, newest: newest, late: false)
        if given <= 0 { duration = arrivals.inferredDuration }
        return store(sequence: seq, timestamp: timestamp, relative: relative, duration: duration, told: given > 0,
                     arrival: arrival, payload: payload, newest: newest, backlog: backlog)
    }

    /// A packet whose turn has passed (its sequence number already played, or its whole
    /// duration before the playout point), once playout has started.
    private func insertLate(
        sequence seq: Int64, timestamp: UInt32, relative: Int64, arrival: Int64, payload: UnsafeRawBufferPointer,
        given: Int64, newest: Bool
    ) -> JitterBufferInsertResult {
        // Far behind the newest packet's timestamp: not this stream's numbering. (Far
        // behind the playout point alone is a backlog after a stall: merely late.)
        if relative < arrivals.newestRelative - 4 * timing.horizon { return .outOfRange }
        let backlog = noteArrival(sequence: seq, relative: relative, arrival: arrival, newest: newest, late: true)
        let duration = given > 0 ? given : arrivals.inferredDuration
        let resumedLater = !backlog && emptySamples >= timing.concealLimit
        if newest, slots.count == 0, resumedLater || pathGotLonger(relative: relative, arrival: arrival) {
            // The sender paused and came back later than the old timing allows (its clock is
            // slower, or the path got longer), or the path got longer mid-speech by more than
            // the buffer may wait: start playout afresh on this packet.
            started = false
            delay.clearWindow()
            outageRun = 0
            statistics.playoutRestarts += 1
            return store(sequence: seq, timestamp: timestamp, relative: relative, duration: duration,
                         told: given > 0, arrival: arrival, payload: payload, newest: newest, backlog: false)
        }
        // Arrived after its turn: learn from it (unless it is backlog), then drop it. Its
        // turn has passed, so playout goes on after it (when nothing before it waits).
        if seq > lastPlayedSequence, (nextBuffered().map { slots[$0].sequence > seq } ?? true) {
            lastPlayedSequence = seq
        }
        if loss.commit(sequence: seq, timestamp: timestamp, newest: newest) { statistics.reordered += 1 }
        delay.noteTransit(arrival - relative)
        if backlog {
            statistics.backlog += 1
        } else {
            loss.noteLoss(at: arrival)
            recordDelay(arrival - relative, relative: relative, duration: duration, late: true, arrival: arrival, newest: newest)
        }
        statistics.late += 1
        return .late
    }

    /// Follows the arrival pattern of the newest packets: learns the packet duration from
    /// consecutive timestamps and says whether this packet is backlog — later than any
    /// delay the buffer could cover (an outage), or draining right behind a late or backlog
    /// packet (arriving at more than 4× real time). Backlog does not shape the target.
    private func noteArrival(sequence seq: Int64, relative: Int64, arrival: Int64, newest: Bool, late: Bool) -> Bool {
        let outage = delay.isOutage(arrival - relative)
        var backlog = outage
        guard newest else {
            // An older packet draining in the same burst (the queue was not quite in order).
            if arrivals.drainsInSameBurst(arrival: arrival, lastDuration: lastDuration) { backlog = true }
            if backlog { delay.forgetUndo() }
            return backlog
        }
        let draining = arrivals.drainsBehindNewest(relative: relative, arrival: arrival)
        if outage && !draining {
            if outageRun == 0 { outageRunStart = (arrival, relative) }
            outageRun += 1
        } else {
            outageRun = 0
        }
        if draining {
            backlog = true
            // The packet before it headed the burst: its delay was the stall's, not jitter.
            let headArrival = arrivals.newestArrival
            if delay.undoLast(lossRecent: loss.isRecent(at: headArrival), lastDuration: lastDuration) {
                statistics.backlog += 1
            }
        }
        arrivals.noteNewest(relative: relative, arrival: arrival, consecutive: seq == loss.highestSequence + 1,
                            late: backlog || late)
        if backlog { delay.forgetUndo() }
        return backlog
    }

    /// Newest packets in a row too late to wait for, arriving as fast as they were sent (the
    /// run's arrivals spanning at least three quarters of its timestamps) for 40 ms of audio:
    /// not a stalled queue draining (that comes faster than real time) but a path that got
    /// longer for good — a route change. Without this every packet was dropped as late until
    /// the delay window forgot the old path: 5 s of silence after a 300 ms step
    /// (`testALongerPathRestartsPlayoutInsteadOfDroppingEverything`).
    private func pathGotLonger(relative: Int64, arrival: Int64) -> Bool {
        let sent = relative - outageRunStart.relative, arrived = arrival - outageRunStart.arrival
        return outageRun >= 2 && sent >= Self.pathChangeEvidenceMs * timing.samplesPerMs && arrived * 4 >= sent * 3
    }

    /// How much audio arriving steadily too late makes a new path (a few packets; a glitch
    /// this long either way is what a route change costs).
    static let pathChangeEvidenceMs: Int64 = 40

    private func store(
        sequence seq: Int64, timestamp: UInt32, relative: Int64, duration: Int64, told: Bool, arrival: Int64,
        payload: UnsafeRawBufferPointer, newest: Bool, backlog: Bool
    ) -> JitterBufferInsertResult {
        let index = slots.index(of: seq)
        if !slots.isFree(index) { return .outOfRange }   // defensive: never overwrite
        if !started { loss.extendBase(to: seq) }
        if loss.commit(sequence: seq, timestamp: timestamp, newest: newest) { statistics.reordered += 1 }
        slots.put(JitterSlotStore.Slot(sequence: seq, relative: relative, duration: duration, told: told, timestamp: timestamp,
                                       length: payload.count),
                  at: index, payload: payload)
        statistics.received += 1
        delay.noteTransit(arrival - relative)
        if backlog {
            statistics.backlog += 1
        } else {
            recordDelay(arrival - relative, relative: relative, duration: duration, late: false, arrival: arrival, newest: newest)
        }
        return .accepted
    }

    /// Adds one relative delay to the estimator's window (which recomputes the target).
    private func recordDelay(_ delayValue: Int64, relative: Int64, duration: Int64, late: Bool, arrival: Int64, newest: Bool) {
        delay.record(delayValue, relative: relative, duration: duration, late: late, arrival: arrival, newest: newest,
                     lossRecent: loss.isRecent(at: arrival), lastDuration: lastDuration)
    }

    // MARK: - Helpers

    /// Slot of the next packet to play: the lowest sequence number after the last played.
    private func nextBuffered() -> Int? {
        slots.next(after: lastPlayedSequence, highest: loss.highestSequence)
    }

    private func shed(_ samples: Int64) {
        statistics.countShed(samples, samplesPerMs: timing.samplesPerMs)
    }

    /// When playout lags the schedule by more than `threshold`, jumps forward to it,
    /// dropping the packets that end before it (counted as skipped) and landing on the start
    /// of a packet that spans it. Returns how much `ahead` grew.
    private func catchUp(ahead: Double, beyond threshold: Double) -> Double {
        guard -ahead > threshold else { return 0 }
        let schedule = playPosition + Int64(min(-ahead, 1e15))
        let (dropped, highestDropped) = slots.dropEnding(by: schedule)
        if dropped > 0 { lastPlayedSequence = max(lastPlayedSequence, highestDropped) }
        let landing = slots.earliestStart(before: schedule)
        let moved = max(0, landing - playPosition)
        guard moved > 0 || dropped > 0 else { return 0 }
        statistics.countShed(moved, drops: max(dropped, 1), samplesPerMs: timing.samplesPerMs)
        playPosition += moved
        if slots.count == 0 { emptySamples += moved }
        excessSince = JitterBufferTiming.none
        return Double(moved)
    }

    private func publishStatistics() {
        statistics.publish(lost: loss.lost, targetDelayMs: delay.targetMs, jitterMs: delay.jitterMs, bufferedPackets: slots.count)
    }
}
