import RoomWebRTC
import XCTest

func hex(_ text: String) -> [UInt8] {
    let digits = Array(text.utf8.filter { $0 != UInt8(ascii: " ") && $0 != UInt8(ascii: "\n") })
    return stride(from: 0, to: digits.count, by: 2).map { UInt8(String(decoding: digits[$0 ..< $0 + 2], as: UTF8.self), radix: 16)! }
}

func rtcpItems(_ bytes: [UInt8]) throws -> [RTCPItem] {
    try bytes.withUnsafeBytes { try RTCPReader.items($0) }
}

final class RTCPPacketTests: XCTestCase {
    /// An SR from 0x11223344 with one block about 0x55667788, then SDES CNAME "roomd", laid out
    /// by hand from RFC 3550 §6.4.1 and §6.5.
    static let senderReport = hex("""
        81c8000c 11223344 e7a1b2c3 d4e5f607 00012340 00000032 00001f40
        55667788 05fffffe 00010064 00000010 b2c3d4e5 00008000
        81ca0003 11223344 0105726f 6f6d6400
        """)

    private func refusal(_ bytes: [UInt8], file: StaticString = #filePath, line: UInt = #line) -> String {
        do {
            _ = try rtcpItems(bytes)
            XCTFail("accepted \(bytes.count) bytes", file: file, line: line)
            return ""
        } catch { return "\(error)" }
    }

    func testReadsASenderReportItsBlockAndTheCNAME() throws {
        XCTAssertEqual(try rtcpItems(Self.senderReport), [
            .senderReport(ssrc: 0x1122_3344, RTCPSenderInfo(ntpTimestamp: 0xE7A1_B2C3_D4E5_F607, rtpTimestamp: 0x12340,
                                                             packetCount: 50, octetCount: 8000)),
            .reportBlock(from: 0x1122_3344, RTCPReportBlock(ssrc: 0x5566_7788, fractionLost: 5, cumulativeLost: -2,
                                                            extendedHighestSequence: 0x10064, jitter: 16,
                                                            lastSenderReport: 0xB2C3_D4E5, delaySinceLastSenderReport: 0x8000)),
            .canonicalName(ssrc: 0x1122_3344, "roomd"),
        ])
        XCTAssertEqual(RTCPSenderInfo(ntpTimestamp: 0xE7A1_B2C3_D4E5_F607, rtpTimestamp: 0, packetCount: 0, octetCount: 0).compactNTP,
                       0xB2C3_D4E5, "LSR is the middle 32 bits")
    }

    /// The writer produces exactly the hand-made bytes.
    func testWriterProducesTheSameBytes() {
        var out = [UInt8](repeating: 0xEE, count: 200)
        let n = out.withUnsafeMutableBytes { raw -> Int in
            var w = RTCPWriter(raw)
            XCTAssertTrue(w.beginReport(ssrc: 0x1122_3344, senderInfo: RTCPSenderInfo(
                ntpTimestamp: 0xE7A1_B2C3_D4E5_F607, rtpTimestamp: 0x12340, packetCount: 50, octetCount: 8000)))
            XCTAssertTrue(w.addBlock(RTCPReportBlock(ssrc: 0x5566_7788, fractionLost: 5, cumulativeLost: -2, extendedHighestSequence: 0x10064,
                                                     jitter: 16, lastSenderReport: 0xB2C3_D4E5, delaySinceLastSenderReport: 0x8000)))
            XCTAssertTrue(w.sourceDescription(ssrc: 0x1122_3344, cname: Array("roomd".utf8)))
            return w.length
        }
        XCTAssertEqual(Array(out[0 ..< n]), Self.senderReport)
    }

    /// RR + SDES + BYE, and CNAMEs of every length pad to a word with at least one zero byte.
    func testReceiverReportGoodbyeAndCNAMEPadding() throws {
        for length in [0, 1, 2, 3, 4, 5, 16, 255, 300] {
            let cname = [UInt8](repeating: UInt8(ascii: "c"), count: length)
            var out = [UInt8](repeating: 0, count: 600)
            let n = out.withUnsafeMutableBytes { raw -> Int in
                var w = RTCPWriter(raw)
                _ = w.beginReport(ssrc: 7, senderInfo: nil)
                _ = w.sourceDescription(ssrc: 7, cname: cname)
                _ = w.goodbye(ssrc: 7)
                return w.length
            }
            XCTAssertEqual(n % 4, 0)
            XCTAssertEqual(Array(out[0 ..< 8]), [0x80, 201, 0, 1, 0, 0, 0, 7], "an empty RR")
            XCTAssertEqual(try rtcpItems(Array(out[0 ..< n])), [
                .receiverReport(ssrc: 7),
                .canonicalName(ssrc: 7, String(repeating: "c", count: min(length, 255))),
                .goodbye(ssrc: 7),
            ], "CNAME of \(length) bytes")
        }
    }

