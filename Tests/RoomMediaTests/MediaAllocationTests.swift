import Foundation
import RoomBase
import RoomMedia
import XCTest

/// Proves the audio-thread path (jitter buffer insert + nextFrame, RTP parse + serialize)
/// allocates nothing in steady state. Needs the allocation probe preloaded:
///
///     LD_PRELOAD=$PWD/.build/debug/libroomallocprobe.so \
///         .build/debug/roomdPackageTests.xctest RoomMediaTests.MediaAllocationTests
///
/// Without it the test is skipped (there is nothing to count with).
final class MediaAllocationTests: XCTestCase {
    private typealias CountFn = @convention(c) () -> UInt

    func testSteadyStateAllocatesNothing() throws {
        guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "roomallocprobe_thread_count") else {
            throw XCTSkip("libroomallocprobe.so not preloaded")
        }
        let count = unsafeBitCast(symbol, to: CountFn.self)
        // The probe counts on this thread: an array allocation must show.
        let probeBefore = count()
        withExtendedLifetime([Int](repeating: 1, count: 64)) {}
        XCTAssertGreaterThan(count(), probeBefore, "the probe sees allocations")

        // A jittery, lossy stream with duplicates, built before measuring.
        var rng = SplitMix64(seed: 7)
        var stream = MediaStreamBuilder(frames: 3000)
        stream.baseDelay = 40 * 48
        stream.jitter = { _, rng in Int64(((rng.unit() * 2 - 1) * 20 * 48).rounded()) }
        for k in 0 ..< 3000 where rng.unit() < 0.05 { stream.lostFrames.insert(k) }
        var packets = stream.build(rng: &rng)
        for i in stride(from: 0, to: packets.count, by: 9) {
            var copy = packets[i]
            copy.arrival += 96
            copy.order = packets.count
            packets.append(copy)
        }
        packets = sortByArrival(packets)

        let jb = JitterBuffer()
        var datagram = [UInt8](repeating: 0, count: 1500)
        let opus = [UInt8](repeating: 0x5A, count: 120)
        var next = 0
        var now: Int64 = 7
        var checksum = 0
        var before: UInt = 0
        for call in 0 ..< 3000 {
            if call == 300 { before = count() }      // after 3 s of warm-up
            while next < packets.count, packets[next].arrival <= now {
                let p = packets[next]
                let header = RTPPacket(sequenceNumber: p.sequence, timestamp: p.timestamp, ssrc: 42,
                                       audioLevel: RTPAudioLevel(voiceActivity: true, level: 30))
                datagram.withUnsafeMutableBytes { dst in
                    opus.withUnsafeBytes { payload in
                        guard let n = try? header.serialize(payload: payload, into: dst),
                              let parsed = try? RTPPacket.parse(UnsafeRawBufferPointer(rebasing: dst[..<n]))
                        else { return }
                        jb.insert(parsed, datagram: UnsafeRawBufferPointer(dst), arrivalSamples: p.arrival)
                    }
                }
                next += 1
            }
            switch jb.nextFrame(nowSamples: now) {
            case .decode(let packet): checksum &+= packet.payload.count
            case .decodeFEC(let packet, _): checksum &+= packet.payload.count &* 2
            case .conceal: checksum &+= 1
            case .silence: checksum &+= 3
            }
            now += 480
        }
        let allocations = count() - before
        XCTAssertEqual(allocations, 0, "heap allocations in 27 s of steady-state playout")
        XCTAssertGreaterThan(checksum, 100_000)
        XCTAssertGreaterThan(jb.statistics.decoded, 2500)
        XCTAssertGreaterThan(jb.statistics.duplicates, 100)
    }
}
