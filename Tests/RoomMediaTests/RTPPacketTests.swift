import RoomBase
import RoomMedia
import XCTest

final class RTPPacketTests: XCTestCase {
    private func serialize(_ packet: RTPPacket, payload: [UInt8], id: UInt8 = 1) throws -> [UInt8] {
        var out = [UInt8](repeating: 0xEE, count: 1500)
        let n = try out.withUnsafeMutableBytes { dst in
            try payload.withUnsafeBytes { try packet.serialize(payload: $0, into: dst, audioLevelExtensionID: id) }
        }
        return Array(out[..<n])
    }

    // MARK: - Round trips

    func testSerializeParseRoundTripWithoutExtension() throws {
        let p = RTPPacket(sequenceNumber: 0xABCD, timestamp: 0x0102_0304, ssrc: 0xDEAD_BEEF, marker: true)
        let bytes = try serialize(p, payload: [9, 8, 7])
        XCTAssertEqual(bytes, [0x80, 0x80 | 111, 0xAB, 0xCD, 1, 2, 3, 4, 0xDE, 0xAD, 0xBE, 0xEF, 9, 8, 7])
        let q = try RTPPacket.parse(bytes)
        XCTAssertTrue(q.marker)
        XCTAssertEqual(q.payloadType, 111)
        XCTAssertEqual(q.sequenceNumber, 0xABCD)
        XCTAssertEqual(q.timestamp, 0x0102_0304)
        XCTAssertEqual(q.ssrc, 0xDEAD_BEEF)
        XCTAssertNil(q.audioLevel)
        XCTAssertNil(q.extensionProfile)
        XCTAssertEqual(q.payloadRange, 12 ..< 15)
        bytes.withUnsafeBytes { XCTAssertEqual(Array(q.payload(in: $0)), [9, 8, 7]) }
    }

    func testAudioLevelRoundTripRFC6464() throws {
        for (vad, level) in [(true, UInt8(0)), (false, 127), (true, 42), (false, 1)] {
            let p = RTPPacket(sequenceNumber: 5, timestamp: 960, ssrc: 77,
                              audioLevel: RTPAudioLevel(voiceActivity: vad, level: level))
            let bytes = try serialize(p, payload: [1, 2])
            XCTAssertEqual(bytes.count, 12 + 8 + 2)
            XCTAssertEqual(bytes[0], 0x90, "V=2, X=1")
            XCTAssertEqual(Array(bytes[12 ..< 16]), [0xBE, 0xDE, 0, 1], "one-byte profile, one word")
            XCTAssertEqual(bytes[16], 0x10, "id 1, L=0 (one data byte)")
            XCTAssertEqual(bytes[17], (vad ? 0x80 : 0) | level)
            let q = try RTPPacket.parse(bytes)
            XCTAssertEqual(q.audioLevel, RTPAudioLevel(voiceActivity: vad, level: level))
            XCTAssertEqual(q.extensionProfile, 0xBEDE)
            XCTAssertEqual(q.extensionRange, 16 ..< 20)
            XCTAssertEqual(q.payloadRange, 20 ..< 22)
        }
    }

    func testAudioLevelExtensionIDIsAParameter() throws {
        let p = RTPPacket(sequenceNumber: 1, timestamp: 2, ssrc: 3, audioLevel: RTPAudioLevel(voiceActivity: true, level: 30))
        let bytes = try serialize(p, payload: [0], id: 5)
        XCTAssertEqual(bytes[16], 0x50)
        XCTAssertEqual(try RTPPacket.parse(bytes, audioLevelExtensionID: 5).audioLevel?.level, 30)
        XCTAssertNil(try RTPPacket.parse(bytes, audioLevelExtensionID: 1).audioLevel, "other ids are skipped")
        var dst = [UInt8](repeating: 0, count: 64)
        XCTAssertThrowsError(try dst.withUnsafeMutableBytes { try p.serializeHeader(into: $0, audioLevelExtensionID: 15) }) {
            XCTAssertEqual($0 as? RTPSerializeError, .invalidExtensionID(15))
        }
    }

