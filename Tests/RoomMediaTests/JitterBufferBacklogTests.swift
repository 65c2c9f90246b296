import RoomBase
import RoomMedia
import XCTest

/// A backlog is not jitter (issue 9: after a 3 s server stall the burst drove the buffer from
/// 17 to 207–220 ms, falling ~20 ms per second). After a stall of N seconds, the packets held
/// back arrive at once; within 2 s of stream time the buffer must be back within its target
/// plus a margin, its target must not have grown, and a steady stream with jitter within
/// the target must lose nothing.
final class JitterBufferBacklogTests: XCTestCase {
    private let ms: Int64 = 48

    /// A 10 ms stream with 0–2 ms of jitter; packets sent in [stallFrom, stallFrom + stall)
    /// are held and delivered back to back (FIFO, 20 µs apart) when the stall ends — a server
    /// or network that stopped forwarding, then forwarded its queue.
    private func stalledStream(frames: Int, stallFrom: Int64, stall: Int64, durations: [Int]? = nil,
                               dtx: Set<Int> = []) -> [MediaSimPacket] {
        var rng = SplitMix64(seed: 91)
        var stream = MediaStreamBuilder(frames: frames)
        stream.durations = durations
        stream.dtxFrames = dtx
        stream.jitter = { _, rng in Int64(rng.unit() * 2 * 48) }
        var packets = stream.build(rng: &rng)                      // in sending order
        let release = stallFrom + stall
        // The queue drains first (first in, first out); packets sent after the stall queue up
        // behind it.
        var queueEnd = release
        for i in packets.indices where packets[i].arrival >= stallFrom && packets[i].arrival < queueEnd {
            packets[i].arrival = max(packets[i].arrival, queueEnd)
            queueEnd = packets[i].arrival + 1
        }
        return sortByArrival(packets)
    }

    func testBacklogAfterStallIsShedWithinTwoSeconds() {
        for (stallMs, minimum) in [(3000, 20), (1000, 20), (150, 20), (3000, 10), (400, 10)] as [(Int64, Int)] {
            let stallFrom: Int64 = 5000 * ms, release = stallFrom + stallMs * ms
            let packets = stalledStream(frames: 1500 + Int(stallMs / 10), stallFrom: stallFrom, stall: stallMs * ms)
            var config = JitterBufferConfiguration()
            config.minimumDelayMs = minimum
            let jb = JitterBuffer(configuration: config)
            let log = runPlayout(jb, packets: packets, end: packets.last!.arrival + 300 * ms)
            let what = "stall \(stallMs) ms, floor \(minimum) ms"
            // Before the stall: the steady target and delay.
            let before = zip(log.callTimes, log.samples).filter { $0.0 > stallFrom - 2000 * ms && $0.0 < stallFrom }.map(\.1)
            let target0 = before.map(\.targetDelayMs).max()!
            let delay0 = before.map(\.currentDelayMs).max()!
            // From 2 s after the backlog arrived (stream time) on: back within target + margin.
            let after = zip(log.callTimes, log.samples).filter { $0.0 >= release + 2000 * ms }.map(\.1)
            XCTAssertGreaterThan(after.count, 300, what)
            let worstDelay = after.map(\.currentDelayMs).max()!
            let worstTarget = after.map(\.targetDelayMs).max()!
            // The first second after the burst, too: how fast it came back.
            let soon = zip(log.callTimes, log.samples).filter { $0.0 >= release + 1000 * ms && $0.0 < release + 2000 * ms }
                .map(\.1.currentDelayMs).max()!
            print("backlog: \(what): before target \(target0) delay ≤ \(delay0) ms; 1–2 s after: delay ≤ \(soon) ms; "
                  + "from 2 s: delay ≤ \(worstDelay), target ≤ \(worstTarget) ms; backlog \(jb.statistics.backlog), "
                  + "late \(jb.statistics.late), skipped \(jb.statistics.skipped), shed \(jb.statistics.shedMs) ms")
            XCTAssertLessThanOrEqual(worstTarget, target0 + 1, "the backlog must not raise the target; \(what)")
            XCTAssertLessThanOrEqual(worstDelay, target0 + 10.5, "delay back within target + one frame; \(what)")
            XCTAssertLessThanOrEqual(soon, target0 + 10.5, "…already in the second after the burst; \(what)")
            XCTAssertGreaterThan(jb.statistics.backlog + jb.statistics.late, 0, what)
            // Everything sent after the stall plays.
            let fresh = packets.filter { $0.arrival > release + 100 * ms }
            for p in fresh { XCTAssertNotNil(log.decodeTime[p.frame], "frame \(p.frame) not played; \(what)") }
        }
    }

