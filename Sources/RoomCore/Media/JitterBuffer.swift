/// A per-stream adaptive jitter buffer for one incoming Opus RTP stream.
///
/// It lives on the audio thread. Everything is allocated at init; `insert` and `nextFrame`
/// never allocate, lock or log. The network thread never touches it: it pushes received
/// datagrams (with their arrival time) into an SPSC ring, and the audio thread, once per
/// period, drains the ring into `insert(...)` and then calls `nextFrame(nowSamples:)`.
///
/// Time is counted in RTP clock ticks (samples at 48 kHz). `arrivalSamples` and
/// `nowSamples` must come from the same receiver clock (e.g. CLOCK_MONOTONIC scaled to
/// 48 kHz); it need not be synchronised with the sender's.
///
/// How it decides (docs/jitter-buffer.md has the full story):
/// - Each packet's *relative delay* is `arrival - (timestamp - firstTimestamp)`. Over a
///   sliding window (2 s of packets) the smallest relative delay is the fastest path through
///   the network; the target delay is the 95th percentile of (delay - smallest) taken from a
///   fixed 1 ms histogram, plus one frame, clamped to 20...200 ms. It rises at once (also
///   when a late packet shows it was too short) and falls at most 20 ms per second.
/// - A frame with timestamp `t` is due at `t + smallest + target`. Each `nextFrame` compares
///   the playout point with that schedule: more than half a frame early → insert a frame
///   (stretch); at least one frame late → drop a frame (skip; an empty frame at once, a
///   frame with audio after the excess has lasted `skipHoldMs`; more than
///   `jumpThresholdMs` behind → jump back to the schedule at once). Because the schedule
///   follows the smallest delay of the last 2 s, clock drift between sender and receiver
///   shows up as a slow slope that these corrections absorb: latency stays at the target.
/// - A missing frame whose deadline has come is classified with sequence numbers: if the
///   next packet present is the sequence successor of the last one played, the sender sent
///   nothing for this frame (DTX) → `.silence`; otherwise a packet was lost → `.decodeFEC`
///   from the next packet when it is the very next frame, else `.conceal`. With nothing
///   buffered the two cannot be told apart yet: conceal for `concealBeforeSilenceMs`, then
///   silence.
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
        public let payload: UnsafeRawBufferPointer
    }

    private struct Slot {
        var frame: Int64        // frame index; `empty` when free
        var sequence: Int64     // unwrapped sequence number
        var timestamp: UInt32
        var length: Int
        static let empty = Int64.min
    }

    public let configuration: JitterBufferConfiguration
    /// Samples per frame (480 at 10 ms).
    public let frameSamples: Int64
    /// Number of packet slots.
    public let capacity: Int

    private let samplesPerMs: Int64
    private let minimumTarget: Double
    private let maximumTarget: Double
    private let shrinkPerFrame: Double
    private let skipHoldFrames: Int
    private let concealLimitFrames: Int
    private let jumpThreshold: Double
    private let maxPayload: Int
    private let windowCapacity: Int
    private let histogramBins: Int
    private static let bitmapWords = 16                 // 1024 sequence numbers
    private static let bitmapSpan: Int64 = 1024

    // Storage, allocated once.
    private let slots: UnsafeMutablePointer<Slot>
    private let payloads: UnsafeMutableRawPointer
    private let output: UnsafeMutableRawPointer          // copy of the packet handed out
    private let window: UnsafeMutablePointer<Int64>
    private let histogram: UnsafeMutablePointer<Int32>
    private let bitmap: UnsafeMutablePointer<UInt64>

    // Stream numbering.
    private var anchored = false
    private var seqUnwrap = RTPSequenceUnwrapper()
    private var tsUnwrap = RTPTimestampUnwrapper()
    private var firstTimestamp: Int64 = 0
    private var baseSequence: Int64 = 0
    private var highestSequence: Int64 = 0
    private var bitmapTop: Int64 = 0
    private var arrivedCount = 0                // unique packets in [base, highest], in time or late
    private var lostBefore = 0                  // lost count folded in at resets

    // Buffer contents.
    private var buffered = 0
    private var highestFrame: Int64 = 0

    // Playout.
    private var started = false
    private var playFrame: Int64 = 0
    private var lastPlayedSequence: Int64 = 0
    private var emptyRun = 0
    private var excessRun = 0
    private var outOfRangeRun = 0

    // Delay estimation.
    private var windowCount = 0
    private var windowNext = 0
    private var smallestDelay: Int64 = 0
    private var rawTarget: Double
    private var target: Double
    private var jitter16: Int64 = 0             // RFC 3550 estimate, scaled by 16
    private var lastTransit: Int64?

    public private(set) var statistics = JitterBufferStatistics()

    public init(configuration: JitterBufferConfiguration = JitterBufferConfiguration()) {
        let c = configuration
        precondition([10, 20, 40, 60].contains(c.frameDurationMs), "frameDurationMs must be 10, 20, 40 or 60")
        precondition(c.clockRate >= 8000 && c.clockRate % 1000 == 0, "clockRate must be a multiple of 1 kHz")
        precondition(c.minimumDelayMs >= 0 && c.maximumDelayMs >= c.minimumDelayMs && c.maximumDelayMs <= 2000,
                     "delays must satisfy 0 <= minimum <= maximum <= 2000 ms")
        precondition(c.maxPayloadBytes > 0 && c.delayWindowMs >= c.frameDurationMs)
        precondition(c.delayPercentile > 0.5 && c.delayPercentile <= 1)
        self.configuration = c
        samplesPerMs = Int64(c.clockRate / 1000)
        frameSamples = Int64(c.frameDurationMs) * samplesPerMs
        capacity = c.capacityFrames
        minimumTarget = Double(Int64(c.minimumDelayMs) * samplesPerMs)
        maximumTarget = Double(Int64(c.maximumDelayMs) * samplesPerMs)
        shrinkPerFrame = c.shrinkRateMsPerSecond * Double(c.frameDurationMs) / 1000 * Double(samplesPerMs)
        skipHoldFrames = max(1, c.skipHoldMs / c.frameDurationMs)
        concealLimitFrames = max(1, c.concealBeforeSilenceMs / c.frameDurationMs)
        jumpThreshold = Double(Int64(max(c.jumpThresholdMs, 2 * c.frameDurationMs)) * samplesPerMs)
        maxPayload = c.maxPayloadBytes
        windowCapacity = c.delayWindowMs / c.frameDurationMs
        histogramBins = c.maximumDelayMs + 1
        rawTarget = minimumTarget
        target = minimumTarget

        slots = .allocate(capacity: capacity)
        slots.initialize(repeating: Slot(frame: Slot.empty, sequence: 0, timestamp: 0, length: 0), count: capacity)
        payloads = .allocate(byteCount: capacity * c.maxPayloadBytes, alignment: 16)
        output = .allocate(byteCount: c.maxPayloadBytes, alignment: 16)
        window = .allocate(capacity: windowCapacity)
        window.initialize(repeating: 0, count: windowCapacity)
        histogram = .allocate(capacity: histogramBins)
        histogram.initialize(repeating: 0, count: histogramBins)
        bitmap = .allocate(capacity: Self.bitmapWords)
        bitmap.initialize(repeating: 0, count: Self.bitmapWords)
        publishStatistics()
    }

    deinit {
        slots.deallocate()
        payloads.deallocate()
        output.deallocate()
        window.deallocate()
        histogram.deallocate()
        bitmap.deallocate()
    }

    // MARK: - Public interface

    /// Starts over on a new stream (call on SSRC change). Statistics are kept (the lost
    /// count of the old stream is folded in); the target delay is kept as a starting point.
    public func reset() {
        lostBefore = lostNow()
        anchored = false
        seqUnwrap.reset()
        tsUnwrap.reset()
        arrivedCount = 0
        for i in 0 ..< capacity { slots[i].frame = Slot.empty }
        buffered = 0
        started = false
        emptyRun = 0
        excessRun = 0
        outOfRangeRun = 0
        windowCount = 0
        windowNext = 0
        lastTransit = nil
        publishStatistics()
    }

    /// Zeroes the counters (not the state).
    public func resetStatistics() {
        statistics = JitterBufferStatistics()
        lostBefore = 0
        baseSequence = highestSequence + 1
        arrivedCount = 0
        publishStatistics()
    }

    /// Stores one packet. Copies `payload` into a preallocated slot.
    /// `arrivalSamples`: when the datagram arrived, on the receiver clock, in samples.
    @discardableResult
    public func insert(
        sequenceNumber: UInt16, timestamp: UInt32, arrivalSamples: Int64, payload: UnsafeRawBufferPointer
    ) -> JitterBufferInsertResult {
        guard payload.count <= maxPayload else {
            statistics.oversize += 1
            return .payloadTooLarge
        }
        let result = insertChecked(sequenceNumber, timestamp, arrivalSamples, payload)
        if result == .outOfRange {
            outOfRangeRun += 1
            statistics.outOfRange += 1
            if outOfRangeRun >= configuration.resyncAfterOutOfRange {
                reset()
                statistics.resyncs += 1
                let again = insertChecked(sequenceNumber, timestamp, arrivalSamples, payload)
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
    public func insert(_ packet: RTPPacket, datagram: UnsafeRawBufferPointer, arrivalSamples: Int64)
        -> JitterBufferInsertResult
    {
        insert(sequenceNumber: packet.sequenceNumber, timestamp: packet.timestamp,
               arrivalSamples: arrivalSamples, payload: packet.payload(in: datagram))
    }

    /// Decides the next frame; call once per frame duration, after inserting what arrived.
    /// `nowSamples`: the receiver clock (same clock as the arrival times).
    public func nextFrame(nowSamples now: Int64) -> PlayoutDecision {
        if target > rawTarget { target = max(rawTarget, target - shrinkPerFrame) }
        defer { publishStatistics() }

        if !started {
            guard buffered > 0 else { return .silence }
            let earliest = earliestBufferedFrame()
            let ideal = Double(now - smallestDelay) - target
            if Double(earliest * frameSamples) > ideal { return .silence }    // still filling
            started = true
            playFrame = earliest
            lastPlayedSequence = slots[slotIndex(earliest)].sequence - 1
            emptyRun = 0
            excessRun = 0
        }

        // Positive: playing earlier than the target delay asks for (delay too short).
        var ahead = Double(playFrame * frameSamples) - (Double(now - smallestDelay) - target)
        let frame = Double(frameSamples)

        // Far too much delay (e.g. the audio thread stalled while packets kept coming):
        // jump straight back to the target instead of dropping one frame at a time.
        ahead += catchUp(ahead: ahead, beyond: jumpThreshold)

        var skippedThisCall = false
        while true {
            statistics.currentDelayMs = (Double(now - smallestDelay) - Double(playFrame * frameSamples)) / Double(samplesPerMs)
            let index = slotIndex(playFrame)
            if slots[index].frame == playFrame {
                emptyRun = 0
                if ahead >= frame / 2 {
                    // Well below the target: insert a frame, play this one next time.
                    statistics.stretched += 1
                    excessRun = 0
                    return .conceal
                }
                if ahead <= -frame {
                    excessRun += 1
                    if excessRun >= skipHoldFrames, !skippedThisCall {
                        _ = dropFrame(playFrame)
                        statistics.skipped += 1
                        playFrame += 1
                        ahead += frame
                        excessRun = 0
                        skippedThisCall = true
                        continue
                    }
                } else {
                    excessRun = 0
                }
                let slot = slots[index]
                slots[index].frame = Slot.empty
                buffered -= 1
                lastPlayedSequence = slot.sequence
                playFrame += 1
                statistics.decoded += 1
                return .decode(packet(at: index, slot))
            }

            // Missing. Find the next packet present to tell loss from DTX.
            var next: Int64?
            if buffered > 0 {
                var f = playFrame + 1
                while f <= highestFrame && f < playFrame + Int64(capacity) {
                    if slots[slotIndex(f)].frame == f { next = f; break }
                    f += 1
                }
            }
            let isLoss: Bool
            if let g = next {
                emptyRun = 0
                let missingPackets = slots[slotIndex(g)].sequence - lastPlayedSequence - 1
                isLoss = missingPackets >= g - playFrame
            } else {
                isLoss = emptyRun < concealLimitFrames
            }

            if ahead > 0 {
                // Its deadline has not come: wait a frame.
                statistics.stretched += 1
                return isLoss ? .conceal : .silence
            }
            if ahead <= -frame, !skippedThisCall {
                // Above target and nothing to lose by dropping this one.
                statistics.skipped += 1
                playFrame += 1
                ahead += frame
                excessRun = 0
                skippedThisCall = true
                if next == nil { emptyRun += 1 }
                continue
            }
            playFrame += 1
            if next == nil { emptyRun += 1 }
            if isLoss, let g = next, g == playFrame {
                statistics.fecRecovered += 1
                let index = slotIndex(g)
                return .decodeFEC(packet(at: index, slots[index]))
            }
            if isLoss {
                statistics.concealed += 1
                return .conceal
            }
            statistics.silence += 1
            return .silence
        }
    }

    // MARK: - Insert

    private func insertChecked(
        _ sequence: UInt16, _ timestamp: UInt32, _ arrival: Int64, _ payload: UnsafeRawBufferPointer
    ) -> JitterBufferInsertResult {
        if !anchored {
            anchored = true
            let s = seqUnwrap.unwrap(sequence)
            firstTimestamp = tsUnwrap.unwrap(timestamp)
            baseSequence = s
            highestSequence = s
            bitmapTop = s
            for i in 0 ..< Self.bitmapWords { bitmap[i] = 0 }
            highestFrame = 0
            return store(sequence: s, timestamp: timestamp, frame: 0, arrival: arrival, relative: 0, payload: payload,
                         newest: true)
        }

        let seq = seqUnwrap.peek(sequence)
        let ts = tsUnwrap.peek(timestamp)
        let relative = ts - firstTimestamp
        let frame = floorDiv(relative + frameSamples / 2, frameSamples)

        if seq <= bitmapTop - Self.bitmapSpan { return .outOfRange }      // older than we can judge
        if isMarked(seq) {
            statistics.duplicates += 1
            return .duplicate
        }

        let newest = seq > highestSequence
        if started {
            // Playout far behind the schedule this packet's arrival implies (nextFrame has
            // not been called for a while): catch up before judging the packet.
            if windowCount > 0 {
                _ = catchUp(ahead: Double(playFrame * frameSamples) - (Double(arrival - smallestDelay) - target),
                            beyond: maximumTarget)
            }
            if frame >= playFrame + Int64(capacity) { return .outOfRange }
            if frame < playFrame {
                if frame < playFrame - Int64(4 * capacity) { return .outOfRange }
                if newest, emptyRun >= concealLimitFrames, buffered == 0 {
                    // The sender paused and came back later than the old timing allows
                    // (its clock is slower, or the path got longer): start playout afresh.
                    started = false
                    windowCount = 0
                    windowNext = 0
                    statistics.playoutRestarts += 1
                    return store(sequence: seq, timestamp: timestamp, frame: frame, arrival: arrival,
                                 relative: relative, payload: payload, newest: newest)
                }
                // Arrived after its frame was played: learn from it, then drop it.
                commitSequence(seq, newest: newest)
                _ = tsUnwrap.unwrap(timestamp)
                recordDelay(arrival - relative, late: true)
                statistics.late += 1
                return .late
            }
        } else if buffered > 0 {
            let low = min(earliestBufferedFrame(), frame)
            let high = max(highestFrame, frame)
            if high - low >= Int64(capacity) { return .outOfRange }
        }
        return store(sequence: seq, timestamp: timestamp, frame: frame, arrival: arrival, relative: relative,
                     payload: payload, newest: newest)
    }

    private func store(
        sequence seq: Int64, timestamp: UInt32, frame: Int64, arrival: Int64, relative: Int64,
        payload: UnsafeRawBufferPointer, newest: Bool
    ) -> JitterBufferInsertResult {
        let index = slotIndex(frame)
        if slots[index].frame == frame {
            // Same frame under another sequence number: keep the first.
            statistics.duplicates += 1
            return .duplicate
        }
        if slots[index].frame != Slot.empty { return .outOfRange }   // defensive: never overwrite
        if !started, seq < baseSequence { baseSequence = seq }
        commitSequence(seq, newest: newest)
        _ = tsUnwrap.unwrap(timestamp)
        if payload.count > 0, let src = payload.baseAddress {
            (payloads + index * maxPayload).copyMemory(from: src, byteCount: payload.count)
        }
        slots[index] = Slot(frame: frame, sequence: seq, timestamp: timestamp, length: payload.count)
        if buffered == 0 || frame > highestFrame { highestFrame = frame }
        buffered += 1
        statistics.received += 1
        recordDelay(arrival - relative, late: false)
        return .accepted
    }

    /// Marks a sequence number as arrived and advances the numbering.
    private func commitSequence(_ seq: Int64, newest: Bool) {
        _ = seqUnwrap.unwrap(UInt16(truncatingIfNeeded: seq))
        if newest {
            highestSequence = seq
        } else if seq < highestSequence {
            statistics.reordered += 1
        }
        mark(seq)
        if seq >= baseSequence { arrivedCount += 1 }
    }

    // MARK: - Delay estimation

    /// Adds one relative delay to the window and recomputes the target.
    private func recordDelay(_ delay: Int64, late: Bool) {
        // RFC 3550 §6.4.1 interarrival jitter, in arrival order, scaled by 16 (§A.8).
        if let previous = lastTransit {
            let d = abs(delay - previous)
            jitter16 += d - ((jitter16 + 8) >> 4)
        }
        lastTransit = delay

        window[windowNext] = delay
        windowNext = windowNext + 1 == windowCapacity ? 0 : windowNext + 1
        if windowCount < windowCapacity { windowCount += 1 }

        var smallest = Int64.max
        for i in 0 ..< windowCount where window[i] < smallest { smallest = window[i] }
        smallestDelay = smallest

        // Percentile of (delay - smallest) from a 1 ms histogram.
        for i in 0 ..< histogramBins { histogram[i] = 0 }
        for i in 0 ..< windowCount {
            let bin = min(Int((window[i] - smallest) / samplesPerMs), histogramBins - 1)
            histogram[bin] += 1
        }
        let rank = Int((configuration.delayPercentile * Double(windowCount)).rounded(.up))
        var cumulative = 0
        var bin = 0
        while bin < histogramBins {
            cumulative += Int(histogram[bin])
            if cumulative >= rank { break }
            bin += 1
        }
        let spread = Double(Int64(bin + 1) * samplesPerMs)   // upper edge of the bin
        rawTarget = clampTarget(spread + Double(frameSamples))
        if late {
            // Grow at once to cover the packet that missed its turn.
            let needed = clampTarget(Double(delay - smallest + samplesPerMs) + Double(frameSamples))
            if needed > rawTarget { rawTarget = needed }
        }
        if rawTarget > target { target = rawTarget }
    }

    private func clampTarget(_ value: Double) -> Double {
        min(max(value, minimumTarget), maximumTarget)
    }

    // MARK: - Helpers

    private func slotIndex(_ frame: Int64) -> Int {
        let c = Int64(capacity)
        let r = frame % c
        return Int(r < 0 ? r + c : r)
    }

    private func floorDiv(_ a: Int64, _ b: Int64) -> Int64 {
        let q = a / b
        return (a % b != 0 && (a < 0) != (b < 0)) ? q - 1 : q
    }

    private func earliestBufferedFrame() -> Int64 {
        var earliest = Int64.max
        for i in 0 ..< capacity where slots[i].frame != Slot.empty && slots[i].frame < earliest {
            earliest = slots[i].frame
        }
        return earliest
    }

    /// Frees the slot of `frame` if it holds that frame; returns whether it did.
    private func dropFrame(_ frame: Int64) -> Bool {
        let index = slotIndex(frame)
        guard slots[index].frame == frame else { return false }
        lastPlayedSequence = slots[index].sequence
        slots[index].frame = Slot.empty
        buffered -= 1
        return true
    }

    /// Copies a slot's payload to the output buffer, so what the caller holds stays valid
    /// whatever is inserted before the next `nextFrame`.
    private func packet(at index: Int, _ slot: Slot) -> Packet {
        if slot.length > 0 { output.copyMemory(from: payloads + index * maxPayload, byteCount: slot.length) }
        return Packet(
            sequenceNumber: UInt16(truncatingIfNeeded: slot.sequence),
            timestamp: slot.timestamp,
            payload: UnsafeRawBufferPointer(start: output, count: slot.length))
    }

    /// When playout lags the schedule by more than `threshold`, jumps forward to it,
    /// dropping what lies between (counted as skipped). Returns how much `ahead` grew.
    private func catchUp(ahead: Double, beyond threshold: Double) -> Double {
        guard -ahead > threshold else { return 0 }
        let jump = Int64(min(-ahead / Double(frameSamples), 1e12))
        guard jump > 0 else { return 0 }
        if jump >= Int64(capacity) {
            for i in 0 ..< capacity where slots[i].frame != Slot.empty && slots[i].frame < playFrame + jump {
                lastPlayedSequence = max(lastPlayedSequence, slots[i].sequence)
                slots[i].frame = Slot.empty
                buffered -= 1
            }
        } else {
            for f in playFrame ..< playFrame + jump { _ = dropFrame(f) }
        }
        statistics.skipped += Int(jump)
        playFrame += jump
        excessRun = 0
        return Double(jump * frameSamples)
    }

    private func isMarked(_ seq: Int64) -> Bool {
        if seq > bitmapTop || seq <= bitmapTop - Self.bitmapSpan { return false }
        let bit = Int(seq & (Self.bitmapSpan - 1))
        return bitmap[bit >> 6] & (1 << UInt64(bit & 63)) != 0
    }

    private func mark(_ seq: Int64) {
        if seq > bitmapTop {
            if seq - bitmapTop >= Self.bitmapSpan {
                for i in 0 ..< Self.bitmapWords { bitmap[i] = 0 }
            } else {
                var s = bitmapTop + 1
                while s <= seq {
                    let bit = Int(s & (Self.bitmapSpan - 1))
                    bitmap[bit >> 6] &= ~(1 << UInt64(bit & 63))
                    s += 1
                }
            }
            bitmapTop = seq
        }
        if seq <= bitmapTop - Self.bitmapSpan { return }
        let bit = Int(seq & (Self.bitmapSpan - 1))
        bitmap[bit >> 6] |= 1 << UInt64(bit & 63)
    }

    private func lostNow() -> Int {
        guard anchored else { return lostBefore }
        let expected = Int(highestSequence - baseSequence + 1)
        return lostBefore + max(0, expected - arrivedCount)
    }

    private func publishStatistics() {
        statistics.lost = lostNow()
        statistics.targetDelayMs = target / Double(samplesPerMs)
        statistics.jitterMs = Double(jitter16 >> 4) / Double(samplesPerMs)
        statistics.bufferedPackets = buffered
    }
}
