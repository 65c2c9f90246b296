import RoomBase
import RoomClient
import RoomMedia
import RoomMediaCrypto
import RoomModel
import RoomProtocol
import RoomSystem
import XCTest

/// The client's half of media encryption: what it sends is SRTP under its uplink key, what it
/// receives must verify under its downlink key, and plain RTP is refused when required.
final class RoomSessionSRTPTests: XCTestCase {
    var loop: EventLoop!
    let outgoing = SPSCRing<MediaPacket>(capacity: 64)
    let incoming = SPSCRing<MediaPacket>(capacity: 64)

    override func setUpWithError() throws { loop = try EventLoop() }

    func configuration(_ server: FakeRoomServer, role: RoomRole, requireEncryption: Bool) -> RoomSessionConfiguration {
        var c = RoomSessionConfiguration(
            servers: [server.address], token: "test-token", role: role, clientName: "roomd/test",
            backoff: RoomBackoff(initial: .milliseconds(30), multiplier: 2, maximum: .milliseconds(120), jitter: 0),
            bindingInterval: .milliseconds(200), bindingRetryInterval: .milliseconds(100))
        c.requireMediaEncryption = requireEncryption
        return c
    }

    private func protect(_ session: SRTPSession, _ packet: [UInt8]) -> [UInt8] {
        var buffer = packet + [UInt8](repeating: 0, count: SRTPSession.trailerRoom)
        let n = buffer.withUnsafeMutableBytes { session.protect($0, length: packet.count) }!
        return Array(buffer[0 ..< n])
    }

    func testSendsSRTPAndDropsAndCountsForgedAndReplayedPackets() throws {
        let server = try FakeRoomServer(loop: loop)
        let keys = MediaEncryption.random()
        server.mediaEncryption = keys
        let session = try RoomSession(loop: loop, configuration: configuration(server, role: .streamer, requireEncryption: true),
                                      outgoing: outgoing, incoming: incoming)
        session.start()
        XCTAssertTrue(try runLoop(loop) { session.connectionState == .connected && session.isMediaPathUp && session.isSendingMedia })

        // Uplink: the server side unprotects with the uplink key.
        _ = outgoing.push(makePacket(sequence: 1, timestamp: 480, payload: Array("plain opus".utf8)))
        session.drainOutgoingMedia()
        XCTAssertTrue(try runLoop(loop) { server.datagrams.contains { $0.bytes.first.map { $0 & 0xC0 == 0x80 } ?? false } })
        var wire = try XCTUnwrap(server.datagrams.last { ($0.bytes.first ?? 0) & 0xC0 == 0x80 }?.bytes)
        XCTAssertTrue(server.rtp.isEmpty || server.rtp.allSatisfy { $0.withPayload { Array($0) } != Array("plain opus".utf8) },
                      "what the server got does not read as plain RTP")
        let serverUplink = try SRTPSession(key: keys.uplink, direction: .unprotect)
        let count = wire.count
        guard case let .rtp(n) = wire.withUnsafeMutableBytes({ serverUplink.unprotect($0, length: count) }) else {
            return XCTFail("the uplink did not verify with the uplink key")
        }
        let sent = try wire[0 ..< n].withUnsafeBytes { try MediaPacket(rtp: $0, arrivalSamples: 0) }
        sent.withPayload { XCTAssertEqual(Array($0), Array("plain opus".utf8)) }

        // Downlink: genuine, replayed, forged, plain, and protected with the wrong key.
        let serverDownlink = try SRTPSession(key: keys.downlink, direction: .protect)
        var remote = makePacket(sequence: 500, timestamp: 48000, payload: [1, 2, 3, 4, 5])
        remote.ssrc = 0x3333
        let genuine = protect(serverDownlink, rtpBytes(remote))
        server.sendDatagram(genuine)
        XCTAssertTrue(try runLoop(loop) { session.statistics.packetsReceived == 1 })
        server.sendDatagram(genuine)
        remote.sequenceNumber = 501
        var forged = protect(serverDownlink, rtpBytes(remote))
        forged[forged.count - 3] ^= 0x10
        server.sendDatagram(forged)
        remote.sequenceNumber = 502
        server.sendDatagram(rtpBytes(remote) + [UInt8](repeating: 0, count: 16))
        let wrongKey = try SRTPSession(key: keys.uplink, direction: .protect)
        server.sendDatagram(protect(wrongKey, rtpBytes(remote)))
        XCTAssertTrue(try runLoop(loop) {
            session.statistics.srtpReplays == 1 && session.statistics.srtpAuthenticationFailures == 3
        }, "\(session.statistics)")
        XCTAssertEqual(session.statistics.packetsReceived, 1, "nothing refused reaches the jitter buffer")
        XCTAssertEqual(incoming.availableToRead, 1)
        let heard = try XCTUnwrap(incoming.pop())
        XCTAssertEqual(heard.sequenceNumber, 500)
        heard.withPayload { XCTAssertEqual(Array($0), [1, 2, 3, 4, 5]) }
    }

