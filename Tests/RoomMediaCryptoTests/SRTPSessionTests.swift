import Glibc
import RoomMedia
import RoomMediaCrypto
import RoomProtocol
import XCTest

final class SRTPSessionTests: XCTestCase {
    // MARK: The reference against the RFCs' own vectors

    /// RFC 3711 appendix B.3: the AES-CM key derivation.
    func testReferenceKeyDerivationMatchesRFC3711() {
        let key = hex("E1F97A0D3E018BE0D64FA32C06DE4139"), salt = hex("0EC675AD498AFEEBB6960B3AABE6")
        XCTAssertEqual(ReferenceSRTP.derive(masterKey: key, masterSalt: salt, label: ReferenceSRTP.labelEncryption, length: 16),
                       hex("C61E7A93744F39EE10734AFE3FF7A087"))
        XCTAssertEqual(ReferenceSRTP.derive(masterKey: key, masterSalt: salt, label: ReferenceSRTP.labelAuthentication, length: 16),
                       hex("CEBE321F6FF7716B6FD4AB49AF256A15"))
    }

    /// RFC 7714 §16.1: AEAD_AES_128_GCM with the session key and salt given.
    func testReferencePacketTransformMatchesRFC7714() {
        let keys = ReferenceSRTP.SessionKeys(key: hex("000102030405060708090a0b0c0d0e0f"), salt: hex("517569642070726f2071756f"))
        let rtp = hex("8040f17b 8041f8d3 5501a0b2 47616c6c 69612065 7374206f 6d6e6973 20646976 69736120 696e2070 61727465 73207472 6573")
        let srtp = hex("""
            8040f17b 8041f8d3 5501a0b2 f24de3a3 fb34de6c acba861c 9d7e4bca be633bd5 0d294e6f 42a5f47a 51c7d19b 36de3adf 8833
            899d7f27 beb16a91 52cf765e e4390cce
            """)
        XCTAssertEqual(ReferenceSRTP.iv(salt: keys.salt, ssrc: 0x5501_a0b2, roc: 0, sequence: 0xf17b), hex("51753c6580c2726f20718414"))
        XCTAssertEqual(ReferenceSRTP.encrypt(rtp, keys: keys), srtp)
        XCTAssertEqual(ReferenceSRTP.decrypt(srtp, keys: keys), rtp)
        var forged = srtp
        forged[20] ^= 1
        XCTAssertNil(ReferenceSRTP.decrypt(forged, keys: keys))
    }

    // MARK: roomd's wrapper against the reference

    private func rtp(sequence: UInt16, ssrc: UInt32 = 0x1234_5678, payload: [UInt8] = Array("opus frame, not for the wire".utf8)) -> [UInt8] {
        let header = RTPPacket(sequenceNumber: sequence, timestamp: UInt32(sequence) * 480, ssrc: ssrc,
                               audioLevel: RTPAudioLevel(voiceActivity: true, level: 33))
        var out = [UInt8](repeating: 0, count: 512)
        let n = payload.withUnsafeBytes { p in out.withUnsafeMutableBytes { try! header.serialize(payload: p, into: $0) } }
        return Array(out[0 ..< n])
    }

    private func protect(_ session: SRTPSession, _ packet: [UInt8]) -> [UInt8]? {
        var buffer = packet + [UInt8](repeating: 0, count: SRTPSession.trailerRoom)
        guard let n = buffer.withUnsafeMutableBytes({ session.protect($0, length: packet.count) }) else { return nil }
        return Array(buffer[0 ..< n])
    }

    private func unprotect(_ session: SRTPSession, _ packet: [UInt8]) -> (SRTPSession.Outcome, [UInt8]) {
        var buffer = packet
        let outcome = buffer.withUnsafeMutableBytes { session.unprotect($0, length: packet.count) }
        if case let .rtp(n) = outcome { return (outcome, Array(buffer[0 ..< n])) }
        return (outcome, [])
    }

    func testWrapperOutputIsStandardSRTPBothWays() throws {
        let master = SRTPMasterKey.random()
        let sender = try SRTPSession(key: master, direction: .protect)
        let receiver = try SRTPSession(key: master, direction: .unprotect)
        let reference = ReferenceSRTP.sessionKeys(master: master.bytes)
        for sequence: UInt16 in [65_530, 65_531] {
            let plain = rtp(sequence: sequence)
            let wire = try XCTUnwrap(protect(sender, plain))
            XCTAssertEqual(wire.count, plain.count + SRTPSession.overhead)
            XCTAssertEqual(Array(wire[0 ..< 20]), Array(plain[0 ..< 20]), "header and level extension stay readable")
            XCTAssertNotEqual(Array(wire[20 ..< plain.count]), Array(plain[20...]), "payload encrypted")
            XCTAssertEqual(ReferenceSRTP.decrypt(wire, keys: reference), plain, "OpenSSL reads what libsrtp wrote")
            // And the other way: what the reference writes, the wrapper reads.
            let theirs = ReferenceSRTP.encrypt(rtp(sequence: sequence &+ 100), keys: reference)
            let (outcome, decrypted) = unprotect(receiver, theirs)
            XCTAssertEqual(outcome, .rtp(length: theirs.count - 16))
            XCTAssertEqual(decrypted, rtp(sequence: sequence &+ 100))
        }
        XCTAssertEqual(sender.statistics.protected, 2)
        XCTAssertEqual(receiver.statistics.unprotected, 2)
    }