    /// The path gets longer for good (a route change; roomproxy's `--delay-ms` mid-call in
    /// `CallQualityWarningTests`): from one packet on, every packet arrives 300 ms later than
    /// before, at the same pace. That is more than the buffer may wait (200 ms), so each is an
    /// outage — and until the delay window forgot the old path (5 s) every packet was dropped as
    /// late: 5 s of silence. Outages arriving at real-time pace are a new path: playout starts
    /// afresh on it. A stalled queue draining faster than real time still is backlog.
    func testALongerPathRestartsPlayoutInsteadOfDroppingEverything() {
        for (step, frameSamples) in [(Int64(300), 480), (Int64(250), 960), (Int64(1000), 480)] {
            var rng = SplitMix64(seed: 17)
            var stream = MediaStreamBuilder(frames: 8000 * 48 / frameSamples)
            stream.frameSamples = frameSamples
            stream.jitter = { _, rng in Int64(rng.unit() * 2 * 48) }
            let stepAt: Int64 = 4000 * ms
            var packets = stream.build(rng: &rng)
            for i in packets.indices where packets[i].arrival - stream.baseDelay >= stepAt { packets[i].arrival += step * ms }
            packets = sortByArrival(packets)
            let jb = JitterBuffer()
            let log = runPlayout(jb, packets: packets, end: packets.last!.arrival + 300 * ms)
            let what = "\(step) ms longer path, \(frameSamples / 48) ms packets"
            // Every packet that arrived 200 ms after the first one on the new path plays.
            let firstLonger = packets.filter { $0.arrival - stream.baseDelay - step * ms >= stepAt }.map(\.arrival).min()!
            let fresh = packets.filter { $0.arrival >= firstLonger + 200 * ms }
            let unplayed = fresh.filter { log.decodeTime[$0.frame] == nil }.count
            print("path change: \(what): \(unplayed) of \(fresh.count) later packets unplayed; late \(jb.statistics.late), "
                  + "restarts \(jb.statistics.playoutRestarts), backlog \(jb.statistics.backlog)")
            XCTAssertEqual(unplayed, 0, what)
            XCTAssertLessThanOrEqual(jb.statistics.late, 200 / (frameSamples / 48), "at most 200 ms of packets late; \(what)")
            XCTAssertEqual(jb.statistics.playoutRestarts, 1, what)
        }
    }

    func testBacklogOf20msPacketsAfterStallIsShed() {
        let stallFrom: Int64 = 4000 * ms, release = stallFrom + 2000 * ms
        let packets = stalledStream(frames: 600, stallFrom: stallFrom, stall: 2000 * ms, durations: [960])
        let jb = JitterBuffer()
        let log = runPlayout(jb, packets: packets, end: packets.last!.arrival + 300 * ms)
        let after = zip(log.callTimes, log.samples).filter { $0.0 >= release + 1000 * ms }.map(\.1)
        XCTAssertLessThanOrEqual(after.map(\.targetDelayMs).max()!, 21)
        XCTAssertLessThanOrEqual(after.map(\.currentDelayMs).max()!, 20 + 20 + 0.5)
    }