    /// Issue 27: a departed sender's packets, recorded on the way to this listener and replayed
    /// from the server's address, played again: forgetting the SSRC's SRTP stream forgot its
    /// replay window, and the key had not changed. Now a departed SSRC is refused outright, also
    /// when its sender was demoted (its SSRC no longer shown) before it left.
    func testPacketsOfADepartedSenderAreRefusedAsReplays() throws {
        let server = try FakeRoomServer(loop: loop)
        let keys = MediaEncryption.random()
        server.mediaEncryption = keys
        let bob = ParticipantInfo(id: 9, userID: "bob", name: "Bob", role: .streamer, stage: .onStage, muted: false,
                                  moderator: false, ssrc: 0x9999)
        server.others.append(bob)
        let session = try RoomSession(loop: loop, configuration: configuration(server, role: .audience, requireEncryption: true),
                                      outgoing: outgoing, incoming: incoming)
        session.start()
        XCTAssertTrue(try runLoop(loop) { session.connectionState == .connected && session.isMediaPathUp })
        let serverDownlink = try SRTPSession(key: keys.downlink, direction: .protect)
        func recorded(_ ssrc: UInt32, _ sequence: UInt16) -> [UInt8] {
            var p = makePacket(sequence: sequence, timestamp: UInt32(sequence) * 960, payload: [7, 7, 7])
            p.ssrc = ssrc
            return protect(serverDownlink, rtpBytes(p))
        }
        let alice = (0 ..< 3).map { recorded(0x3333, 100 + UInt16($0)) }
        let bobs = (0 ..< 3).map { recorded(0x9999, 200 + UInt16($0)) }
        for d in alice + bobs { server.sendDatagram(d) }
        XCTAssertTrue(try runLoop(loop) { session.statistics.packetsReceived == 6 }, "\(session.statistics)")
        while incoming.pop() != nil {}

        // Alice leaves while on stage; Bob is demoted (his SSRC no longer shown), then leaves.
        server.send(.participantLeft(participantID: 3, reason: .left))
        var demoted = bob
        demoted.role = .audience
        demoted.stage = .off
        demoted.ssrc = nil
        server.send(.participantUpdated(demoted))
        server.send(.participantLeft(participantID: 9, reason: .left))
        XCTAssertTrue(try runLoop(loop) { session.participants[3] == nil && session.participants[9] == nil })
        let replaysBefore = session.statistics.srtpReplays
        for d in alice + bobs { server.sendDatagram(d) }
        // And packets the departed SSRCs never sent before (fresh sequence numbers) do not play either.
        server.sendDatagram(recorded(0x3333, 300))
        server.sendDatagram(recorded(0x9999, 300))
        // Someone still in the room is heard.
        server.sendDatagram(recorded(0x4444, 1))
        XCTAssertTrue(try runLoop(loop) { session.statistics.packetsReceived == 7 }, "\(session.statistics)")
        try runLoop(loop, for: 0.1)
        XCTAssertEqual(session.statistics.srtpReplays - replaysBefore, 8, "\(session.statistics)")
        XCTAssertEqual(session.statistics.packetsReceived, 7, "nothing of the departed reaches the jitter buffer")
        XCTAssertEqual(incoming.pop()?.ssrc, 0x4444)
        XCTAssertNil(incoming.pop())
    }

    func testPlainRTPServerGetsNoMediaWhenEncryptionIsRequired() throws {
        let server = try FakeRoomServer(loop: loop)   // no SRTP keys in its welcome
        let session = try RoomSession(loop: loop, configuration: configuration(server, role: .streamer, requireEncryption: true),
                                      outgoing: outgoing, incoming: incoming)
        session.start()
        XCTAssertTrue(try runLoop(loop) { session.connectionState == .connected })
        try runLoop(loop, for: 0.3)
        XCTAssertFalse(session.isMediaPathUp)
        XCTAssertTrue(server.datagrams.isEmpty, "not even a binding datagram: no media with a plain-RTP server")
        _ = outgoing.push(makePacket(sequence: 1, timestamp: 480))
        session.drainOutgoingMedia()
        try runLoop(loop, for: 0.1)
        XCTAssertTrue(server.datagrams.isEmpty)
        XCTAssertEqual(session.statistics.packetsSent, 0)
    }

    func testPlainRTPIsAcceptedWhenAllowed() throws {
        let server = try FakeRoomServer(loop: loop)
        let session = try RoomSession(loop: loop, configuration: configuration(server, role: .streamer, requireEncryption: false),
                                      outgoing: outgoing, incoming: incoming)
        session.start()
        XCTAssertTrue(try runLoop(loop) { session.isMediaPathUp && session.isSendingMedia })
        _ = outgoing.push(makePacket(sequence: 1, timestamp: 480, payload: [9, 9, 9]))
        session.drainOutgoingMedia()
        XCTAssertTrue(try runLoop(loop) { server.rtp.count == 1 })
        server.rtp[0].withPayload { XCTAssertEqual(Array($0), [9, 9, 9]) }
    }
}
