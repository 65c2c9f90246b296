import RoomMedia
import RoomMediaCrypto
import RoomProtocol
import RoomServerKit
import RoomSystem
import Synchronization
import XCTest

/// Media encryption on the server (docs/security.md, "Media (SRTP)"): each publisher's packets
/// are unprotected with its uplink key and re-protected for every listener with that listener's
/// downlink key; whatever does not verify is dropped and counted, and never forwarded.
final class RoomServerSRTPTests: XCTestCase {
    private var server: SocketAddress!

    private func harness(srtp: Bool = true, tick: Int64? = nil) throws -> ServerHarness {
        let h = try ServerHarness(srtp: srtp) { if let tick { $0.tickIntervalMs = tick } }
        server = .ipv4Loopback(port: h.mediaPort)
        return h
    }

    /// `needle` occurs somewhere in `haystack`.
    private func contains(_ haystack: [UInt8], _ needle: [UInt8]) -> Bool {
        guard needle.count <= haystack.count else { return false }
        return (0 ... haystack.count - needle.count).contains { Array(haystack[$0 ..< $0 + needle.count]) == needle }
    }

    func testEachListenerGetsItsOwnProtectedCopyWithTheHeaderReadable() throws {
        let h = try harness()
        let a = try h.join("alice", role: .streamer, publish: true)
        let b = try h.join("bob")
        let c = try h.join("carol")
        let keys = try [a, b, c].map { try XCTUnwrap($0.welcome?.mediaEncryption) }
        XCTAssertEqual(Set(keys.flatMap { [$0.uplink, $0.downlink] }).count, 6, "two fresh keys per participant")
        for l in [b, c] { l.wireDatagrams.removeAll(); l.datagrams.removeAll() }

        let plain = try a.sendRTP()
        XCTAssertTrue(h.run { b.datagrams.contains(plain) && c.datagrams.contains(plain) })
        let toB = try XCTUnwrap(b.wireDatagrams.last), toC = try XCTUnwrap(c.wireDatagrams.last)
        XCTAssertEqual(toB.count, plain.count + SRTPMasterKey.tagSize)
        XCTAssertNotEqual(toB, toC, "hop by hop: each listener's copy is protected with its own key")
        let payload: [UInt8] = [0xFC, 1, 2, 3, 4, 5, 6, 7]
        XCTAssertTrue(contains(plain, payload))
        XCTAssertFalse(contains(toB, payload) || contains(toC, payload), "no plaintext payload on the wire")
        // The header, audio level included, stays readable (SRTP authenticates it, encrypts only the payload).
        let header = try toB.withUnsafeBytes { try RTPPacket.parse($0) }
        XCTAssertEqual(header.ssrc, a.welcome!.ssrc)
        XCTAssertEqual(header.audioLevel?.level, 20)
        // Carol's key does not open Bob's copy.
        XCTAssertNil(c.unprotect(toB))
        XCTAssertEqual(h.server.statistics.dropped.total, 0)
    }

    /// A room larger than one send batch (64 datagrams): the copies go out in more than one
    /// sendmmsg, each listener's still protected with its own key in a slot of its own, none
    /// lost or overwritten before it was sent.
    func testARoomLargerThanOneSendBatchGetsEveryCopy() throws {
        let h = try ServerHarness(maxParticipants: 80)
        let a = try h.join("alice", role: .streamer, publish: true)
        let listeners = try (0 ..< 69).map { try h.join("listener\($0)") }
        for l in listeners { l.wireDatagrams.removeAll(); l.datagrams.removeAll() }
        let sentBefore = h.server.statistics.datagramsSent
        let plain = try a.sendRTP()
        XCTAssertTrue(h.run { listeners.allSatisfy { $0.datagrams.contains(plain) } })
        XCTAssertEqual(Set(listeners.compactMap(\.wireDatagrams.last)).count, 69, "every copy protected with its own key")
        XCTAssertEqual(h.server.statistics.datagramsSent - sentBefore, 69)
        XCTAssertEqual(h.server.statistics.sendFailures, 0)
        XCTAssertEqual(h.server.statistics.dropped.total, 0)
    }