    /// The normal case: steady jitter within the target loses nothing — no drop, nothing late,
    /// nothing marked as backlog.
    func testSteadyStreamWithJitterWithinTargetDropsNothing() {
        for (jitterMs, minimum) in [(5.0, 10), (5.0, 20), (15.0, 10)] {
            var rng = SplitMix64(seed: 92)
            var stream = MediaStreamBuilder(frames: 3000)
            stream.baseDelay = 40 * ms
            stream.jitter = { _, rng in Int64((rng.unit() * 2 * jitterMs * 48).rounded()) }
            let packets = sortByArrival(stream.build(rng: &rng))
            var config = JitterBufferConfiguration()
            config.minimumDelayMs = minimum
            let jb = JitterBuffer(configuration: config)
            let log = runPlayout(jb, packets: packets, end: packets.last!.arrival + 300 * ms)
            let s = jb.statistics
            let what = "jitter 0–\(2 * jitterMs) ms, floor \(minimum) ms"
            print("steady: \(what): target \(s.targetDelayMs) ms, late \(s.late), skipped \(s.skipped), backlog \(s.backlog), stretched \(s.stretched)")
            // After the first second (the target being learnt), nothing is lost or dropped.
            let learnt = log.samples[100]
            XCTAssertEqual(s.late, learnt.late, what)
            XCTAssertEqual(s.skipped, learnt.skipped, what)
            XCTAssertEqual(s.concealed, learnt.concealed, what)
            XCTAssertEqual(s.decoded + s.late + s.skipped, 3000, what)
            XCTAssertLessThanOrEqual(s.late, 3, what)
            XCTAssertEqual(s.backlog, 0, "steady jitter is not a backlog; \(what)")
        }
    }

    /// The audio thread is held up for 40 ms (under the 60 ms jump): playout is 40 ms behind.
    /// A large excess drops audio a packet per 100 ms; the last packet's worth waits for a
    /// pause and goes there, as silence — but not for longer than 0.4 s.
    func testSmallExcessIsShedInAPauseFirstButNotWaitedForLong() {
        func run(pauses: Bool) -> (audioDropped: Int, log: MediaPlayoutLog, stats: JitterBufferStatistics) {
            var rng = SplitMix64(seed: 93)
            var stream = MediaStreamBuilder(frames: 600)
            // Talk with 100 ms pauses: the first one from 3.35 s, while 10 ms of excess is left.
            if pauses { stream.dtxFrames = Set((0 ..< 600).filter { $0 % 100 >= 35 && $0 % 100 < 45 }) }
            let packets = sortByArrival(stream.build(rng: &rng))
            let jb = JitterBuffer()
            let log = runPlayout(jb, packets: packets, end: packets.last!.arrival + 300 * ms,
                                 stalled: (3000 * ms) ..< (3040 * ms))
            return (packets.count - jb.statistics.decoded - jb.statistics.late, log, jb.statistics)
        }
        let withPauses = run(pauses: true)
        let talking = run(pauses: false)
        func delay(_ r: (audioDropped: Int, log: MediaPlayoutLog, stats: JitterBufferStatistics), after t: Int64) -> Double {
            zip(r.log.callTimes, r.log.samples).filter { $0.0 > t * ms }.map(\.1.currentDelayMs).max()!
        }
        print("excess: with pauses: audio dropped \(withPauses.audioDropped), shed \(withPauses.stats.shedMs) ms in "
              + "\(withPauses.stats.skipped) drops; talking: audio dropped \(talking.audioDropped), shed \(talking.stats.shedMs) ms")
        XCTAssertEqual(withPauses.audioDropped, 3, "30 ms as audio (large excess), the last 10 ms as silence in the pause")
        XCTAssertEqual(talking.audioDropped, 4, "no pause: the last 10 ms goes as audio too")
        XCTAssertLessThanOrEqual(delay(withPauses, after: 3500), 30.5)
        XCTAssertLessThanOrEqual(delay(talking, after: 3900), 30.5, "within 0.9 s of the stall")
    }
}
