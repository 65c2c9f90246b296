import COpus
import Foundation
@testable import RoomAudio
import RoomMedia
import XCTest

/// Issue 10, item 8: the stream of a participant who left must leave `stats.streams` and free
/// its jitter-buffer slot (not linger until a new stream needs the slot and it has been idle
/// 2 s), and the top-level `jitter_delay_ms` is the largest delay among streams still playing,
/// not a departed or silent stream's last figure.
final class StreamReleaseTests: XCTestCase {
    private let period = 480

    private final class Rig {
        let streams: RemoteStreams
        let stats: StreamStatistics
        let slotAudio: UnsafeMutablePointer<Float>
        let pointers: UnsafeMutablePointer<UnsafePointer<Float>?>
        let period: Int
        var sequence: [UInt32: UInt16] = [:]
        let payload: [UInt8]

        init(slots: Int, period: Int, statistics: StreamStatistics? = nil) throws {
            self.period = period
            stats = statistics ?? StreamStatistics(slots: slots)
            streams = try RemoteStreams(count: slots, rate: 48_000, periodFrames: period, frameMilliseconds: 10, minimumDelayMs: 0,
                                        statistics: stats)
            slotAudio = .allocate(capacity: slots * period)
            slotAudio.initialize(repeating: 0, count: slots * period)
            pointers = .allocate(capacity: slots)
            pointers.initialize(repeating: nil, count: slots)
            // One real 10 ms Opus packet of silence, reused for every stream.
            var rc: Int32 = 0
            let enc = try XCTUnwrap(opus_encoder_create(48_000, 1, copus_application_voip(), &rc))
            defer { opus_encoder_destroy(enc) }
            var pcm = [Float](repeating: 0, count: 480)
            var out = [UInt8](repeating: 0, count: 400)
            let n = opus_encode_float(enc, &pcm, 480, &out, 400)
            payload = Array(out[0 ..< Int(max(n, 1))])
        }

        deinit { slotAudio.deallocate(); pointers.deallocate() }

        func packet(_ ssrc: UInt32, at now: Int64) -> MediaPacket {
            let seq = sequence[ssrc, default: 100]
            sequence[ssrc] = seq &+ 1
            var m = MediaPacket()
            m.ssrc = ssrc
            m.sequenceNumber = seq
            m.timestamp = UInt32(seq) * 480
            m.arrivalSamples = now
            _ = payload.withUnsafeBytes { m.setPayload($0) }
            return m
        }

        func send(_ ssrc: UInt32, at now: Int64) { streams.insert(packet(ssrc, at: now)) }
        func render(at now: Int64) { streams.render(into: slotAudio, pointers: pointers, now: now, publishing: stats) }
        var listed: [UInt32] { stats.rows().map(\.ssrc).sorted() }
    }

    /// Issue 29 (listening to a second room): each room hands out its own SSRCs, so the same
    /// SSRC in the room and in the room listened to are two streams; releasing one leaves the
    /// other, and each leg's gain applies to its own streams only.
    func testTheSameSSRCInTwoRoomsIsTwoStreams() throws {
        let rig = try Rig(slots: 4, period: period)
        var now: Int64 = 1_000_000
        for _ in 0 ..< 10 {
            rig.streams.insert(rig.packet(7, at: now))
            var other = rig.packet(7, at: now)
            other.sequenceNumber &+= 5000   // the other room's numbering
            rig.streams.insert(other, leg: .listen)
            rig.render(at: now)
            now += 480
        }
        XCTAssertEqual(rig.stats.rows().map(\.leg).sorted { $0.rawValue < $1.rawValue }, [.room, .listen])
        rig.streams.release(7, leg: .listen, at: now)
        rig.render(at: now)
        XCTAssertEqual(rig.stats.rows().map(\.leg), [.room], "the room's stream stays")

        let gains = StreamGains()
        gains.set(ssrc: 7, linear: 0.5)
        XCTAssertTrue(gains.set(leg: .listen, linear: 0.25))
        XCTAssertEqual(gains.gain(leg: .room, ssrc: 7), 0.5, "a participant's volume")
        XCTAssertEqual(gains.gain(leg: .listen, ssrc: 7), 0.25, "the listened room's gain, not the room participant's")
        XCTAssertFalse(gains.set(leg: .listen, linear: .nan))
    }

