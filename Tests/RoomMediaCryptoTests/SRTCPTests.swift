import CLibcrypto
import Glibc
import RoomMedia
import RoomMediaCrypto
import RoomProtocol
import XCTest

/// SRTCP with AEAD_AES_128_GCM (RFC 7714 §9) written from the RFC with OpenSSL's EVP, sharing
/// no code with libsrtp2 or the OpenSSL cipher roomd gives it: a compound packet is
/// header (8 octets, in clear) ‖ encrypted rest ‖ 16-octet tag ‖ E flag + 31-bit SRTCP index;
/// IV = (0x0000 ‖ SSRC ‖ 0x0000 ‖ index) XOR salt; associated data = header ‖ E + index.
/// Keys: RFC 3711 §4.3 labels 3 (encryption) and 5 (salt), not the RTP ones.
enum ReferenceSRTCP {
    static let labelEncryption: UInt8 = 0x03
    static let labelSalt: UInt8 = 0x05

    static func sessionKeys(master: [UInt8]) -> ReferenceSRTP.SessionKeys {
        let key = Array(master[0 ..< 16]), salt = Array(master[16 ..< 28])
        return .init(key: ReferenceSRTP.derive(masterKey: key, masterSalt: salt, label: labelEncryption, length: 16),
                     salt: ReferenceSRTP.derive(masterKey: key, masterSalt: salt, label: labelSalt, length: 12))
    }

    static func iv(salt: [UInt8], ssrc: [UInt8], index: UInt32) -> [UInt8] {
        let block: [UInt8] = [0, 0] + ssrc + [0, 0] + bigEndian(index & 0x7FFF_FFFF)
        return zip(block, salt).map { $0 ^ $1 }
    }

    static func bigEndian(_ v: UInt32) -> [UInt8] {
        [UInt8(truncatingIfNeeded: v >> 24), UInt8(truncatingIfNeeded: v >> 16), UInt8(truncatingIfNeeded: v >> 8), UInt8(truncatingIfNeeded: v)]
    }

    static func encrypt(_ rtcp: [UInt8], keys: ReferenceSRTP.SessionKeys, index: UInt32) -> [UInt8] {
        let header = Array(rtcp[0 ..< 8]), word = bigEndian(0x8000_0000 | index)
        let (body, tag) = gcm(encrypt: true, key: keys.key, iv: iv(salt: keys.salt, ssrc: Array(rtcp[4 ..< 8]), index: index),
                              aad: header + word, data: Array(rtcp[8...]), tag: nil)!
        return header + body + tag + word
    }

    /// The RTCP packet and its index, or nil when the tag does not verify.
    static func decrypt(_ srtcp: [UInt8], keys: ReferenceSRTP.SessionKeys) -> (rtcp: [UInt8], index: UInt32)? {
        guard srtcp.count >= 8 + 16 + 4 else { return nil }
        let header = Array(srtcp[0 ..< 8]), word = Array(srtcp[srtcp.count - 4 ..< srtcp.count])
        let index = UInt32(word[0] & 0x7F) << 24 | UInt32(word[1]) << 16 | UInt32(word[2]) << 8 | UInt32(word[3])
        guard word[0] & 0x80 != 0 else { return nil }   // only encrypted SRTCP here
        let tag = Array(srtcp[srtcp.count - 20 ..< srtcp.count - 4]), body = Array(srtcp[8 ..< srtcp.count - 20])
        guard let (plain, _) = gcm(encrypt: false, key: keys.key, iv: iv(salt: keys.salt, ssrc: Array(srtcp[4 ..< 8]), index: index),
                                   aad: header + word, data: body, tag: tag) else { return nil }
        return (header + plain, index)
    }

