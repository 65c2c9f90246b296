import RoomBase
import RoomMedia
import XCTest

final class JitterBufferTests: XCTestCase {
    private let ms: Int64 = 48

    // MARK: - Clean streams

    func testInOrderStreamPlaysEverythingAtMinimumDelay() {
        var rng = SplitMix64(seed: 1)
        let stream = MediaStreamBuilder(frames: 1000)
        let packets = sortByArrival(stream.build(rng: &rng))
        let jb = JitterBuffer()
        let log = runPlayout(jb, packets: packets, end: packets.last!.arrival + 200 * ms)

        XCTAssertEqual(log.decodedFrames, Array(0 ..< 1000), "every frame decoded once, in order")
        let s = jb.statistics
        XCTAssertEqual(s.received, 1000)
        XCTAssertEqual(s.lost, 0)
        XCTAssertEqual(s.late, 0)
        XCTAssertEqual(s.concealed, 0)
        XCTAssertEqual(s.fecRecovered, 0)
        XCTAssertEqual(s.skipped, 0)
        XCTAssertEqual(s.stretched, 0)
        XCTAssertEqual(s.targetDelayMs, 20, accuracy: 0.001)
        // Every frame waited between 20 and 30 ms after it arrived (one call period of slack).
        for p in packets {
            let wait = Double(log.decodeTime[p.frame]! - p.arrival) / 48
            XCTAssertGreaterThanOrEqual(wait, 20 - 0.01)
            XCTAssertLessThan(wait, 30)
        }
        XCTAssertEqual(log.samples[500].currentDelayMs, 25, accuracy: 5)
    }

    func testTwentyMillisecondFrames() {
        var rng = SplitMix64(seed: 2)
        var stream = MediaStreamBuilder(frames: 300)
        stream.frameSamples = 960
        stream.lostFrames = [100]
        let packets = sortByArrival(stream.build(rng: &rng))
        var config = JitterBufferConfiguration(frameDurationMs: 20)
        config.playoutStepMs = 20                                 // the caller's period below
        let jb = JitterBuffer(configuration: config)
        XCTAssertEqual(jb.frameSamples, 960)
        let log = runPlayout(jb, packets: packets, end: packets.last!.arrival + 200 * ms, period: 960)
        XCTAssertEqual(log.decodedFrames, Array(0 ..< 100) + Array(101 ..< 300))
        XCTAssertEqual(jb.statistics.fecRecovered, 1)
        XCTAssertEqual(jb.statistics.lost, 1)
        XCTAssertEqual(jb.statistics.targetDelayMs, 26, accuracy: 0.01,
                       "after the loss: the 1 ms histogram bin + the 5 ms margin + one 20 ms packet of look-ahead for FEC")
    }

    func testSingleLossIsRecoveredFromNextPacketsFEC() {
        var rng = SplitMix64(seed: 3)
        var stream = MediaStreamBuilder(frames: 100)
        stream.lostFrames = [40]
        let packets = sortByArrival(stream.build(rng: &rng))
        let jb = JitterBuffer()
        let log = runPlayout(jb, packets: packets, end: packets.last!.arrival + 200 * ms)
        guard let i = log.events.firstIndex(of: .decode(frame: 39)) else { return XCTFail("frame 39 not decoded") }
        XCTAssertEqual(Array(log.events[i ... i + 2]), [.decode(frame: 39), .fec(nextFrame: 41), .decode(frame: 41)])
        XCTAssertEqual(jb.statistics.lost, 1)
        XCTAssertEqual(jb.statistics.fecRecovered, 1)
        XCTAssertEqual(jb.statistics.concealed, 0)
    }

    // MARK: - Reordering, duplicates

    func testNeighbourSwapsAreAllDecodedAndCountedAsReordered() {
        var rng = SplitMix64(seed: 4)
        let stream = MediaStreamBuilder(frames: 1000)
        var packets = stream.build(rng: &rng)
        var swaps = 0
        var k = 5
        while k + 1 < packets.count {
            let a = packets[k].arrival
            packets[k].arrival = packets[k + 1].arrival + 1
            packets[k + 1].arrival = a
            swaps += 1
            k += 7 + Int(rng.next() % 5)
        }
        let jb = JitterBuffer()
        let log = runPlayout(jb, packets: sortByArrival(packets), end: packets.last!.arrival + 200 * ms)
        XCTAssertEqual(log.decodedFrames, Array(0 ..< 1000))
        let s = jb.statistics
        XCTAssertEqual(s.reordered, swaps)
        XCTAssertGreaterThan(swaps, 50)
        XCTAssertEqual(s.lost, 0)
        XCTAssertEqual(s.late, 0)
        XCTAssertEqual(s.concealed + s.fecRecovered, 0)
    }