    /// Feedback (205, 206), XR (207), APP (204) and unknown types are skipped whole, whatever
    /// comes before or after them.
    func testUnknownPacketTypesAreSkipped() throws {
        let pli = hex("81ce0002 11223344 55667788")                    // PSFB PLI
        let nack = hex("81cd0003 11223344 55667788 00640000")           // RTPFB generic NACK
        let xr = hex("80cf0002 11223344 04000000")                      // XR with a truncated-looking block: not read
        let app = hex("80cc0003 11223344 6e616d65 00000000")            // APP "name"
        let rr = hex("80c90001 11223344")
        let bytes = rr + pli + nack + xr + app + hex("81cb0001 11223344")
        XCTAssertEqual(try rtcpItems(bytes), [
            .receiverReport(ssrc: 0x1122_3344),
            .skipped(packetType: 206), .skipped(packetType: 205), .skipped(packetType: 207), .skipped(packetType: 204),
            .goodbye(ssrc: 0x1122_3344),
        ])
        XCTAssertEqual(try rtcpItems(pli), [.skipped(packetType: 206)], "a reduced-size packet (RFC 5506) alone")
    }

    func testPaddingOnTheLastPacketOnly() throws {
        // RR with 4 bytes of padding (P set, last byte the count).
        let padded = hex("a0c90002 11223344 00000004")
        XCTAssertEqual(try rtcpItems(padded), [.receiverReport(ssrc: 0x1122_3344)])
        XCTAssertTrue(refusal(padded + hex("80c90001 11223344")).contains("not the last"))
        XCTAssertTrue(refusal(hex("a0c90002 11223344 00000000")).contains("padding of 0"))
        XCTAssertTrue(refusal(hex("a0c90002 11223344 00000009")).contains("padding of 9"))
    }

    func testBadFramingIsRefusedWithAReason() {
        XCTAssertTrue(refusal([]).contains("shorter than an RTCP header"))
        XCTAssertTrue(refusal(hex("40c90001 11223344")).contains("version 1"))
        XCTAssertTrue(refusal(hex("80c90002 11223344")).contains("says 12 bytes; 8 remain"))
        XCTAssertTrue(refusal(hex("80c90001 11223344 8000")).contains("2 bytes after the last packet"))
        XCTAssertTrue(refusal(hex("81c90001 11223344")).contains("RR at 0 with 1 report blocks in 4 bytes"))
        XCTAssertTrue(refusal(hex("80c80001 11223344")).contains("SR at 0"))
        XCTAssertTrue(refusal(hex("82cb0001 11223344")).contains("BYE"))
        XCTAssertTrue(refusal(hex("81ca0002 11223344 01057200")).contains("item 1 runs past"))
        XCTAssertTrue(refusal(hex("81ca0002 11223344 01027272")).contains("without its end item"))
        XCTAssertTrue(refusal(hex("82ca0002 11223344 00000000")).contains("chunk past"))
    }

    /// A refused datagram gives no items at all, even the ones before the fault.
    func testNothingIsVisitedFromARefusedDatagram() {
        var seen = 0
        let bytes = Self.senderReport + hex("80c90005 11223344")
        XCTAssertThrowsError(try bytes.withUnsafeBytes { b in try RTCPReader.read(b) { _ in seen += 1 } })
        XCTAssertEqual(seen, 0)
    }

    /// Every prefix, and every single-byte corruption of the header bytes, is read or refused
    /// without a trap (the fuzz target `rtcp` does this at length).
    func testEveryPrefixAndCorruptedHeaderIsReadOrRefused() {
        let bytes = Self.senderReport + hex("81cb0001 11223344")
        for n in 0 ... bytes.count { _ = try? rtcpItems(Array(bytes[0 ..< n])) }
        for at in [0, 1, 2, 3, 52, 53, 54, 55, 56, 60, 61] {
            for value: UInt8 in [0, 1, 0x1F, 0x3F, 0x7F, 0x80, 0xBF, 0xFF] {
                var corrupted = bytes
                corrupted[at] = value
                _ = try? rtcpItems(corrupted)
            }
        }
    }

    func testWriterRefusesWhatDoesNotFit() {
        var out = [UInt8](repeating: 0, count: 40)
        out.withUnsafeMutableBytes { raw in
            var w = RTCPWriter(raw)
            XCTAssertTrue(w.beginReport(ssrc: 1, senderInfo: RTCPSenderInfo(ntpTimestamp: 0, rtpTimestamp: 0, packetCount: 0, octetCount: 0)))
            XCTAssertFalse(w.addBlock(RTCPReportBlock(ssrc: 2)), "28 + 24 > 40")
            XCTAssertFalse(w.sourceDescription(ssrc: 1, cname: Array("a-cname-too-long".utf8)))
            XCTAssertEqual(w.length, 28)
        }
        var big = [UInt8](repeating: 0, count: 2000)
        big.withUnsafeMutableBytes { raw in
            var w = RTCPWriter(raw)
            _ = w.beginReport(ssrc: 1, senderInfo: nil)
            for i in 0 ..< 31 { XCTAssertTrue(w.addBlock(RTCPReportBlock(ssrc: UInt32(i)))) }
            XCTAssertFalse(w.addBlock(RTCPReportBlock(ssrc: 99)), "31 blocks at most")
        }
    }

    func testRTCPMuxDemultiplexing() {
        for (bytes, rtcp) in [(hex("80c90001 11223344"), true), (hex("80c80001 11223344"), true), (hex("80ce0001 11223344"), true),
                              (hex("80cf0001 11223344"), false), (hex("806f0001 11223344"), false), (hex("80ef0001 11223344"), false),
                              (hex("00c90001 11223344"), false)] {
            XCTAssertEqual(bytes.withUnsafeBytes { RTCPReader.looksLikeRTCP($0) }, rtcp, "\(bytes)")
        }
    }
}