    /// Issue 27: a listener's downlink key outlives the senders it hears, so an SSRC given to a
    /// newcomer after its first owner left would reuse that key's nonces and make the departed
    /// sender's recorded packets verify as the newcomer's. The room never hands it out again;
    /// another room may.
    func testTheSSRCOfAParticipantWhoLeftIsNeverGivenToAnotherInTheRoom() throws {
        let candidates = Mutex<[UInt32]>([0x1111, 0x1111, 0x1111, 0x2222, 0x1111])
        let h = try ServerHarness { options in
            options.ssrcCandidate = { candidates.withLock { $0.isEmpty ? UInt32.random(in: 3 ... UInt32.max) : $0.removeFirst() } }
        }
        let listener = try h.join("listener", bind: false)   // draws 0x1111
        XCTAssertEqual(listener.welcome?.ssrc, 0x1111)
        let leaving = listener.request(.leave)
        XCTAssertTrue(h.run { listener.closed })
        XCTAssertTrue(listener.gotOK(leaving))
        let next = try h.join("next", bind: false)            // 0x1111 retired here: draws again, 0x2222
        XCTAssertEqual(next.welcome?.ssrc, 0x2222)
        let elsewhere = try h.join("elsewhere", room: "other", bind: false)   // another room: 0x1111 is free
        XCTAssertEqual(elsewhere.welcome?.ssrc, 0x1111)
    }

    func testBadTagIsDroppedCountedAndNotForwarded() throws {
        let h = try harness()
        let a = try h.join("alice", role: .streamer, publish: true)
        let b = try h.join("bob")
        b.wireDatagrams.removeAll()
        var forged = a.protect(TestClient.rtp(ssrc: a.welcome!.ssrc, sequence: 100))
        forged[forged.count - 20] ^= 0x01   // one payload bit
        _ = try a.udp.send(forged, to: server)
        // Plain RTP to an encrypting server is no better than a forgery (this one's 8-byte
        // payload is shorter than a tag: malformed).
        let plainRTP = TestClient.rtp(ssrc: a.welcome!.ssrc, sequence: 101)
        _ = try a.udp.send(plainRTP + [UInt8](repeating: 0x55, count: 40), to: server)
        _ = try a.udp.send(plainRTP, to: server)
        // Bob's key is not Alice's.
        let wrongKey = try SRTPSession(key: b.welcome!.mediaEncryption!.uplink, direction: .protect)
        let other = TestClient.rtp(ssrc: a.welcome!.ssrc, sequence: 102)
        var buffer = other + [UInt8](repeating: 0, count: SRTPSession.trailerRoom)
        let n = try XCTUnwrap(buffer.withUnsafeMutableBytes { wrongKey.protect($0, length: other.count) })
        _ = try a.udp.send(Array(buffer[0 ..< n]), to: server)

        XCTAssertTrue(h.run {
            h.server.statistics.dropped.srtpAuthentication == 3 && h.server.statistics.dropped.malformedRTP == 1
        }, "\(h.server.statistics.dropped)")
        h.settle(seconds: 0.1)
        XCTAssertEqual(h.server.statistics.packetsForwarded, 0)
        XCTAssertTrue(b.datagrams.isEmpty && b.wireDatagrams.isEmpty, "nothing forged reaches a listener")
        // The genuine stream is unaffected.
        let plain = try a.sendRTP()
        XCTAssertTrue(h.run { b.datagrams == [plain] })
    }

    func testReplayedPacketIsDroppedAndCounted() throws {
        let h = try harness()
        let a = try h.join("alice", role: .streamer, publish: true)
        let b = try h.join("bob")
        b.wireDatagrams.removeAll()
        let wire = a.protect(TestClient.rtp(ssrc: a.welcome!.ssrc, sequence: 7))
        _ = try a.udp.send(wire, to: server)
        XCTAssertTrue(h.run { b.datagrams.count == 1 })
        for _ in 0 ..< 3 { _ = try a.udp.send(wire, to: server) }
        XCTAssertTrue(h.run { h.server.statistics.dropped.srtpReplay == 3 }, "\(h.server.statistics.dropped)")
        h.settle(seconds: 0.1)
        XCTAssertEqual(b.wireDatagrams.count, 1, "a replay is not forwarded")
        XCTAssertEqual(h.server.statistics.packetsForwarded, 1)
    }

    /// The level that picks the forwarded top-N is read after the tag verified: a forged
    /// packet announcing a loud speaker changes nothing.
    func testForgedLevelsDoNotMakeAnActiveSpeaker() throws {
        let h = try harness(tick: 50)
        let a = try h.join("alice", role: .streamer, publish: true)
        let b = try h.join("bob")
        for i in 0 ..< 20 {
            var forged = a.protect(TestClient.rtp(ssrc: a.welcome!.ssrc, sequence: UInt16(200 + i), level: 0))
            forged[forged.count - 1] ^= 0xFF
            _ = try a.udp.send(forged, to: server)
        }
        XCTAssertTrue(h.run { h.server.statistics.dropped.srtpAuthentication == 20 })
        h.settle(seconds: 0.2)
        XCTAssertFalse(b.has { if case let .activeSpeakers(s) = $0 { s.ids.contains(a.id) } else { false } })
        // Genuine packets with a level do (the level is readable to the server under SRTP).
        for _ in 0 ..< 5 { try a.sendRTP(level: 12) }
        XCTAssertTrue(h.run { b.has { if case let .activeSpeakers(s) = $0 { s.ids == [a.id] && s.levels == [12] } else { false } } })
    }