    func testDuplicatesAreDroppedAndCounted() {
        var rng = SplitMix64(seed: 5)
        let stream = MediaStreamBuilder(frames: 600)
        let original = stream.build(rng: &rng)
        var packets = original
        var copies = 0
        for (i, p) in original.enumerated() where i % 5 == 0 {
            var soon = p
            soon.arrival += 3 * ms                         // still in the buffer
            soon.order = packets.count
            packets.append(soon)
            var stale = p
            stale.arrival += 300 * ms                      // long after it was played
            stale.order = packets.count
            packets.append(stale)
            copies += 2
        }
        let jb = JitterBuffer()
        let log = runPlayout(jb, packets: sortByArrival(packets), end: packets.map(\.arrival).max()! + 200 * ms,
                             playPastEnd: true)
        XCTAssertEqual(log.decodedFrames, Array(0 ..< 600), "each frame decoded exactly once")
        XCTAssertEqual(jb.statistics.duplicates, copies)
        XCTAssertEqual(log.insertResults.filter { $0 == .duplicate }.count, copies)
        XCTAssertEqual(jb.statistics.received, 600)
        XCTAssertEqual(jb.statistics.late, 0, "a copy of a played packet is a duplicate, not late")
        XCTAssertEqual(jb.statistics.lost, 0)
    }

    // MARK: - Loss

    func testRandomLossIsRecoveredOrConcealedAndCountsAddUp() {
        for (rate, seed) in [(0.05, UInt64(11)), (0.10, 12), (0.20, 13)] {
            var rng = SplitMix64(seed: seed)
            var stream = MediaStreamBuilder(frames: 3000)
            for k in 1 ..< stream.frames - 5 where rng.unit() < rate { stream.lostFrames.insert(k) }
            let packets = sortByArrival(stream.build(rng: &rng))
            let jb = JitterBuffer()
            let log = runPlayout(jb, packets: packets, end: packets.last!.arrival + 200 * ms)
            let s = jb.statistics
            let lost = stream.lostFrames.count
            XCTAssertEqual(s.lost, lost, "rate \(rate)")
            XCTAssertEqual(s.fecRecovered + s.concealed, lost, "each lost frame either FEC-recovered or concealed, rate \(rate)")
            XCTAssertEqual(s.decoded, 3000 - lost)
            XCTAssertEqual(s.late, 0)
            XCTAssertEqual(s.silence, 0, "no DTX here: losses must not turn into silence")
            // A lost frame is FEC-recovered exactly when the frame after it arrived.
            let recoverable = stream.lostFrames.filter { !stream.lostFrames.contains($0 + 1) }.count
            XCTAssertEqual(s.fecRecovered, recoverable, "rate \(rate)")
            XCTAssertEqual(log.decodedFrames, (0 ..< 3000).filter { !stream.lostFrames.contains($0) })
            // FEC events name the packet right after the missing frame.
            for case .fec(let next) in log.events { XCTAssertTrue(stream.lostFrames.contains(next - 1)) }
            XCTAssertLessThanOrEqual(s.currentDelayMs, 30)
        }
    }

    // MARK: - Jitter

    /// Uniform ±20 ms jitter around a 40 ms path delay.
    private func jitteryStream(frames: Int, calmAfter: Int = .max) -> MediaStreamBuilder {
        var stream = MediaStreamBuilder(frames: frames)
        stream.baseDelay = 40 * ms
        stream.jitter = { k, rng in
            k >= calmAfter ? 0 : Int64(((rng.unit() * 2 - 1) * 20 * 48).rounded())
        }
        return stream
    }