    func testReleasedStreamLeavesStatsAndFreesItsSlotAtOnce() throws {
        let rig = try Rig(slots: 2, period: period)
        var now: Int64 = 1_000_000
        for _ in 0 ..< 10 {
            rig.send(11, at: now)
            rig.send(22, at: now)
            rig.render(at: now)
            now += 480
        }
        XCTAssertEqual(rig.listed, [11, 22])

        rig.streams.release(11, at: now)
        rig.render(at: now)
        XCTAssertEqual(rig.listed, [22], "a released stream leaves the statistics")

        // Its slot is free at once: a newcomer 10 ms later plays (it would have waited for the
        // departed stream to be idle 2 s).
        now += 480
        rig.send(33, at: now)
        rig.render(at: now)
        XCTAssertEqual(rig.listed, [22, 33])
    }

    /// Issue 27 item 8: a slot freed by one stream and taken by the next kept the first one's
    /// counters (100 packets sent, 200 shown), and the totals counted the first stream twice
    /// (once retired, once again in the live row). The next stream starts from zero.
    func testTheNextStreamInAFreedSlotStartsItsCountsAtZero() throws {
        let engine = EngineStats(periodFrames: period, streamSlots: 1)
        let rig = try Rig(slots: 1, period: period, statistics: engine.streams)
        var now: Int64 = 1_000_000
        func play(_ ssrc: UInt32, packets: Int, everyNthLost: Int) {
            for k in 0 ..< packets {
                if (k + 1) % everyNthLost != 0 { rig.send(ssrc, at: now) } else { _ = rig.packet(ssrc, at: now) }
                rig.render(at: now)
                now += 480
            }
        }
        play(11, packets: 100, everyNthLost: 10)
        let first = try XCTUnwrap(rig.stats.rows().first)
        XCTAssertEqual(first.received, 90)
        rig.streams.release(11, at: now)
        rig.render(at: now)
        play(22, packets: 100, everyNthLost: 5)
        let second = try XCTUnwrap(rig.stats.rows().first)
        XCTAssertEqual(second.ssrc, 22)
        XCTAssertEqual(second.received, 80, "the newcomer's own packets only: \(second)")
        XCTAssertEqual(second.lost, 19, "its loss, the last packet (never followed) not counted: \(second)")
        // And by the idle take-over path: a third stream after the second has been idle.
        now += 48_000 * 3
        play(33, packets: 50, everyNthLost: 1_000)
        let third = try XCTUnwrap(rig.stats.rows().first)
        XCTAssertEqual(third.ssrc, 33)
        XCTAssertEqual(third.received, 50, "\(third)")
        XCTAssertEqual(third.lost, 0, "\(third)")
        XCTAssertEqual(engine.snapshot(now: now).receivedLost, 9 + 19, "each stream's loss counted once")
    }

    func testLatePacketOfAReleasedStreamDoesNotBringItBack() throws {
        let rig = try Rig(slots: 2, period: period)
        var now: Int64 = 1_000_000
        rig.send(11, at: now)
        rig.render(at: now)
        rig.streams.release(11, at: now)
        now += 480
        rig.send(11, at: now)   // forwarded before the server heard it leave
        rig.render(at: now)
        XCTAssertEqual(rig.listed, [], "a straggler must not take a slot again")
        // Long after, the same SSRC is a new stream (SSRCs are reused only after a new join).
        now += 48_000 * 3
        rig.send(11, at: now)
        rig.render(at: now)
        XCTAssertEqual(rig.listed, [11])
    }

