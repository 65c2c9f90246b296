import RoomBase
import RoomMedia



/// One simulated datagram as the receiver sees it.
struct MediaSimPacket {
    var frame: Int          // sender frame index (what the payload says)
    var sequence: UInt16
    var timestamp: UInt32
    var arrival: Int64      // receiver clock, samples
    var order: Int          // tie-break: emission order
    /// Samples the packet lasts, told to the buffer as Opus would (nil: not told).
    var duration: Int? = nil
}

/// Builds a sender's packet stream with impairments. Times in samples at 48 kHz.
struct MediaStreamBuilder {
    var frames = 500
    var frameSamples = 480
    /// Packet durations in samples, cycled (the sender changes its frame size); nil: all
    /// `frameSamples`.
    var durations: [Int]?
    /// Whether the receiver is told each packet's duration (as RemoteStreams does from the
    /// Opus TOC byte); false: it must infer it from the timestamps.
    var tellDuration = true
    var firstSequence: UInt16 = 1000
    var firstTimestamp: UInt32 = 123_456
    /// Network delay every packet has.
    var baseDelay: Int64 = 1440            // 30 ms
    /// Sender clock error: positive = sender runs fast.
    var driftPPM: Double = 0
    /// Extra delay per frame (jitter), samples; nil = none.
    var jitter: ((Int, inout SplitMix64) -> Int64)?
    /// Frames the sender does not send at all (DTX): sequence stays contiguous.
    var dtxFrames: Set<Int> = []
    /// Frames sent but lost in the network.
    var lostFrames: Set<Int> = []

    /// Returns the packets sorted by arrival, and the sequence numbers per sent frame.
    func build(rng: inout SplitMix64) -> [MediaSimPacket] {
        var out: [MediaSimPacket] = []
        var seq = firstSequence
        let rate = 1 / (1 + driftPPM * 1e-6)
        var offset = 0
        for k in 0 ..< frames {
            let duration = durations.map { $0[k % $0.count] } ?? frameSamples
            defer { offset += duration }
            if dtxFrames.contains(k) { continue }
            let send = Int64((Double(offset) * rate).rounded())
            let extra = jitter?(k, &rng) ?? 0
            let p = MediaSimPacket(
                frame: k, sequence: seq,
                timestamp: firstTimestamp &+ UInt32(truncatingIfNeeded: offset),
                arrival: send + baseDelay + extra, order: out.count, duration: tellDuration ? duration : nil)
            seq &+= 1
            if lostFrames.contains(k) { continue }
            out.append(p)
        }
        return out
    }
}

func sortByArrival(_ packets: [MediaSimPacket]) -> [MediaSimPacket] {
    packets.sorted { ($0.arrival, $0.order) < ($1.arrival, $1.order) }
}

/// What the receiver played, frame by frame.
struct MediaPlayoutLog {
    enum Event: Hashable {
        case decode(frame: Int)
        case fec(nextFrame: Int)
        case conceal
        case silence
    }
    var events: [Event] = []
    /// Samples each decision covered (same index as `events`).
    var eventSamples: [Int] = []
    var callTimes: [Int64] = []
    /// Receiver time at which each sender frame was decoded.
    var decodeTime: [Int: Int64] = [:]
    var insertResults: [JitterBufferInsertResult] = []
    /// Statistics sampled after every call.
    var samples: [JitterBufferStatistics] = []

    var decodedFrames: [Int] {
        events.compactMap { if case .decode(let f) = $0 { return f } else { return nil } }
    }
    func count(_ predicate: (Event) -> Bool) -> Int { events.filter(predicate).count }
}

func frameNumber(_ payload: UnsafeRawBufferPointer) -> Int {
    precondition(payload.count == 4)
    return Int(payload.loadUnaligned(as: UInt32.self))
}

/// Feeds `packets` (sorted by arrival) to `buffer` and plays periods of `period` samples from
/// `start` until `end`, like the audio thread does (RemoteStreams): at each period it inserts
/// what has arrived, then asks `nextFrame` until the period is full, each time at the clock
/// of the sample being filled; what a decision covers beyond the period carries over. Stops
/// early once the stream's last frame has been decoded (so the tail after the stream does
/// not add concealment), unless `playPastEnd`. No period is played while `now` is in
/// `stalled`.
func runPlayout(
    _ buffer: JitterBuffer, packets: [MediaSimPacket], start: Int64 = 0, end: Int64,
    period: Int64 = 480, callPhase: Int64 = 7, playPastEnd: Bool = false, stalled: Range<Int64>? = nil
) -> MediaPlayoutLog {
    var log = MediaPlayoutLog()
    var next = 0
    var now = start + callPhase
    var carried: Int64 = 0
    let lastFrame = packets.map(\.frame).max() ?? -1
    while now < end {
        if !playPastEnd, log.decodeTime[lastFrame] != nil { break }
        while next < packets.count, packets[next].arrival <= now {
            let p = packets[next]
            var value = UInt32(p.frame)
            let r = withUnsafeBytes(of: &value) { raw in
                buffer.insert(sequenceNumber: p.sequence, timestamp: p.timestamp, arrivalSamples: p.arrival, payload: raw,
                              durationSamples: p.duration ?? 0)
            }
            log.insertResults.append(r)
            next += 1
        }
        if let stalled, stalled.contains(now) {
            // The audio thread is held up (an xrun, a slow period): packets keep arriving.
            now += period
            continue
        }
        var filled = carried
        while filled < period {
            let at = now + filled
            let decision = buffer.nextFrame(nowSamples: at, upTo: Int(period - filled))
            switch decision {
            case .decode(let packet):
                let f = frameNumber(packet.payload)
                log.events.append(.decode(frame: f))
                log.decodeTime[f] = at
            case .decodeFEC(let packet, _):
                log.events.append(.fec(nextFrame: frameNumber(packet.payload)))
            case .conceal:
                log.events.append(.conceal)
            case .silence:
                log.events.append(.silence)
            }
            precondition(decision.samples > 0, "a decision must cover time")
            log.eventSamples.append(decision.samples)
            log.callTimes.append(at)
            log.samples.append(buffer.statistics)
            filled += Int64(decision.samples)
        }
        carried = filled - period
        now += period
    }
    return log
}