    /// AES-128-GCM with a 12-octet IV: (output, tag); decryption checks `tag` and returns nil
    /// when it does not verify.
    static func gcm(encrypt: Bool, key: [UInt8], iv: [UInt8], aad: [UInt8], data: [UInt8], tag: [UInt8]?) -> ([UInt8], [UInt8])? {
        let ctx = EVP_CIPHER_CTX_new()!
        defer { EVP_CIPHER_CTX_free(ctx) }
        var out = [UInt8](repeating: 0, count: data.count + 16)
        var n: Int32 = 0
        let e: Int32 = encrypt ? 1 : 0
        guard EVP_CipherInit_ex(ctx, EVP_aes_128_gcm(), nil, nil, nil, e) == 1,
              EVP_CIPHER_CTX_ctrl(ctx, roomd_evp_ctrl_gcm_set_ivlen, 12, nil) == 1,
              EVP_CipherInit_ex(ctx, nil, nil, key, iv, e) == 1,
              EVP_CipherUpdate(ctx, nil, &n, aad, Int32(aad.count)) == 1,
              EVP_CipherUpdate(ctx, &out, &n, data, Int32(data.count)) == 1
        else { return nil }
        let written = Int(n)
        if var tag {
            guard EVP_CIPHER_CTX_ctrl(ctx, roomd_evp_ctrl_gcm_set_tag, 16, &tag) == 1 else { return nil }
        }
        let final = out.withUnsafeMutableBufferPointer { EVP_CipherFinal_ex(ctx, $0.baseAddress! + written, &n) }
        guard final == 1 else { return nil }
        var produced = [UInt8](repeating: 0, count: 16)
        if encrypt { guard EVP_CIPHER_CTX_ctrl(ctx, roomd_evp_ctrl_gcm_get_tag, 16, &produced) == 1 else { return nil } }
        return (Array(out[0 ..< written]), produced)
    }
}

final class SRTCPTests: XCTestCase {
    /// A sender report (SSRC 0x11223344, one report block) followed by SDES CNAME "roomd": what
    /// the transport sends, written out by hand.
    private let compound: [UInt8] = hex("""
        81c8000c 11223344 e7a1b2c3 d4e5f607 00012340 00000032 00001f40
        55667788 05000003 00010064 00000010 b2c3d4e5 00008000
        81ca0003 11223344 0105726f 6f6d6400
        """)

    /// RFC 7714 §17.1: the reference against the RFC's own SRTCP vector (session key and salt
    /// given, SRTCP index 0x5d4).
    func testReferenceMatchesRFC7714SRTCPVector() {
        let keys = ReferenceSRTP.SessionKeys(key: hex("000102030405060708090a0b0c0d0e0f"), salt: hex("517569642070726f2071756f"))
        let rtcp = hex("81c8000d 4d617273 4e545031 4e545032 52545020 0000042a 0000e930 4c756e61 deadbeef deadbeef deadbeef deadbeef deadbeef")
        let srtcp = hex("""
            81c8000d 4d617273 63e94885 dcdab67c a727d766 2f6b7e99 7ff5c0f7 6c06f32d c676a5f1 730d6fda 4ce09b46 86303ded
            0bb9275b c84aa458 96cf4d2f c5abf872 45d9eade 800005d4
            """)
        XCTAssertEqual(ReferenceSRTCP.iv(salt: keys.salt, ssrc: Array(rtcp[4 ..< 8]), index: 0x5d4), hex("517524055203726f207170bb"))
        XCTAssertEqual(ReferenceSRTCP.encrypt(rtcp, keys: keys, index: 0x5d4), srtcp)
        XCTAssertEqual(ReferenceSRTCP.decrypt(srtcp, keys: keys)?.rtcp, rtcp)
        XCTAssertEqual(ReferenceSRTCP.decrypt(srtcp, keys: keys)?.index, 0x5d4)
        var forged = srtcp
        forged[30] ^= 1
        XCTAssertNil(ReferenceSRTCP.decrypt(forged, keys: keys))
        var otherIndex = srtcp
        otherIndex[otherIndex.count - 1] ^= 1   // the index is authenticated too
        XCTAssertNil(ReferenceSRTCP.decrypt(otherIndex, keys: keys))
    }

