import RoomBase
import RoomMedia
import XCTest

/// The buffer follows the packets' own durations (issue 9: a 20 ms sender was silent at a
/// receiver set to 10 ms). The receiver here keeps the default configuration (10 ms frames)
/// and plays 10 ms periods, as the engine does, whatever the sender sends.
final class JitterBufferPacketSizeTests: XCTestCase {
    private let ms: Int64 = 48

    /// Plays a clean stream of `durations` (cycled) and checks that every packet is decoded
    /// once, in order, at exactly its timestamp's distance from the previous one, with nothing
    /// concealed, inserted or dropped once playout started.
    private func checkCleanStream(_ durations: [Int], tell: Bool, frames: Int = 300, file: StaticString = #filePath,
                                  line: UInt = #line) {
        // Untold, the first packet's length is a guess until the second arrives: allow it.
        let startup = tell ? 0 : 2
        var rng = SplitMix64(seed: 81)
        var stream = MediaStreamBuilder(frames: frames)
        stream.durations = durations
        stream.tellDuration = tell
        stream.jitter = { _, rng in Int64(rng.unit() * 48) }        // 0-1 ms of noise
        let packets = sortByArrival(stream.build(rng: &rng))
        let jb = JitterBuffer()                                      // frameDurationMs 10
        let log = runPlayout(jb, packets: packets, end: packets.last!.arrival + 300 * ms)
        let what = "packets of \(durations.map { Double($0) / 48 }) ms, duration \(tell ? "told" : "inferred")"
        XCTAssertEqual(log.decodedFrames, Array(0 ..< frames), what, file: file, line: line)
        let s = jb.statistics
        XCTAssertLessThanOrEqual(s.concealed, startup * durations.max()! / 480, what, file: file, line: line)
        XCTAssertEqual(s.fecRecovered, 0, what, file: file, line: line)
        XCTAssertLessThanOrEqual(s.silence, startup * durations.max()! / 480, "no silence inside a continuous stream; \(what)",
                                 file: file, line: line)
        XCTAssertLessThanOrEqual(s.skipped, startup, what, file: file, line: line)
        XCTAssertLessThanOrEqual(s.stretched, 2 + startup, "at most the start-up insertions; \(what)", file: file, line: line)
        XCTAssertEqual(s.lost, 0, what, file: file, line: line)
        XCTAssertEqual(s.late, 0, what, file: file, line: line)
        // Each packet plays for its own duration: decode times are as far apart as timestamps.
        let byFrame = Dictionary(uniqueKeysWithValues: packets.map { ($0.frame, $0) })
        for f in (1 + startup) ..< frames {
            guard let t0 = log.decodeTime[f - 1], let t1 = log.decodeTime[f] else { continue }
            let step = Int64(byFrame[f]!.timestamp &- byFrame[f - 1]!.timestamp)
            XCTAssertEqual(t1 - t0, step, "frame \(f); \(what)", file: file, line: line)
        }
        // Decisions cover exactly the packets' durations.
        for (e, n) in zip(log.events, log.eventSamples) {
            if case .decode(let f) = e, f >= startup {
                XCTAssertEqual(n, durations[f % durations.count], "frame \(f); \(what)", file: file, line: line)
            }
        }
        XCTAssertLessThanOrEqual(s.currentDelayMs, s.targetDelayMs + Double(durations.max()!) / 48 + 1, what,
                                 file: file, line: line)
    }

    func testEveryOpusPacketSizePlaysAtA10msReceiver() {
        for d in [120, 240, 480, 960, 1920, 2880, 5760] {        // 2.5, 5, 10, 20, 40, 60, 120 ms
            checkCleanStream([d], tell: true)
        }
    }

    func testPacketSizeIsInferredFromTimestampsWhenNotTold() {
        for d in [240, 960, 2880] { checkCleanStream([d], tell: false) }
    }

    func testFrameSizeChangingMidStreamPlaysEveryPacket() {
        // 10, 10, 20, 60, 5, 40, 2.5, 2.5, 20 ms, over and over.
        checkCleanStream([480, 480, 960, 2880, 240, 1920, 120, 120, 960], tell: true, frames: 450)
        // One change for good: 10 ms for 2 s, then 60 ms.
        checkCleanStream(Array(repeating: 480, count: 200) + Array(repeating: 2880, count: 100), tell: true)
    }