    /// The top-level totals (received_lost, late, fec, plc) count every stream heard: a
    /// departure must not make them go down (scripts take rates from them; the exit summary
    /// reports them after the room was left and every stream released).
    func testTotalsKeepWhatReleasedStreamsCounted() throws {
        let engine = EngineStats(periodFrames: period, streamSlots: 2)
        let rig = try Rig(slots: 2, period: period, statistics: engine.streams)
        var now: Int64 = 1_000_000
        for k in 0 ..< 40 {
            if k % 4 != 3 { rig.send(11, at: now) } else { _ = rig.packet(11, at: now) }   // every 4th lost
            rig.render(at: now)
            now += 480
        }
        let before = try XCTUnwrap(rig.stats.rows().first)
        XCTAssertGreaterThan(before.lost + before.concealed, 0, "the stream lost something: \(before)")
        rig.streams.release(11, at: now)
        rig.render(at: now)
        XCTAssertEqual(rig.listed, [])
        let retired = rig.stats.retired
        XCTAssertEqual(retired.lost, before.lost)
        XCTAssertGreaterThanOrEqual(retired.concealed, before.concealed)
        let totals = engine.snapshot(now: now)
        XCTAssertEqual(totals.receivedLost, before.lost, "received_lost after the stream left")
        XCTAssertGreaterThanOrEqual(totals.concealedFrames, before.concealed, "plc after the stream left")
    }

    func testTopLevelDelayIsTheLargestAmongStreamsStillPlaying() {
        let stats = EngineStats(periodFrames: period, streamSlots: 2)
        let now: Int64 = 48_000 * 1000
        var stale = JitterBufferStatistics()
        stale.currentDelayMs = 205
        var live = JitterBufferStatistics()
        live.currentDelayMs = 13
        // A stream whose last packet came 10 s ago (its publisher sent garbage, then stopped)
        // and one playing now.
        stats.streams.publish(slot: 0, ssrc: 1, stale, lastArrival: now - 48_000 * 10)
        stats.streams.publish(slot: 1, ssrc: 2, live, lastArrival: now - 480)
        XCTAssertEqual(stats.snapshot(now: now).jitterBufferDelayMs, 13)
        XCTAssertEqual(stats.streams.rows().first { $0.ssrc == 1 }?.idleMilliseconds(now: now), 10_000)
        // Nothing playing: nothing buffered for anyone to hear.
        XCTAssertEqual(stats.snapshot(now: now + 48_000 * 10).jitterBufferDelayMs, 0)
    }

    /// The release runs on the audio thread: no heap allocation. Needs the probe preloaded
    /// (LD_PRELOAD=.build/debug/libroomallocprobe.so, as RoomMediaTests.MediaAllocationTests);
    /// skipped without it.
    func testReleaseAllocatesNothing() throws {
        typealias CountFn = @convention(c) () -> UInt
        guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "roomallocprobe_thread_count") else {
            throw XCTSkip("libroomallocprobe.so not preloaded")
        }
        let count = unsafeBitCast(symbol, to: CountFn.self)
        let retains = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "roomallocprobe_thread_retains").map { unsafeBitCast($0, to: CountFn.self) }
        let rig = try Rig(slots: 4, period: period)
        var now: Int64 = 1_000_000
        let packets = (0 ..< 400).map { rig.packet(UInt32(1 + $0 % 8), at: 0) }
        // Warm up once through every path, then count.
        for round in 0 ..< 2 {
            var a: UInt = 0, b: UInt = 0, c: UInt = 0, releaseRetains: UInt = 0, renderRetains: UInt = 0
            for (i, p) in packets.enumerated() {
                var q = p
                q.arrivalSamples = now
                var t = count()
                rig.streams.insert(q)
                a += count() - t
                t = count()
                let r0 = retains?() ?? 0
                if i % 10 == 9 { rig.streams.release(q.ssrc, at: now) }
                b += count() - t
                releaseRetains += (retains?() ?? 0) - r0
                t = count()
                let r1 = retains?() ?? 0
                rig.render(at: now)
                c += count() - t
                renderRetains += (retains?() ?? 0) - r1
                now += 480
            }
            // Only the engine's calls are counted (the test's own loop may allocate).
            if round == 1 {
                XCTAssertEqual(a + b + c, 0, "heap allocations: insert \(a), release \(b), render \(c)")
                print("stream release: retains in 40 releases: \(releaseRetains), in 400 renders: \(renderRetains)")
            }
        }
    }
}