    func testTargetGrowsToCoverJitterAndLatePacketsStayRare() {
        var rng = SplitMix64(seed: 21)
        let stream = jitteryStream(frames: 3000)
        let packets = sortByArrival(stream.build(rng: &rng))
        let jb = JitterBuffer()
        let log = runPlayout(jb, packets: packets, end: packets.last!.arrival + 200 * ms)
        let s = jb.statistics
        XCTAssertGreaterThanOrEqual(s.targetDelayMs, 40, "the spread is 40 ms: the target must cover it")
        XCTAssertLessThanOrEqual(s.targetDelayMs, 65)
        XCTAssertLessThan(Double(s.late) / 3000, 0.02, "late \(s.late)")
        XCTAssertEqual(s.lost, 0, "late packets arrived: they are late, not lost")
        // Every packet was played, or arrived late, or was dropped to shrink the delay.
        XCTAssertLessThanOrEqual(s.decoded + s.late, 3000)
        XCTAssertGreaterThanOrEqual(s.decoded + s.late + s.skipped, 3000)
        // Nothing was lost, so every concealed or recovered frame belongs to a late packet.
        XCTAssertLessThanOrEqual(s.fecRecovered + s.concealed, s.late)
        XCTAssertGreaterThanOrEqual(s.fecRecovered + s.concealed + s.skipped, s.late)
        XCTAssertGreaterThan(s.jitterMs, 5, "RFC 3550 jitter of uniform ±20 ms is about 13 ms")
        XCTAssertLessThan(s.jitterMs, 20)
        // After the first second, the delay is at the target (within the correction band).
        for sample in log.samples[100...] where sample.bufferedPackets > 0 {
            XCTAssertLessThanOrEqual(sample.currentDelayMs, sample.targetDelayMs + 15)
        }
        // Decoded frames stay in order.
        XCTAssertEqual(log.decodedFrames, log.decodedFrames.sorted())
    }

    func testTargetShrinksBackWithinSecondsAfterJitterStops() {
        var rng = SplitMix64(seed: 22)
        let calmAfter = 2000                                  // 20 s of jitter, then 20 s calm
        let stream = jitteryStream(frames: 4000, calmAfter: calmAfter)
        let packets = sortByArrival(stream.build(rng: &rng))
        let jb = JitterBuffer()
        let log = runPlayout(jb, packets: packets, end: packets.last!.arrival + 200 * ms)
        let calmCall = log.callTimes.firstIndex { $0 >= Int64(calmAfter * 480) + 40 * ms }!
        XCTAssertGreaterThanOrEqual(log.samples[calmCall].targetDelayMs, 40)
        // Within 5 s of calm the target is back at the minimum and the delay follows.
        let later = log.samples[calmCall + 500]
        XCTAssertEqual(later.targetDelayMs, 20, accuracy: 0.5)
        XCTAssertLessThanOrEqual(later.currentDelayMs, 30.5)
        // ...and the way down was by dropping frames, without losing any audio frames
        // beyond those skipped, and without late packets in the calm part.
        XCTAssertGreaterThan(jb.statistics.skipped, 0)
        XCTAssertEqual(log.samples.last!.late, log.samples[calmCall].late)
        // The target never went down faster than 20 ms/s.
        for i in 1 ..< log.samples.count {
            XCTAssertGreaterThanOrEqual(log.samples[i].targetDelayMs, log.samples[i - 1].targetDelayMs - 0.2001)
        }
    }

    // MARK: - Clock drift

    func testSenderClockDriftKeepsDelayBounded() {
        for ppm in [500.0, -500.0] {
            var rng = SplitMix64(seed: 31)
            var stream = MediaStreamBuilder(frames: 6000)                   // 60 s
            stream.driftPPM = ppm
            stream.jitter = { _, rng in Int64(rng.unit() * 2 * 48) }   // a little noise, 0-2 ms
            let packets = sortByArrival(stream.build(rng: &rng))
            let jb = JitterBuffer()
            let log = runPlayout(jb, packets: packets, end: packets.last!.arrival + 200 * ms)
            // Waiting time of each decoded packet, from arrival to playout.
            var waits: [Double] = []
            for p in packets { if let t = log.decodeTime[p.frame] { waits.append(Double(t - p.arrival) / 48) } }
            XCTAssertGreaterThan(waits.count, 5990)
            let first = waits[100 ..< 1100].reduce(0, +) / 1000
            let last = waits[(waits.count - 1000)...].reduce(0, +) / 1000
            // Without correction the wait would drift by 30 ms over the run. With it, every
            // wait stays in the band the controller allows around the 20 ms target: half a
            // frame below to one frame above, widened by the 0-2 ms noise and, for a slow
            // sender, by the 1 ms the 2 s window's minimum lags behind (500 ppm × 2 s).
            XCTAssertLessThan(abs(last - first), 10, "ppm \(ppm): delay \(first) ms → \(last) ms")
            for w in waits[100...] {
                XCTAssertGreaterThanOrEqual(w, 20 - 5 - 2 - 1.5, "ppm \(ppm)")
                XCTAssertLessThanOrEqual(w, 20 + 10 + 1, "ppm \(ppm)")
            }
            let s = jb.statistics
            // 500 ppm of 60 s is 30 ms: about three frames to drop or to insert (plus at
            // most one at start-up while the smallest delay is being found; playout starts at
            // the low edge of its band, which absorbs up to a frame of a fast sender's drift).
            if ppm > 0 {
                XCTAssertGreaterThanOrEqual(s.skipped, 2, "sender fast: frames dropped")
                XCTAssertLessThanOrEqual(s.skipped, 5)
                XCTAssertEqual(s.stretched, 0)
            } else {
                XCTAssertGreaterThanOrEqual(s.stretched, 2, "sender slow: frames inserted")
                XCTAssertLessThanOrEqual(s.stretched, 5)
                XCTAssertLessThanOrEqual(s.skipped, 1)
            }
            XCTAssertEqual(s.lost, 0)
            XCTAssertLessThanOrEqual(s.late, 3)
        }
    }