    func testBadTagsReplaysAndShortPacketsAreRefusedAndCounted() throws {
        let master = SRTPMasterKey.random()
        let sender = try SRTPSession(key: master, direction: .protect)
        let receiver = try SRTPSession(key: master, direction: .unprotect)
        let first = try XCTUnwrap(protect(sender, rtp(sequence: 10)))
        XCTAssertEqual(unprotect(receiver, first).0, .rtp(length: first.count - 16))

        var tampered = try XCTUnwrap(protect(sender, rtp(sequence: 11)))
        tampered[tampered.count - 1] ^= 0x80                          // tag
        XCTAssertEqual(unprotect(receiver, tampered).0, .authenticationFailure)
        var header = try XCTUnwrap(protect(sender, rtp(sequence: 12)))
        header[17] ^= 0x7F                                           // the audio level: authenticated too
        XCTAssertEqual(unprotect(receiver, header).0, .authenticationFailure)
        let otherKey = try SRTPSession(key: .random(), direction: .protect)
        XCTAssertEqual(unprotect(receiver, try XCTUnwrap(protect(otherKey, rtp(sequence: 13)))).0, .authenticationFailure)

        XCTAssertEqual(unprotect(receiver, first).0, .replay)
        XCTAssertEqual(unprotect(receiver, first).0, .replay)
        XCTAssertEqual(unprotect(receiver, Array(first[0 ..< 20])).0, .malformed)

        XCTAssertEqual(receiver.statistics.authenticationFailures, 3)
        XCTAssertEqual(receiver.statistics.replays, 2)
        XCTAssertEqual(receiver.statistics.otherFailures, 1)
        XCTAssertEqual(receiver.statistics.unprotected, 1)
        // A packet the tamperer spoiled can still come genuinely (its index was not taken).
        let genuine = try XCTUnwrap(protect(try SRTPSession(key: master, direction: .protect), rtp(sequence: 11)))
        XCTAssertEqual(unprotect(receiver, genuine).0, .rtp(length: genuine.count - 16))
    }

    func testMisuseIsRefusedNotTrapped() throws {
        let master = SRTPMasterKey.random()
        let sender = try SRTPSession(key: master, direction: .protect)
        let receiver = try SRTPSession(key: master, direction: .unprotect)
        let plain = rtp(sequence: 1)
        var tight = plain
        XCTAssertNil(tight.withUnsafeMutableBytes { sender.protect($0, length: plain.count) }, "no room for the tag")
        XCTAssertNil(protect(sender, Array(plain[0 ..< 8])), "shorter than an RTP header")
        XCTAssertNil(protect(receiver, plain), "a receiving session does not protect")
        XCTAssertEqual(sender.statistics.otherFailures, 2)
        XCTAssertEqual(receiver.statistics.otherFailures, 1)
    }

    /// `forget(ssrc:)`: a sender whose numbering restarted is accepted again from scratch.
    func testForgettingAStreamAcceptsARestartedSequence() throws {
        let master = SRTPMasterKey.random()
        let receiver = try SRTPSession(key: master, direction: .unprotect)
        let before = try SRTPSession(key: master, direction: .protect)
        for s: UInt16 in 5000 ..< 5010 { _ = unprotect(receiver, try XCTUnwrap(protect(before, rtp(sequence: s)))) }
        let restarted = try XCTUnwrap(protect(try SRTPSession(key: master, direction: .protect), rtp(sequence: 1)))
        XCTAssertEqual(unprotect(receiver, restarted).0, .replay)
        receiver.forget(ssrc: 0x1234_5678)
        XCTAssertEqual(unprotect(receiver, restarted).0, .rtp(length: restarted.count - 16))
    }

    /// libsrtp accepted the OpenSSL AES-GCM (it runs its own and RFC 7714's known-answer tests
    /// on it first); without it every packet allocates inside NSS (`scripts/bench srtp`).
    func testTheAllocationFreeOpenSSLCipherIsInUse() throws {
        try SRTPLibrary.ready()
        XCTAssertEqual(SRTPLibrary.gcmBackend, "openssl")
    }

    /// The media path allocates nothing per packet, SRTP included (libsrtp allocates once per
    /// new SSRC, counted outside the window). Needs the allocation probe preloaded:
    ///
    ///     LD_PRELOAD=$PWD/.build/debug/libroomallocprobe.so \
    ///         .build/debug/roomdPackageTests.xctest RoomMediaCryptoTests.SRTPSessionTests
    ///
    /// Without it the test is skipped (there is nothing to count with).
    func testProtectAndUnprotectAllocateNothingWhenTheProbeIsLoaded() throws {
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
        let plain = rtp(sequence: 0)
        var before: UInt = 0, failures = 0
        for i in 0 ..< 3000 {
            if i == 100 { before = count() }                 // streams set up by then
            buffer.copyBytes(from: plain)
            buffer[2] = UInt8(truncatingIfNeeded: i >> 8)
            buffer[3] = UInt8(truncatingIfNeeded: i)
            guard let n = sender.protect(buffer, length: plain.count), case .rtp = receiver.unprotect(buffer, length: n) else {
                failures += 1
                continue
            }
        }
        XCTAssertEqual(count() - before, 0, "heap allocations in 2900 protect + unprotect pairs")
        XCTAssertEqual(failures, 0)
        XCTAssertEqual(receiver.statistics.unprotected, 3000)
    }

    func testKeysAreRedactedAndParsedStrictly() {
        let key = SRTPMasterKey.random()
        XCTAssertEqual("\(key)", "SRTPMasterKey(<redacted>)")
        XCTAssertEqual(SRTPMasterKey(base64: key.base64), key)
        XCTAssertNil(SRTPMasterKey(base64: MediaKey.random().base64), "16 bytes is not key and salt")
        XCTAssertNil(SRTPMasterKey(bytes: [UInt8](repeating: 1, count: 27)))
    }
}