    private func protect(_ session: SRTPSession, _ packet: [UInt8]) -> [UInt8]? {
        var buffer = packet + [UInt8](repeating: 0, count: SRTPSession.rtcpTrailerRoom)
        guard let n = buffer.withUnsafeMutableBytes({ session.protectRTCP($0, length: packet.count) }) else { return nil }
        return Array(buffer[0 ..< n])
    }

    private func unprotect(_ session: SRTPSession, _ packet: [UInt8]) -> (SRTPSession.RTCPOutcome, [UInt8]) {
        var buffer = packet
        let outcome = buffer.withUnsafeMutableBytes { session.unprotectRTCP($0, length: packet.count) }
        if case let .rtcp(n) = outcome { return (outcome, Array(buffer[0 ..< n])) }
        return (outcome, [])
    }

    /// libsrtp (on roomd's OpenSSL GCM) writes what the RFC reference reads, with the RTCP keys
    /// of the same master key, and reads what the reference writes.
    func testWrapperOutputIsStandardSRTCPBothWays() throws {
        let master = SRTPMasterKey.random()
        let sender = try SRTPSession(key: master, direction: .protect)
        let receiver = try SRTPSession(key: master, direction: .unprotect)
        let reference = ReferenceSRTCP.sessionKeys(master: master.bytes)

        for expectedIndex: UInt32 in [1, 2, 3] {
            let wire = try XCTUnwrap(protect(sender, compound))
            XCTAssertEqual(wire.count, compound.count + SRTPSession.rtcpOverhead)
            XCTAssertEqual(Array(wire[0 ..< 8]), Array(compound[0 ..< 8]), "header and sender SSRC stay readable")
            XCTAssertNotEqual(Array(wire[8 ..< compound.count]), Array(compound[8...]), "the rest is encrypted")
            let read = try XCTUnwrap(ReferenceSRTCP.decrypt(wire, keys: reference), "OpenSSL reads what libsrtp wrote")
            XCTAssertEqual(read.rtcp, compound)
            XCTAssertEqual(read.index, expectedIndex, "one index per packet per source (libsrtp starts at 1)")
            XCTAssertNil(ReferenceSRTCP.decrypt(wire, keys: ReferenceSRTP.sessionKeys(master: master.bytes)),
                         "SRTCP is not keyed with the RTP keys")
        }
        for index: UInt32 in [7, 8, 0x7FFF_FFF0] {
            let theirs = ReferenceSRTCP.encrypt(compound, keys: reference, index: index)
            let (outcome, plain) = unprotect(receiver, theirs)
            XCTAssertEqual(outcome, .rtcp(length: compound.count))
            XCTAssertEqual(plain, compound)
        }
        XCTAssertEqual(sender.statistics.rtcpProtected, 3)
        XCTAssertEqual(receiver.statistics.rtcpUnprotected, 3)
        XCTAssertEqual(sender.statistics.protected, 0, "RTP counts apart")
    }

    /// RTP and RTCP of one SSRC share a session without disturbing each other (one master key
    /// per direction in DTLS-SRTP).
    func testRTPAndRTCPShareASession() throws {
        let master = SRTPMasterKey.random()
        let sender = try SRTPSession(key: master, direction: .protect)
        let receiver = try SRTPSession(key: master, direction: .unprotect)
        var rtp: [UInt8] = [0x80, 0x6F, 0x00, 0x01, 0, 0, 0x03, 0xC0, 0x11, 0x22, 0x33, 0x44, 0xF8, 0xFF, 0xFE]
        for i in 0 ..< 5 {
            rtp[3] = UInt8(i)
            var buffer = rtp + [UInt8](repeating: 0, count: SRTPSession.trailerRoom)
            let n = try XCTUnwrap(buffer.withUnsafeMutableBytes { sender.protect($0, length: rtp.count) })
            let outcome = buffer.withUnsafeMutableBytes { receiver.unprotect($0, length: n) }
            XCTAssertEqual(outcome, .rtp(length: rtp.count))
            let wire = try XCTUnwrap(protect(sender, compound))
            XCTAssertEqual(unprotect(receiver, wire).1, compound)
        }
        XCTAssertEqual(receiver.statistics.unprotected, 5)
        XCTAssertEqual(receiver.statistics.rtcpUnprotected, 5)
    }