    // MARK: - Wrap-around

    func testSequenceAndTimestampWrapAround() {
        var rng = SplitMix64(seed: 41)
        var stream = MediaStreamBuilder(frames: 400)
        stream.firstSequence = 65_436                 // wraps after 100 packets
        stream.firstTimestamp = UInt32.max - 480 * 150 + 17   // wraps after ~150 frames
        stream.lostFrames = [99, 100, 150]
        var packets = stream.build(rng: &rng)
        // Swap the packets either side of the sequence wrap (frames 98 and 101 remain).
        let i = packets.firstIndex { $0.frame == 101 }!
        let a = packets[i].arrival
        packets[i].arrival = packets[i + 1].arrival + 1
        packets[i + 1].arrival = a
        let jb = JitterBuffer()
        let log = runPlayout(jb, packets: sortByArrival(packets), end: packets.last!.arrival + 200 * ms)
        // Every frame plays in order, but at most one: the swapped packet 102 arrives 10 ms
        // early, a path 10 ms faster for the window's 2 s, so the buffer is a frame over its
        // target at times and drops what it can (the missing frame 99 at once, perhaps a frame
        // with audio when the early packet leaves the window).
        let expected = (0 ..< 400).filter { !stream.lostFrames.contains($0) }
        XCTAssertEqual(log.decodedFrames, log.decodedFrames.sorted())
        XCTAssertTrue(Set(log.decodedFrames).isSubset(of: expected))
        XCTAssertLessThanOrEqual(expected.count - log.decodedFrames.count, 1)
        XCTAssertEqual(jb.statistics.lost, 3)
        XCTAssertEqual(jb.statistics.reordered, 1)
        // Each lost frame is rebuilt from FEC, concealed, or dropped while the buffer is over target.
        XCTAssertGreaterThanOrEqual(jb.statistics.fecRecovered + jb.statistics.concealed, 2)
        XCTAssertGreaterThanOrEqual(jb.statistics.fecRecovered + jb.statistics.concealed + jb.statistics.skipped, 3)
        XCTAssertLessThanOrEqual(jb.statistics.skipped, 2)
        XCTAssertEqual(jb.statistics.outOfRange, 0)
    }

    // MARK: - DTX

    func testDTXGapIsSilenceNotLoss() {
        var rng = SplitMix64(seed: 51)
        var stream = MediaStreamBuilder(frames: 500)
        stream.dtxFrames = Set(100 ..< 300)           // 2 s of nothing, sequence contiguous
        stream.lostFrames = [400]                     // and one real loss later
        let packets = sortByArrival(stream.build(rng: &rng))
        let jb = JitterBuffer()
        let log = runPlayout(jb, packets: packets, end: packets.last!.arrival + 200 * ms)
        let s = jb.statistics
        XCTAssertEqual(s.lost, 1, "the DTX pause is not loss")
        XCTAssertEqual(s.decoded, 299)
        XCTAssertGreaterThanOrEqual(s.silence, 150)
        XCTAssertLessThanOrEqual(s.concealed, 10, "at most the conceal-before-silence window, plus nothing")
        XCTAssertEqual(s.fecRecovered, 1, "only the real loss")
        // Timing is preserved across the pause: frame 300 plays 200 frames after frame 99.
        let gap = log.decodeTime[300]! - log.decodeTime[99]!
        XCTAssertEqual(gap, 201 * 480)
        // Right before speech resumes the decision is silence, not concealment.
        let resume = log.events.firstIndex(of: .decode(frame: 300))!
        XCTAssertEqual(log.events[resume - 1], .silence)
        XCTAssertEqual(s.playoutRestarts, 0)
    }