    func testAudioLevelFromDBov() {
        XCTAssertEqual(RTPAudioLevel(voiceActivity: false, dBov: -30.4).level, 30)
        XCTAssertEqual(RTPAudioLevel(voiceActivity: false, dBov: 3).level, 0)
        XCTAssertEqual(RTPAudioLevel(voiceActivity: false, dBov: -200).level, 127)
        XCTAssertEqual(RTPAudioLevel(voiceActivity: false, dBov: -.infinity).level, 127)
        XCTAssertEqual(RTPAudioLevel(voiceActivity: false, dBov: .nan).level, 127)
        XCTAssertEqual(RTPAudioLevel(voiceActivity: true, level: 200).level, 127)
        XCTAssertEqual(RTPAudioLevel(byte: 0xFF), RTPAudioLevel(voiceActivity: true, level: 127))
        XCTAssertEqual(RTPAudioLevel(voiceActivity: true, level: 3).dBov, -3)
    }

    func testParsesLevelAmongOtherOneByteElementsAndPadding() throws {
        // Extension of 3 words: id 2 (2 bytes), padding byte, id 1 level, id 3 (4 bytes), padding.
        var bytes: [UInt8] = [0x90, 111, 0, 1, 0, 0, 0, 1, 0, 0, 0, 2, 0xBE, 0xDE, 0, 3]
        bytes += [0x21, 0xAA, 0xBB, 0x00, 0x10, 0x85, 0x33, 1, 2, 3, 4, 0x00]
        bytes += [42]
        let q = try RTPPacket.parse(bytes)
        XCTAssertEqual(q.audioLevel, RTPAudioLevel(voiceActivity: true, level: 5))
        XCTAssertEqual(q.payloadRange, 28 ..< 29)
    }

    func testParsesTwoByteHeaderForm() throws {
        var bytes: [UInt8] = [0x90, 111, 0, 1, 0, 0, 0, 1, 0, 0, 0, 2, 0x10, 0x00, 0, 2]
        bytes += [7, 2, 0xAA, 0xBB, 1, 1, 0x7F, 0]   // id 7 (2 bytes), id 1 (1 byte), padding
        let q = try RTPPacket.parse(bytes)
        XCTAssertEqual(q.audioLevel, RTPAudioLevel(voiceActivity: false, level: 127))
        XCTAssertEqual(q.payloadLength, 0)
    }

    func testCSRCsAndPaddingAreParsed() throws {
        var bytes: [UInt8] = [0xA2, 0x6F, 0, 1, 0, 0, 0, 1, 0, 0, 0, 2]   // P=1, CC=2
        bytes += [0, 0, 0, 10, 0, 0, 0, 11]
        bytes += [5, 6, 7]
        bytes += [0, 0, 3]                                                // 3 bytes of padding
        let q = try RTPPacket.parse(bytes)
        XCTAssertEqual(q.csrcCount, 2)
        XCTAssertEqual(q.csrcList, [10, 11])
        XCTAssertEqual(q.paddingLength, 3)
        XCTAssertEqual(q.payloadRange, 20 ..< 23)
        XCTAssertFalse(q.marker)
        XCTAssertEqual(q.payloadType, 0x6F)
    }

    func testSerializeIntoTooSmallBufferThrows() {
        let p = RTPPacket(sequenceNumber: 1, timestamp: 2, ssrc: 3)
        var dst = [UInt8](repeating: 0, count: 14)
        let payload: [UInt8] = [1, 2, 3]
        XCTAssertThrowsError(try dst.withUnsafeMutableBytes { d in
            try payload.withUnsafeBytes { try p.serialize(payload: $0, into: d) }
        }) { XCTAssertEqual($0 as? RTPSerializeError, .bufferTooSmall(needed: 15, available: 14)) }
        XCTAssertEqual(dst, [UInt8](repeating: 0, count: 14), "nothing written on failure")
        var bad = p
        bad.payloadType = 200
        XCTAssertThrowsError(try dst.withUnsafeMutableBytes { try bad.serializeHeader(into: $0) }) {
            XCTAssertEqual($0 as? RTPSerializeError, .invalidPayloadType(200))
        }
    }