    func testLost60msPacketIsRebuiltFromTheNextPacketsFEC() {
        var rng = SplitMix64(seed: 82)
        var stream = MediaStreamBuilder(frames: 100)
        stream.durations = [2880]
        // The first loss finds no next packet yet (a 20 ms target holds less than a 60 ms
        // packet): it is concealed, and the buffer keeps a packet of look-ahead from then on.
        stream.lostFrames = [10, 40, 70, 71]
        let packets = sortByArrival(stream.build(rng: &rng))
        let jb = JitterBuffer()
        let log = runPlayout(jb, packets: packets, end: packets.last!.arrival + 300 * ms)
        XCTAssertEqual(log.decodedFrames, (0 ..< 100).filter { !stream.lostFrames.contains($0) })
        let i = log.events.firstIndex(of: .decode(frame: 39))!
        XCTAssertEqual(Array(log.events[i ... i + 2]), [.decode(frame: 39), .fec(nextFrame: 41), .decode(frame: 41)])
        XCTAssertEqual(log.eventSamples[i + 1], 2880, "FEC rebuilds the whole missing 60 ms")
        // Two in a row: 70 is concealed (72 is not here yet when 70 falls due: it comes 120 ms
        // after 70's start), 71 comes back from 72's FEC, in one 60 ms piece.
        let j = log.events.firstIndex(of: .decode(frame: 69))!, k = log.events.firstIndex(of: .decode(frame: 72))!
        XCTAssertEqual(log.events[k - 1], .fec(nextFrame: 72))
        XCTAssertEqual(log.eventSamples[k - 1], 2880)
        XCTAssertEqual(Set(log.events[(j + 1) ..< (k - 1)]), [.conceal])
        XCTAssertEqual(log.eventSamples[(j + 1) ..< (k - 1)].reduce(0, +), 2880, "60 ms concealed for frame 70")
        let s = jb.statistics
        XCTAssertEqual(s.lost, 4)
        XCTAssertEqual(s.fecRecovered, 2)
        XCTAssertEqual(s.targetDelayMs, 1 + 5 + 60, accuracy: 0.01,
                       "1 ms bin + 5 ms margin + one 60 ms packet of look-ahead while losses are recent")
    }

    func testLookAheadForFECGoesOnACleanPath() {
        // 10 ms packets, floor 10 ms: a loss brings a packet of look-ahead (so the next missing
        // packet's successor is here for FEC); 10 s without loss takes it away again.
        var rng = SplitMix64(seed: 84)
        var stream = MediaStreamBuilder(frames: 2000)
        stream.lostFrames = [100, 300]
        let packets = sortByArrival(stream.build(rng: &rng))
        var config = JitterBufferConfiguration()
        config.minimumDelayMs = 10
        let jb = JitterBuffer(configuration: config)
        let log = runPlayout(jb, packets: packets, end: packets.last!.arrival + 300 * ms)
        XCTAssertEqual(log.samples[50].targetDelayMs, 10, accuracy: 0.01, "clean: the floor")
        XCTAssertEqual(log.samples[200].targetDelayMs, 16, accuracy: 0.01, "after a loss: 1 ms bin + 5 ms margin + one 10 ms packet")
        XCTAssertEqual(jb.statistics.fecRecovered + jb.statistics.concealed, 2)
        XCTAssertEqual(log.samples[1900].targetDelayMs, 10, accuracy: 0.01, "10 s after the last loss: the floor again")
        XCTAssertLessThanOrEqual(log.samples[1900].currentDelayMs, 20.5)
    }

    func testDTXPauseWith20msPacketsIsSilenceAndKeepsTiming() {
        var rng = SplitMix64(seed: 83)
        var stream = MediaStreamBuilder(frames: 250)
        stream.durations = [960]
        stream.dtxFrames = Set(100 ..< 150)                        // 1 s of nothing
        let packets = sortByArrival(stream.build(rng: &rng))
        let jb = JitterBuffer()
        let log = runPlayout(jb, packets: packets, end: packets.last!.arrival + 300 * ms)
        XCTAssertEqual(log.decodedFrames, Array(0 ..< 100) + Array(150 ..< 250))
        XCTAssertEqual(jb.statistics.lost, 0)
        XCTAssertEqual(log.decodeTime[150]! - log.decodeTime[99]!, 51 * 960, "the pause keeps its length")
        let resume = log.events.firstIndex(of: .decode(frame: 150))!
        XCTAssertEqual(log.events[resume - 1], .silence)
    }
}