    func testBadTagsReplaysAndShortPacketsAreRefusedAndCounted() throws {
        let master = SRTPMasterKey.random()
        let sender = try SRTPSession(key: master, direction: .protect)
        let receiver = try SRTPSession(key: master, direction: .unprotect)
        let first = try XCTUnwrap(protect(sender, compound))
        XCTAssertEqual(unprotect(receiver, first).0, .rtcp(length: compound.count))

        var tampered = try XCTUnwrap(protect(sender, compound))
        tampered[12] ^= 0x01                                           // encrypted body
        XCTAssertEqual(unprotect(receiver, tampered).0, .authenticationFailure)
        var header = try XCTUnwrap(protect(sender, compound))
        header[1] = 201                                                // SR → RR in the clear header
        XCTAssertEqual(unprotect(receiver, header).0, .authenticationFailure)
        let otherKey = try SRTPSession(key: .random(), direction: .protect)
        for _ in 0 ..< 4 { _ = protect(otherKey, compound) }   // past the indexes the receiver saw (libsrtp checks replay first)
        XCTAssertEqual(unprotect(receiver, try XCTUnwrap(protect(otherKey, compound))).0, .authenticationFailure)

        XCTAssertEqual(unprotect(receiver, first).0, .replay)
        XCTAssertEqual(unprotect(receiver, Array(first[0 ..< 27])).0, .malformed, "shorter than header + tag + index")

        XCTAssertNil(protect(receiver, compound), "a receiving session does not protect")
        var tight = compound
        XCTAssertNil(tight.withUnsafeMutableBytes { sender.protectRTCP($0, length: compound.count) }, "no room for the trailer")
        XCTAssertEqual(receiver.statistics.authenticationFailures, 3)
        XCTAssertEqual(receiver.statistics.replays, 1)
        XCTAssertEqual(receiver.statistics.rtcpUnprotected, 1)
    }

    /// SRTCP allocates nothing per packet either (libsrtp allocates once per new SSRC, counted
    /// outside the window). Needs the allocation probe preloaded:
    ///
    ///     LD_PRELOAD=$PWD/.build/debug/libroomallocprobe.so \
    ///         .build/debug/roomdPackageTests.xctest RoomMediaCryptoTests.SRTCPTests
    ///
    /// Without it the test is skipped (there is nothing to count with).
    func testProtectAndUnprotectRTCPAllocateNothingWhenTheProbeIsLoaded() throws {
        typealias CountFunction = @convention(c) () -> UInt
        guard let symbol = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "roomallocprobe_thread_count") else {
            throw XCTSkip("libroomallocprobe.so not preloaded")
        }
        let count = unsafeBitCast(symbol, to: CountFunction.self)
        let probeBefore = count()
        withExtendedLifetime([Int](repeating: 1, count: 64)) {}
        XCTAssertGreaterThan(count(), probeBefore, "the probe sees allocations")

        let master = SRTPMasterKey.random()
        let sender = try SRTPSession(key: master, direction: .protect)
        let receiver = try SRTPSession(key: master, direction: .unprotect)
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 2048, alignment: 8)
        defer { buffer.deallocate() }
        var before: UInt = 0, failures = 0
        for i in 0 ..< 3000 {
            if i == 100 { before = count() }                 // streams set up by then
            buffer.copyBytes(from: compound)
            guard let n = sender.protectRTCP(buffer, length: compound.count),
                  case .rtcp = receiver.unprotectRTCP(buffer, length: n) else {
                failures += 1
                continue
            }
        }
        XCTAssertEqual(count() - before, 0, "heap allocations in 2900 SRTCP protect + unprotect pairs")
        XCTAssertEqual(failures, 0)
        XCTAssertEqual(receiver.statistics.rtcpUnprotected, 3000)
    }
}