    func testSerializeHeaderLetsEncoderWriteInPlace() throws {
        let p = RTPPacket(sequenceNumber: 1, timestamp: 2, ssrc: 3, audioLevel: RTPAudioLevel(voiceActivity: true, level: 9))
        var dst = [UInt8](repeating: 0, count: 100)
        let header = try dst.withUnsafeMutableBytes { try p.serializeHeader(into: $0) }
        XCTAssertEqual(header, p.serializedHeaderLength)
        XCTAssertEqual(header, 20)
        dst[header] = 0x55
        let q = try RTPPacket.parse(Array(dst[..<(header + 1)]))
        XCTAssertEqual(q.payloadRange, 20 ..< 21)
    }

    // MARK: - Malformed input

    func testSpecificMalformedHeadersAreNamed() {
        func err(_ bytes: [UInt8]) -> RTPParseError? {
            do { _ = try RTPPacket.parse(bytes); return nil } catch { return error }
        }
        let good: [UInt8] = [0x80, 111, 0, 1, 0, 0, 0, 1, 0, 0, 0, 2]
        XCTAssertEqual(err([]), .truncatedHeader(length: 0))
        XCTAssertEqual(err(Array(good[..<11])), .truncatedHeader(length: 11))
        XCTAssertEqual(err([0x40] + good[1...]), .unsupportedVersion(1))
        XCTAssertEqual(err([0xC0] + good[1...]), .unsupportedVersion(3))
        XCTAssertEqual(err([0x8F] + good[1...] + [0, 0, 0, 1]), .csrcListPastEnd(csrcCount: 15, length: 16))
        XCTAssertEqual(err([0x90] + good[1...] + [0xBE]), .extensionHeaderPastEnd(offset: 12, length: 13))
        XCTAssertEqual(err([0x90] + good[1...] + [0xBE, 0xDE, 0, 2, 0x10, 0, 0, 0]),
                       .extensionPastEnd(declaredBytes: 8, available: 4))
        XCTAssertEqual(err([0x90] + good[1...] + [0xBE, 0xDE, 0, 1, 0x13, 0, 0, 0]),
                       .extensionElementPastEnd(id: 1, offset: 16))
        XCTAssertEqual(err([0xA0] + good[1...] + [1, 2, 0]), .invalidPadding(count: 0, available: 3))
        XCTAssertEqual(err([0xA0] + good[1...] + [1, 2, 9]), .invalidPadding(count: 9, available: 3))
        XCTAssertEqual(err([0xA0] + good[1...]), .invalidPadding(count: 2, available: 0),
                       "with no payload the padding count would eat into the header")
        XCTAssertNil(err(good), "12 bytes with an empty payload is valid")
    }

    func testTruncationsOfAValidPacketNeverTrap() throws {
        var bytes: [UInt8] = [0xB2, 111, 0, 1, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 9, 0, 0, 0, 8]
        bytes += [0xBE, 0xDE, 0, 2, 0x10, 0x85, 0x21, 1, 2, 0, 0, 0]
        bytes += [1, 2, 3, 4, 0, 2]
        let full = try RTPPacket.parse(bytes)
        XCTAssertEqual(full.audioLevel?.level, 5)
        XCTAssertEqual(full.payloadRange, 32 ..< 36)
        for n in 0 ..< bytes.count {
            let cut = Array(bytes[..<n])
            do {
                let p = try RTPPacket.parse(cut)
                XCTAssertLessThanOrEqual(p.payloadOffset + p.payloadLength, n)
            } catch {
                // every truncation point lands in a named error; reaching here is the point
            }
        }
    }

