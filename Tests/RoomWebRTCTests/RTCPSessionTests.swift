import Glibc
import RoomWebRTC
import XCTest

/// `RTCPSession` on a simulated clock: nanoseconds of a monotonic clock, 20 ms Opus packets at 48 kHz.
final class RTCPSessionTests: XCTestCase {
    static let ms: UInt64 = 1_000_000
    /// 2026-11-24 12:00:00 UTC as NTP (any wall clock does; fixed so the test is repeatable).
    static let wall = RTCPSession.ntp(unixSeconds: 1_795_521_600)

    private func rtp(sequence: UInt16, timestamp: UInt32, ssrc: UInt32, payload: Int = 60, extensionWords: Int = 0) -> [UInt8] {
        var p: [UInt8] = [extensionWords > 0 ? 0x90 : 0x80, 111, UInt8(sequence >> 8), UInt8(sequence & 0xFF)]
        for v in [timestamp, ssrc] { p += [UInt8(v >> 24), UInt8((v >> 16) & 0xFF), UInt8((v >> 8) & 0xFF), UInt8(v & 0xFF)] }
        if extensionWords > 0 { p += [0xBE, 0xDE, 0, UInt8(extensionWords)] + [UInt8](repeating: 0, count: 4 * extensionWords) }
        return p + [UInt8](repeating: 0xAA, count: payload)
    }