    /// A publisher that comes back on a new connection (roomd restarted within the grace)
    /// numbers its packets from the start again; its listeners' SRTP streams for that SSRC
    /// would refuse them as replays, so the server continues the forwarded numbering.
    func testSequenceContinuesForListenersWhenAPublisherResumes() throws {
        let h = try harness()
        let a = try h.join("alice", role: .streamer, publish: true)
        let b = try h.join("bob")
        b.datagrams.removeAll()
        for _ in 0 ..< 3 { try a.sendRTP() }
        XCTAssertTrue(h.run { b.datagrams.count == 3 })
        let id = a.id
        a.connection.close()
        XCTAssertTrue(h.run { h.server.connectionCount == 1 })
        let back = try h.connect()
        back.send(.hello(.init(client: "test/1", token: h.token(user: "alice", publish: true), role: .streamer,
                               previousParticipantID: id)))
        XCTAssertTrue(h.run { back.welcome != nil })
        XCTAssertEqual(back.welcome?.participantID, id)
        XCTAssertNotEqual(back.welcome?.mediaEncryption, a.welcome?.mediaEncryption, "a resumed seat gets fresh SRTP keys")
        try h.bind(back)
        // The old connection's key is dead: its packets are forgeries now.
        _ = try a.udp.send(a.protect(TestClient.rtp(ssrc: a.welcome!.ssrc, sequence: 50)), to: server)
        for _ in 0 ..< 3 { try back.sendRTP() }   // sequence 1, 2, 3 again
        XCTAssertTrue(h.run { b.datagrams.count == 6 }, "refused: \(b.refusedSRTP)")
        let sequences = b.datagrams.map { UInt16($0[2]) << 8 | UInt16($0[3]) }
        XCTAssertEqual(sequences, [1, 2, 3, 4, 5, 6])
        XCTAssertEqual(b.refusedSRTP, [])
        XCTAssertTrue(h.run { h.server.statistics.dropped.unknownAddress + h.server.statistics.dropped.srtpAuthentication == 1 })
    }

    func testPlainModeSendsNoKeysAndForwardsRTPAsIs() throws {
        let h = try harness(srtp: false)
        let a = try h.join("alice", role: .streamer, publish: true)
        let b = try h.join("bob")
        XCTAssertNil(a.welcome?.mediaEncryption)
        b.wireDatagrams.removeAll()
        let plain = try a.sendRTP()
        XCTAssertTrue(h.run { b.wireDatagrams == [plain] })
    }

    // MARK: - Binding datagrams

    /// Issue 11: one binding with a huge timestamp moved a participant's media and locked its
    /// own re-binds out. Without the key it is a forgery; with the key (a leaked one) it is
    /// beyond the lead limit. Either way it is dropped and counted, the media stays where it
    /// was, and the participant's next genuine binding is accepted.
    func testFarFutureBindingNeitherMovesMediaNorLocksTheVictimOut() throws {
        let h = try harness()
        let a = try h.join("alice", role: .streamer, publish: true)
        let victim = try h.join("bob")
        let attacker = try UDPSocket(bindingTo: .ipv4Loopback(port: 0))
        let accepted = h.server.statistics.bindingsAccepted

        _ = try attacker.send(BindingDatagram(participantID: victim.id, timestampMs: .max).encoded(key: .random()), to: server)
        _ = try attacker.send(BindingDatagram(participantID: victim.id, timestampMs: .max).encoded(key: victim.welcome!.mediaKey), to: server)
        _ = try attacker.send(BindingDatagram(participantID: victim.id, timestampMs: victim.bindingClock + 3_600_000)
            .encoded(key: victim.welcome!.mediaKey), to: server)
        XCTAssertTrue(h.run {
            h.server.statistics.dropped.badBinding == 1 && h.server.statistics.dropped.bindingReplay == 2
        }, "\(h.server.statistics.dropped)")
        XCTAssertEqual(h.server.statistics.bindingsAccepted, accepted)

        // The victim still hears the room at its own address, and its next binding is taken.
        victim.datagrams.removeAll()
        let plain = try a.sendRTP()
        XCTAssertTrue(h.run { victim.datagrams.contains(plain) })
        try victim.sendBinding()
        XCTAssertTrue(h.run { h.server.statistics.bindingsAccepted == accepted + 1 })
        var buffer = [UInt8](repeating: 0, count: 2048)
        h.settle(seconds: 0.05)
        XCTAssertNil(try buffer.withUnsafeMutableBytes { try attacker.receive(into: $0) }, "the attacker got nothing")
    }