    func testRandomGarbageNeverTrapsAndRangesStayInside() {
        var rng = SplitMix64(seed: 99)
        var parsed = 0
        var errors: [String: Int] = [:]
        let template: [UInt8] = [0x90, 111, 0, 1, 0, 0, 0, 1, 0, 0, 0, 2, 0xBE, 0xDE, 0, 1, 0x10, 0x05, 0, 0, 1, 2, 3]
        for i in 0 ..< 20_000 {
            var bytes: [UInt8]
            if i % 2 == 0 {
                bytes = (0 ..< Int(rng.next() % 80)).map { _ in UInt8(truncatingIfNeeded: rng.next()) }
                if !bytes.isEmpty, rng.next() % 2 == 0 { bytes[0] = 0x80 | (bytes[0] & 0x3F) }   // mostly v2
            } else {
                bytes = template
                for _ in 0 ..< 1 + Int(rng.next() % 4) {
                    let at = Int(rng.next() % UInt64(bytes.count))
                    bytes[at] ^= UInt8(truncatingIfNeeded: 1 << (rng.next() % 8))
                }
                bytes = Array(bytes[..<Int(rng.next() % UInt64(bytes.count + 1))])
            }
            bytes.withUnsafeBytes { raw in
                do {
                    let p = try RTPPacket.parse(raw, audioLevelExtensionID: UInt8(1 + i % 14))
                    XCTAssertGreaterThanOrEqual(p.payloadOffset, 12)
                    XCTAssertLessThanOrEqual(p.payloadOffset + p.payloadLength + p.paddingLength, raw.count)
                    XCTAssertGreaterThanOrEqual(p.payloadLength, 0)
                    XCTAssertLessThanOrEqual(p.extensionRange.upperBound, raw.count)
                    XCTAssertLessThanOrEqual(p.csrcCount, 15)
                    XCTAssertEqual(p.payload(in: raw).count, p.payloadLength)
                    parsed += 1
                } catch {
                    errors["\(error)".prefix { $0 != "(" }.description, default: 0] += 1
                }
            }
        }
        XCTAssertGreaterThan(parsed, 1000, "some inputs are valid")
        for kind in ["truncatedHeader", "unsupportedVersion", "csrcListPastEnd", "extensionPastEnd", "invalidPadding"] {
            XCTAssertGreaterThan(errors[kind] ?? 0, 0, "fuzzing reached \(kind): \(errors)")
        }
    }

    // MARK: - Sequence arithmetic

    func testSequenceArithmeticAcrossWrap() {
        XCTAssertEqual(RTPSequence.distance(from: 65535, to: 0), 1)
        XCTAssertEqual(RTPSequence.distance(from: 0, to: 65535), -1)
        XCTAssertEqual(RTPSequence.distance(from: 100, to: 100 + 32767), 32767)
        XCTAssertTrue(RTPSequence.isNewer(2, than: 65530))
        XCTAssertFalse(RTPSequence.isNewer(65530, than: 2))
        XCTAssertFalse(RTPSequence.isNewer(7, than: 7))
        XCTAssertEqual(RTPSequence.extended(5, cycles: 2), 0x2_0005)
        XCTAssertEqual(RTPSequence.timestampDistance(from: UInt32.max - 9, to: 10), 20)

        var u = RTPSequenceUnwrapper()
        XCTAssertEqual(u.unwrap(65534), 65534)
        XCTAssertEqual(u.unwrap(65535), 65535)
        XCTAssertEqual(u.unwrap(1), 65537)
        XCTAssertEqual(u.unwrap(0), 65536, "late packet across the wrap")
        XCTAssertEqual(u.highest, 65537)
        XCTAssertEqual(u.extendedHighest, 0x1_0001)
        for s in 2 ... 65535 { _ = u.unwrap(UInt16(s)) }
        XCTAssertEqual(u.unwrap(0), 131_072, "second wrap")

        var t = RTPTimestampUnwrapper()
        XCTAssertEqual(t.unwrap(UInt32.max - 479), 4_294_966_816)
        XCTAssertEqual(t.unwrap(480 - 480 + 0), 4_294_967_296)
        XCTAssertEqual(t.unwrap(UInt32.max - 959), 4_294_966_336, "older timestamp stays older")
        XCTAssertEqual(t.highest, 4_294_967_296)
    }
}