    private func report(_ session: inout RTCPSession, at now: UInt64, leaving: Bool = false) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: 1500)
        let n = out.withUnsafeMutableBytes { session.writeReport(into: $0, at: now, random: 0.5, leaving: leaving) }
        return Array(out[0 ..< n])
    }

    private func receive(_ session: inout RTCPSession, _ bytes: [UInt8], at now: UInt64) throws {
        try bytes.withUnsafeBytes { try session.receive(rtcp: $0, at: now) }
    }

    func testNTPTimeFollowsTheMonotonicClockFromTheWallClockAtStart() {
        let s = RTCPSession(localSSRC: 1, cname: "a", wallClockNTP: Self.wall, monotonicNow: 5_000 * Self.ms)
        XCTAssertEqual(s.ntp(at: 5_000 * Self.ms), Self.wall)
        XCTAssertEqual(s.ntp(at: 6_500 * Self.ms) - Self.wall, 0x1_8000_0000, "1.5 s later")
        XCTAssertEqual(RTCPSession.ntp(unixSeconds: 0), UInt64(2_208_988_800) << 32, "the Unix epoch in NTP")
        XCTAssertEqual(RTCPSession.ntp(unixSeconds: 0.25) & 0xFFFF_FFFF, 0x4000_0000)
    }

    /// RR until we send; then an SR whose RTP timestamp is the last packet's moved on to the
    /// report's instant, with the packet and payload octet counts; RR again after a silent interval.
    func testSenderReportWhenWeSentReceiverReportOtherwise() throws {
        var s = RTCPSession(localSSRC: 0xAB, cname: "roomd-test", wallClockNTP: Self.wall, monotonicNow: 0)
        XCTAssertEqual(try rtcpItems(report(&s, at: 10 * Self.ms)), [.receiverReport(ssrc: 0xAB), .canonicalName(ssrc: 0xAB, "roomd-test")])
        for i in 0 ..< 50 {
            let p = rtp(sequence: UInt16(i), timestamp: 1000 + UInt32(i) * 960, ssrc: 0xAB, payload: 60, extensionWords: 1)
            p.withUnsafeBytes { s.sent(rtp: $0, at: UInt64(20 + 20 * i) * Self.ms) }
        }
        // Last packet (timestamp 1000 + 49 × 960) went out at 1000 ms; the report is at 1010 ms.
        let sr = try rtcpItems(report(&s, at: 1010 * Self.ms))
        XCTAssertEqual(sr.first, .senderReport(ssrc: 0xAB, RTCPSenderInfo(
            ntpTimestamp: s.ntp(at: 1010 * Self.ms), rtpTimestamp: 1000 + 49 * 960 + 480, packetCount: 50, octetCount: 50 * 60)))
        XCTAssertEqual(sr.count, 2, "no block: nothing received")
        XCTAssertEqual(try rtcpItems(report(&s, at: 2000 * Self.ms)).first, .receiverReport(ssrc: 0xAB))
        XCTAssertEqual(try rtcpItems(report(&s, at: 3000 * Self.ms, leaving: true)).last, .goodbye(ssrc: 0xAB))
    }

    /// A packet under another SSRC than the SDP's makes it the reported one (the SR must name
    /// the stream the peer receives).
    func testTheSentStreamsSSRCIsReported() throws {
        var s = RTCPSession(localSSRC: 1, cname: "c", wallClockNTP: Self.wall, monotonicNow: 0)
        rtp(sequence: 0, timestamp: 0, ssrc: 0x77).withUnsafeBytes { s.sent(rtp: $0, at: 0) }
        XCTAssertEqual(s.localSSRC, 0x77)
        guard case .senderReport(0x77, let info)? = try rtcpItems(report(&s, at: 0)).first else { return XCTFail() }
        XCTAssertEqual(info.packetCount, 1)
    }

    /// Loss (RFC 3550 A.3): fraction over the interval, cumulative since the start; the extended
    /// highest sequence across the 16-bit wrap; a block only for sources heard since the last report.
    func testReportBlocksCountLossAcrossTheWrap() throws {
        var s = RTCPSession(localSSRC: 1, cname: "c", wallClockNTP: Self.wall, monotonicNow: 0)
        var t: UInt64 = 0
        func receive(_ i: Int) {
            t = UInt64(i) * 20 * Self.ms
            rtp(sequence: UInt16(truncatingIfNeeded: 65500 + i), timestamp: UInt32(i) * 960, ssrc: 0x99).withUnsafeBytes { s.received(rtp: $0, at: t) }
        }
        // 65500 ... 65535, 0 ... 63: 100 packets, every 10th lost (the first two validate the source).
        for i in 0 ..< 100 where i < 2 || i % 10 != 5 { receive(i) }
        let items = try rtcpItems(report(&s, at: t))
        guard case .reportBlock(1, let block)? = items.dropFirst().first else { return XCTFail("\(items)") }
        XCTAssertEqual(block.ssrc, 0x99)
        XCTAssertEqual(block.extendedHighestSequence, 0x1_0000 + 63, "one wrap")
        XCTAssertEqual(block.cumulativeLost, 10)
        // Expected 99 (from the second packet, which validated the source), received 89.
        XCTAssertEqual(block.fractionLost, UInt8(10 * 256 / 99))
        XCTAssertEqual(block.jitter, 0, "packets arrive exactly on their timestamps' schedule")
        XCTAssertEqual(block.lastSenderReport, 0, "no SR from it yet")

        // Next interval: 50 more, none lost.
        for i in 100 ..< 150 { receive(i) }
        guard case .reportBlock(_, let second)? = try rtcpItems(report(&s, at: t)).dropFirst().first else { return XCTFail() }
        XCTAssertEqual(second.fractionLost, 0)
        XCTAssertEqual(second.cumulativeLost, 10)
        // Silence: no block.
        XCTAssertEqual(try rtcpItems(report(&s, at: t + 1000 * Self.ms)).count, 2, "RR and SDES only")
    }

    /// A source on probation (one packet so far, RFC 3550 A.1) gets no block; a duplicate counts
    /// as received (so cumulative loss can go below zero, as A.3 says).
    func testProbationAndDuplicates() throws {
        var s = RTCPSession(localSSRC: 1, cname: "c", wallClockNTP: Self.wall, monotonicNow: 0)
        rtp(sequence: 10, timestamp: 0, ssrc: 5).withUnsafeBytes { s.received(rtp: $0, at: 0) }
        XCTAssertEqual(try rtcpItems(report(&s, at: 0)).count, 2)
        for seq: UInt16 in [11, 12, 12, 13] { rtp(sequence: seq, timestamp: UInt32(seq) * 960, ssrc: 5).withUnsafeBytes { s.received(rtp: $0, at: 0) } }
        guard case .reportBlock(_, let block)? = try rtcpItems(report(&s, at: 0)).dropFirst().first else { return XCTFail() }
        XCTAssertEqual(block.cumulativeLost, -1)
        XCTAssertEqual(block.extendedHighestSequence, 13)
    }

    /// Jitter (RFC 3550 A.8): packets alternately 0 and 10 ms late converge on ~10 ms (480
    /// timestamp units), J += (|D| - J)/16.
    func testJitterOfAlternatingDelays() throws {
        var s = RTCPSession(localSSRC: 1, cname: "c", wallClockNTP: Self.wall, monotonicNow: 0)
        var expected = 0.0
        for i in 0 ..< 300 {
            let late: UInt64 = i % 2 == 0 ? 0 : 10
            rtp(sequence: UInt16(i), timestamp: UInt32(i) * 960, ssrc: 5).withUnsafeBytes {
                s.received(rtp: $0, at: (1000 + UInt64(i) * 20 + late) * Self.ms)
            }
            if i >= 2 { expected += (480 - expected) / 16 }   // from the third packet: |D| = 480 each
        }
        guard case .reportBlock(_, let block)? = try rtcpItems(report(&s, at: 7000 * Self.ms)).dropFirst().first else { return XCTFail() }
        XCTAssertEqual(Double(block.jitter), expected, accuracy: 2)
        XCTAssertEqual(s.sources.first?.jitter, block.jitter)
    }

    /// Round trip (RFC 3550 §6.4.1): our SR at t, the peer holds it 250 ms (DLSR) and its RR
    /// arrives at t + 290 ms: 40 ms. The peer's SR is echoed in our next block with DLSR.
    func testRoundTripFromThePeersEchoOfOurSenderReport() throws {
        var us = RTCPSession(localSSRC: 0xA, cname: "us", wallClockNTP: Self.wall, monotonicNow: 0)
        var peer = RTCPSession(localSSRC: 0xB, cname: "peer", wallClockNTP: Self.wall &+ (1234 << 32), monotonicNow: 0)   // another clock
        for i in 0 ..< 10 {
            let p = rtp(sequence: UInt16(i), timestamp: UInt32(i) * 960, ssrc: 0xA)
            p.withUnsafeBytes { us.sent(rtp: $0, at: UInt64(i) * 20 * Self.ms) }
            p.withUnsafeBytes { peer.received(rtp: $0, at: UInt64(i) * 20 * Self.ms + 20 * Self.ms) }
            let q = rtp(sequence: UInt16(i), timestamp: UInt32(i) * 960, ssrc: 0xB)
            q.withUnsafeBytes { peer.sent(rtp: $0, at: UInt64(i) * 20 * Self.ms) }
            q.withUnsafeBytes { us.received(rtp: $0, at: UInt64(i) * 20 * Self.ms + 20 * Self.ms) }
        }
        let ourSR = report(&us, at: 1000 * Self.ms)
        // The blocks ride in an RR after the SR (what Janus reads them from).
        let layout = try rtcpItems(ourSR).map { item -> String in
            switch item {
            case .senderReport: "SR"
            case .receiverReport: "RR"
            case .reportBlock(let from, let block): "block \(String(from, radix: 16))→\(String(block.ssrc, radix: 16))"
            case .canonicalName(_, let name): "CNAME \(name)"
            default: "\(item)"
            }
        }
        XCTAssertEqual(layout, ["SR", "RR", "block a→b", "CNAME us"])
        try receive(&peer, ourSR, at: 1020 * Self.ms)
        let peerSR = report(&peer, at: 1270 * Self.ms)
        try receive(&us, peerSR, at: 1290 * Self.ms)
        let rtt = try XCTUnwrap(us.roundTripMs)
        XCTAssertEqual(rtt, 40, accuracy: 0.1)
        XCTAssertEqual(us.remoteFractionLost, 0)
        XCTAssertNil(peer.roundTripMs, "our SR had no block with an LSR for the peer yet")

        // The peer goes on sending; our next report echoes its SR: LSR its compact NTP, DLSR
        // since it arrived (10 ms); the peer gets its own round trip on its own clock from it.
        rtp(sequence: 10, timestamp: 9600, ssrc: 0xB).withUnsafeBytes { us.received(rtp: $0, at: 1295 * Self.ms) }
        let ourRR = report(&us, at: 1300 * Self.ms)
        let next = try rtcpItems(ourRR)
        guard case .reportBlock(_, let block)? = next.dropFirst().first,
              case .senderReport(_, let peerInfo)? = try rtcpItems(peerSR).first else { return XCTFail("\(next)") }
        XCTAssertEqual(next.first, .receiverReport(ssrc: 0xA), "nothing sent since the last report")
        XCTAssertEqual(block.lastSenderReport, peerInfo.compactNTP)
        XCTAssertEqual(Double(block.delaySinceLastSenderReport), 0.010 * 65536, accuracy: 1)
        try receive(&peer, ourRR, at: 1320 * Self.ms)
        XCTAssertEqual(try XCTUnwrap(peer.roundTripMs), 40, accuracy: 0.1)
    }

    /// A report block whose echo does not fit our clock (LSR + DLSR after now) gives no round
    /// trip; one that says 25 % lost gives that fraction; a BYE forgets the source.
    func testImplausibleEchoLossAndGoodbye() throws {
        var s = RTCPSession(localSSRC: 0xA, cname: "c", wallClockNTP: Self.wall, monotonicNow: 0)
        let future = UInt32(truncatingIfNeeded: s.ntp(at: 5000 * Self.ms) >> 16)
        var out = [UInt8](repeating: 0, count: 200)
        let n = out.withUnsafeMutableBytes { raw -> Int in
            var w = RTCPWriter(raw)
            _ = w.beginReport(ssrc: 0xB, senderInfo: nil)
            _ = w.addBlock(RTCPReportBlock(ssrc: 0xA, fractionLost: 64, lastSenderReport: future))
            _ = w.goodbye(ssrc: 0xB)
            return w.length
        }
        rtp(sequence: 1, timestamp: 0, ssrc: 0xB).withUnsafeBytes { s.received(rtp: $0, at: 0) }
        XCTAssertEqual(s.sources.count, 1)
        try receive(&s, Array(out[0 ..< n]), at: 1000 * Self.ms)
        XCTAssertNil(s.roundTripMs)
        XCTAssertEqual(s.remoteFractionLost, 0.25)
        XCTAssertEqual(s.sources.count, 0, "BYE")
    }

    /// The schedule: first report 50-150 ms after start, then 0.5-1.5 s apart.
    func testReportSchedule() {
        var s = RTCPSession(localSSRC: 1, cname: "c", wallClockNTP: Self.wall, monotonicNow: 0)
        XCTAssertFalse(s.reportDue(at: 0), "not before start")
        s.start(at: 1000 * Self.ms, random: 0)
        XCTAssertFalse(s.reportDue(at: 1049 * Self.ms))
        XCTAssertTrue(s.reportDue(at: 1050 * Self.ms))
        s.start(at: 1000 * Self.ms, random: 0.999)
        XCTAssertFalse(s.reportDue(at: 1149 * Self.ms))
        XCTAssertTrue(s.reportDue(at: 1150 * Self.ms))
        XCTAssertEqual(RTCPSession.interval(random: 0), 500 * Self.ms)
        XCTAssertEqual(RTCPSession.interval(random: 0.5), 1000 * Self.ms)
        var out = [UInt8](repeating: 0, count: 200)
        _ = out.withUnsafeMutableBytes { s.writeReport(into: $0, at: 1150 * Self.ms, random: 0.25) }
        XCTAssertEqual(s.nextReportAt, 1900 * Self.ms)
    }

    /// The per-packet calls (`sent`, `received`) and a report written and read allocate nothing
    /// (the first packet of a new source appends to `sources` once, before the window). Needs
    /// the allocation probe preloaded:
    ///
    ///     LD_PRELOAD=$PWD/.build/debug/libroomallocprobe.so \
    ///         .build/debug/roomdPackageTests.xctest RoomWebRTCTests.RTCPSessionTests
    ///
    /// Without it the test is skipped. (A peer's CNAME longer than 15 bytes does cost one String
    /// per report read — once a second, not per packet.)
    func testPacketsAndReportsAllocateNothingWhenTheProbeIsLoaded() throws {
        typealias CountFunction = @convention(c) () -> UInt
        guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "roomallocprobe_thread_count") else {
            throw XCTSkip("libroomallocprobe.so not preloaded")
        }
        let count = unsafeBitCast(symbol, to: CountFunction.self)
        var us = RTCPSession(localSSRC: 0xA, cname: "us", wallClockNTP: Self.wall, monotonicNow: 0)
        var peer = RTCPSession(localSSRC: 0xB, cname: "peer", wallClockNTP: Self.wall, monotonicNow: 0)
        var ours = rtp(sequence: 0, timestamp: 0, ssrc: 0xA), theirs = rtp(sequence: 0, timestamp: 0, ssrc: 0xB)
        let report = UnsafeMutableRawBufferPointer.allocate(byteCount: 1500, alignment: 8)
        defer { report.deallocate() }
        var before: UInt = 0, reports = 0
        for i in 0 ..< 3000 {
            if i == 10 { before = count() }
            let t = UInt64(i) * 20 * Self.ms
            ours[2] = UInt8(truncatingIfNeeded: i >> 8)
            ours[3] = UInt8(truncatingIfNeeded: i)
            theirs[2] = ours[2]
            theirs[3] = ours[3]
            ours.withUnsafeBytes { us.sent(rtp: $0, at: t); peer.received(rtp: $0, at: t + Self.ms) }
            theirs.withUnsafeBytes { peer.sent(rtp: $0, at: t); us.received(rtp: $0, at: t + Self.ms) }
            if i % 50 == 49 {
                let n = us.writeReport(into: report, at: t, random: 0.5)
                try peer.receive(rtcp: UnsafeRawBufferPointer(rebasing: report[0 ..< n]), at: t + Self.ms)
                let k = peer.writeReport(into: report, at: t + 2 * Self.ms, random: 0.5)
                try us.receive(rtcp: UnsafeRawBufferPointer(rebasing: report[0 ..< k]), at: t + 3 * Self.ms)
                reports += 1
            }
        }
        XCTAssertEqual(count() - before, 0, "heap allocations in 6000 packets and \(reports) reports each way")
        XCTAssertNotNil(us.roundTripMs)
        XCTAssertEqual(us.remoteFractionLost, 0)
    }
}