    /// Issue 27: a participant holds its own media key, so its binding is valid wherever it
    /// comes from. One binding with a spoofed source (the victim's address) moved its media
    /// there: 2899 datagrams, 536 kB in 15 s, for one 60-byte datagram. Now the media moves only
    /// to an address that echoes its cookie, which only that address received: the victim gets
    /// one challenge no larger than the binding, and the room's media stays where it was.
    /// Bindings beyond the budget of their source or participant are dropped unanswered.
    func testABindingFromAnAddressThatDoesNotReceiveThereMovesNothing() throws {
        let h = try harness()
        let a = try h.join("alice", role: .streamer, publish: true)
        let attacker = try h.join("mallory")
        let victim = try UDPSocket(bindingTo: .ipv4Loopback(port: 0))
        // What the spoofed datagram would be: Mallory's valid binding, sent "from" the victim.
        attacker.bindingClock += 1
        let forged = BindingDatagram(participantID: attacker.id, timestampMs: attacker.bindingClock, cookie: attacker.cookie)
            .encoded(key: attacker.welcome!.mediaKey)
        _ = try victim.send(forged, to: server)
        XCTAssertTrue(h.run { h.server.statistics.bindingChallenges == 3 }, "\(h.server.statistics)")  // 2 joins + this
        attacker.datagrams.removeAll()
        for _ in 0 ..< 20 { try a.sendRTP() }
        XCTAssertTrue(h.run { attacker.datagrams.count == 20 }, "the media stays at Mallory's own address")
        h.settle(seconds: 0.05)
        var buffer = [UInt8](repeating: 0, count: 2048)
        var toVictim: [Int] = []
        while let d = try buffer.withUnsafeMutableBytes({ try victim.receive(into: $0) }) { toVictim.append(d.count) }
        XCTAssertEqual(toVictim, [BindingDatagram.sizeWithCookie], "one challenge, as large as the binding, and no media")
        XCTAssertLessThanOrEqual(BindingDatagram.sizeWithCookie, forged.count)

        // A burst of bindings from one address: the budget (40 at once) is answered, the rest dropped unanswered.
        let flooder = try UDPSocket(bindingTo: .ipv4Loopback(port: 0))
        let limitedBefore = h.server.statistics.dropped.bindingRateLimited
        for _ in 0 ..< 200 {
            attacker.bindingClock += 1
            _ = try flooder.send(BindingDatagram(participantID: attacker.id, timestampMs: attacker.bindingClock)
                .encoded(key: attacker.welcome!.mediaKey), to: server)
        }
        XCTAssertTrue(h.run { h.server.statistics.dropped.bindingRateLimited - limitedBefore >= 150 }, "\(h.server.statistics.dropped)")
        h.settle(seconds: 0.05)
        var answers = 0
        while try buffer.withUnsafeMutableBytes({ try flooder.receive(into: $0) }) != nil { answers += 1 }
        XCTAssertLessThanOrEqual(answers, 40, "answered within the budget only")
        XCTAssertGreaterThan(answers, 0)
    }

    func testReplayedAndStaleBindingsFromElsewhereAreDroppedAndCounted() throws {
        let h = try harness()
        let a = try h.join("alice", role: .streamer, publish: true)
        let victim = try h.join("bob")
        // Captured off the wire: the victim's last binding, and an older one.
        let last = BindingDatagram(participantID: victim.id, timestampMs: victim.bindingClock).encoded(key: victim.welcome!.mediaKey)
        let stale = BindingDatagram(participantID: victim.id, timestampMs: victim.bindingClock - 500).encoded(key: victim.welcome!.mediaKey)
        let attacker = try UDPSocket(bindingTo: .ipv4Loopback(port: 0))
        _ = try attacker.send(last, to: server)
        _ = try attacker.send(stale, to: server)
        XCTAssertTrue(h.run { h.server.statistics.dropped.bindingReplay == 2 }, "\(h.server.statistics.dropped)")
        victim.datagrams.removeAll()
        let plain = try a.sendRTP()
        XCTAssertTrue(h.run { victim.datagrams.contains(plain) }, "media stays at the victim's address")
        var buffer = [UInt8](repeating: 0, count: 2048)
        XCTAssertNil(try buffer.withUnsafeMutableBytes { try attacker.receive(into: $0) })
    }
}