    func testLossRightAfterDTXIsRecoveredNotSilenced() {
        var rng = SplitMix64(seed: 52)
        var stream = MediaStreamBuilder(frames: 300)
        stream.dtxFrames = Set(100 ..< 200)
        stream.lostFrames = [200]                     // first packet after the pause is lost
        let packets = sortByArrival(stream.build(rng: &rng))
        let jb = JitterBuffer()
        let log = runPlayout(jb, packets: packets, end: packets.last!.arrival + 200 * ms)
        let i = log.events.firstIndex(of: .decode(frame: 201))!
        XCTAssertEqual(log.events[i - 1], .fec(nextFrame: 201))
        XCTAssertEqual(log.events[i - 2], .silence)
        XCTAssertEqual(jb.statistics.lost, 1)
    }

    func testSenderSlowerAcrossLongPauseRestartsPlayout() {
        // The path gets 60 ms longer during a pause: the first packets after it would all be
        // late against the old schedule; playout restarts instead of dropping them.
        var rng = SplitMix64(seed: 53)
        var stream = MediaStreamBuilder(frames: 400)
        stream.dtxFrames = Set(100 ..< 250)
        stream.jitter = { k, _ in k >= 250 ? 60 * 48 : 0 }
        let packets = sortByArrival(stream.build(rng: &rng))
        let jb = JitterBuffer()
        let log = runPlayout(jb, packets: packets, end: packets.last!.arrival + 300 * ms)
        XCTAssertEqual(jb.statistics.playoutRestarts, 1)
        XCTAssertEqual(log.decodedFrames, Array(0 ..< 100) + Array(250 ..< 400))
        XCTAssertEqual(jb.statistics.late, 0)
        XCTAssertEqual(jb.statistics.lost, 0)
    }

    // MARK: - Stream changes and bad input

    func testResetForNewSSRCKeepsStatisticsAndPlaysNewStream() {
        var rng = SplitMix64(seed: 61)
        var a = MediaStreamBuilder(frames: 200)
        a.lostFrames = [50]
        var b = MediaStreamBuilder(frames: 200)
        b.firstSequence = 7
        b.firstTimestamp = 3_000_000_000
        let jb = JitterBuffer()
        let pa = sortByArrival(a.build(rng: &rng))
        _ = runPlayout(jb, packets: pa, end: pa.last!.arrival + 200 * ms)
        XCTAssertEqual(jb.statistics.lost, 1)
        jb.reset()
        let offset = pa.last!.arrival + 300 * ms
        let pb = sortByArrival(b.build(rng: &rng)).map { p -> MediaSimPacket in
            var p = p
            p.arrival += offset
            return p
        }
        let log = runPlayout(jb, packets: pb, start: offset, end: pb.last!.arrival + 200 * ms)
        XCTAssertEqual(log.decodedFrames, Array(0 ..< 200))
        XCTAssertEqual(jb.statistics.lost, 1, "kept across reset")
        XCTAssertEqual(jb.statistics.received, 399)
        XCTAssertEqual(jb.statistics.outOfRange, 0)
    }

    func testNumberingJumpWithinSameSSRCResynchronises() {
        var rng = SplitMix64(seed: 62)
        let a = MediaStreamBuilder(frames: 200)
        var b = MediaStreamBuilder(frames: 200)
        b.firstSequence = 40_000
        b.firstTimestamp = 9_999
        let pa = a.build(rng: &rng)
        let end = pa.last!.arrival
        let pb = b.build(rng: &rng).map { p -> MediaSimPacket in
            var p = p
            p.arrival += end + 480
            p.order += 1000
            return p
        }
        let jb = JitterBuffer()
        let log = runPlayout(jb, packets: sortByArrival(pa + pb), end: pb.last!.arrival + 30 * ms, playPastEnd: true)
        let resync = log.insertResults.firstIndex(of: .acceptedAfterResync)
        XCTAssertEqual(resync, 200 + 3, "three out-of-range packets, then the fourth resynchronises")
        XCTAssertEqual(jb.statistics.resyncs, 1)
        XCTAssertEqual(jb.statistics.outOfRange, 4)
        XCTAssertEqual(Array(log.decodedFrames.suffix(197)), Array(3 ..< 200), "the new numbering plays from the packet that resynchronised")
    }

    func testFarFuturePacketIsDroppedNotBuffered() {
        let jb = JitterBuffer()
        var x: UInt32 = 0
        let r1 = withUnsafeBytes(of: &x) { jb.insert(sequenceNumber: 1, timestamp: 0, arrivalSamples: 0, payload: $0) }
        let r2 = withUnsafeBytes(of: &x) {
            jb.insert(sequenceNumber: 2, timestamp: 480 * 10_000, arrivalSamples: 480, payload: $0)
        }
        XCTAssertEqual(r1, .accepted)
        XCTAssertEqual(r2, .outOfRange)
        XCTAssertEqual(jb.statistics.bufferedPackets, 1)
    }

    func testOversizePayloadIsRejected() {
        var config = JitterBufferConfiguration()
        config.maxPayloadBytes = 100
        let jb = JitterBuffer(configuration: config)
        let big = [UInt8](repeating: 1, count: 101)
        let r = big.withUnsafeBytes { jb.insert(sequenceNumber: 1, timestamp: 0, arrivalSamples: 0, payload: $0) }
        XCTAssertEqual(r, .payloadTooLarge)
        XCTAssertEqual(jb.statistics.oversize, 1)
        XCTAssertEqual(jb.statistics.received, 0)
    }

    func testSilenceBeforeFirstPacketAndPayloadCopied() {
        let jb = JitterBuffer()
        guard case .silence = jb.nextFrame(nowSamples: 0) else { return XCTFail("expected silence") }
        var bytes: [UInt8] = [1, 2, 3, 4, 5]
        bytes.withUnsafeBytes { _ = jb.insert(sequenceNumber: 9, timestamp: 0, arrivalSamples: 0, payload: $0) }
        bytes = [9, 9, 9, 9, 9]                        // the buffer holds its own copy
        guard case .silence = jb.nextFrame(nowSamples: 480) else { return XCTFail("still filling at 10 ms") }
        guard case .decode(let p) = jb.nextFrame(nowSamples: 960) else { return XCTFail("due at 20 ms") }
        XCTAssertEqual(Array(p.payload), [1, 2, 3, 4, 5])
        XCTAssertEqual(p.sequenceNumber, 9)
        XCTAssertEqual(bytes, [9, 9, 9, 9, 9])
    }
}

extension JitterBufferTests {
    func testAudioThreadStallRecoversToTargetDelay() {
        // The audio thread stops calling for 1 s (device reopen) while packets keep
        // arriving; when it comes back it drains the backlog and must return to the target
        // delay at once rather than play a second late forever.
        var rng = SplitMix64(seed: 71)
        let stream = MediaStreamBuilder(frames: 600)
        let packets = sortByArrival(stream.build(rng: &rng))
        let jb = JitterBuffer()
        let ms: Int64 = 48
        let first = runPlayout(jb, packets: packets.filter { $0.arrival <= 2000 * ms }, end: 2000 * ms, playPastEnd: true)
        XCTAssertGreaterThan(first.decodedFrames.last!, 190)
        let rest = packets.filter { $0.arrival > 2000 * ms }
        let log = runPlayout(jb, packets: rest, start: 3000 * ms, end: rest.last!.arrival + 200 * ms)
        XCTAssertEqual(jb.statistics.resyncs, 0, "a stall is not a numbering jump")
        XCTAssertEqual(jb.statistics.outOfRange, 0)
        XCTAssertGreaterThanOrEqual(jb.statistics.skipped, 90, "the second of backlog is dropped, not played late")
        XCTAssertEqual(log.decodedFrames, log.decodedFrames.sorted())
        XCTAssertEqual(log.decodedFrames.last, 599)
        // Right after resuming, the delay is back near the target (no second of backlog
        // played late), and everything that arrived after the stall is played.
        XCTAssertLessThanOrEqual(log.samples[1...].map(\.currentDelayMs).max()!, 31)
        let fresh = rest.filter { $0.arrival > 3000 * ms }
        XCTAssertGreaterThan(fresh.count, 50)
        for p in fresh {
            guard let t = log.decodeTime[p.frame] else { XCTFail("frame \(p.frame) not played"); continue }
            XCTAssertLessThan(Double(t - p.arrival) / 48, 31, "frame \(p.frame)")
        }
    }
}
