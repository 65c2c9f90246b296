import RoomBase
import RoomClient
import RoomMedia
import RoomModel
import RoomProtocol
import RoomSystem
import XCTest

final class RoomSessionTests: XCTestCase {
    var loop: EventLoop!
    var outgoing: SPSCRing<MediaPacket>!
    var incoming: SPSCRing<MediaPacket>!
    var events: [RoomSessionEvent] = []

    override func setUpWithError() throws {
        loop = try EventLoop()
        outgoing = SPSCRing(capacity: 64)
        incoming = SPSCRing(capacity: 64)
        events = []
    }

    /// Fast timings so the tests run in well under a second each.
    func configuration(_ servers: [SocketAddress], role: RoomRole = .audience) -> RoomSessionConfiguration {
        RoomSessionConfiguration(
            servers: servers, token: "test-token", role: role, clientName: "roomd/test",
            backoff: RoomBackoff(initial: .milliseconds(30), multiplier: 2, maximum: .milliseconds(120), jitter: 0),
            failureThreshold: 3, failureTimeout: .seconds(30), handshakeTimeout: .milliseconds(500),
            pingInterval: .milliseconds(100), silenceTimeout: .milliseconds(400),
            bindingInterval: .milliseconds(200), bindingRetryInterval: .milliseconds(100),
            mediaSilenceTimeout: .milliseconds(400))
    }

    func makeSession(_ config: RoomSessionConfiguration) throws -> RoomSession {
        let session = try RoomSession(loop: loop, configuration: config, outgoing: outgoing, incoming: incoming)
        session.onEvent = { [unowned self] in self.events.append($0) }
        return session
    }

    var states: [RoomConnectionState] {
        events.compactMap { if case .stateChanged(let s) = $0 { s } else { nil } }
    }

    func joinedSession(_ server: FakeRoomServer, role: RoomRole = .audience) throws -> RoomSession {
        let session = try makeSession(configuration([server.address], role: role))
        session.start()
        XCTAssertTrue(try runLoop(loop) { session.connectionState == .connected && session.isMediaPathUp })
        return session
    }

    // MARK: Handshake and state sync

    func testHandshakeAndStateSync() throws {
        let server = try FakeRoomServer(loop: loop)
        let session = try makeSession(configuration([server.address]))
        XCTAssertEqual(session.connectionState, .idle)
        session.start()
        XCTAssertEqual(session.connectionState, .connecting)
        XCTAssertTrue(try runLoop(loop) { session.connectionState == .connected })

        let hello = try XCTUnwrap(server.hellos.first)
        XCTAssertEqual(hello.protocolVersion, roomProtocolVersion)
        XCTAssertEqual(hello.client, "roomd/test")
        XCTAssertEqual(hello.token, "test-token")
        XCTAssertEqual(hello.role, .audience)
        XCTAssertNil(hello.previousParticipantID)

        let info = try XCTUnwrap(session.joinInfo)
        XCTAssertEqual(info.participantID, 7)
        XCTAssertEqual(info.ssrc, 0x1007)
        XCTAssertEqual(info.room, "lobby")
        XCTAssertFalse(info.isRejoin)
        XCTAssertEqual(Set(session.participants.keys), [3, 7])
        XCTAssertEqual(session.attributes, ["topic": "standup"])
        XCTAssertEqual(session.localParticipant?.stage, .off)
        XCTAssertEqual(states, [.connecting, .connected])
        XCTAssertTrue(events.contains(.joined(info)))
        XCTAssertTrue(events.contains(.localStageChanged(.off)))

        // Events keep the model in sync.
        let bob = ParticipantInfo(id: 9, userID: "bob", name: "Bob", role: .audience, stage: .off, muted: false,
                                  moderator: false)
        server.send(.participantJoined(bob))
        server.send(.attributeChanged(key: "topic", value: nil))
        server.send(.attributeChanged(key: "slides", value: "3"))
        server.send(.appMessage(.init(from: 3, to: nil, data: "hi")))
        server.send(.activeSpeakers(.init(ids: [3], levels: [20])))
        server.send(.tokenWillExpire(expiresAt: 1234))
        server.send(.participantLeft(participantID: 3, reason: .left))
        XCTAssertTrue(try runLoop(loop) { session.participants[3] == nil })
        XCTAssertEqual(Set(session.participants.keys), [7, 9])
        XCTAssertEqual(session.attributes, ["slides": "3"])
        XCTAssertTrue(events.contains(.participantJoined(bob)))
        XCTAssertTrue(events.contains(.appMessage(from: 3, to: nil, data: "hi")))
        XCTAssertTrue(events.contains(.activeSpeakers(ids: [3], levels: [20])))
        XCTAssertTrue(events.contains(.tokenWillExpire(expiresAt: 1234)))
        XCTAssertTrue(events.contains { if case .participantLeft(3, .left, let p?) = $0 { p.name == "Alice" } else { false } })
    }

    // MARK: Failover, reconnect, back-off, failed

    func testFailoverToSecondAddressWhenFirstRefuses() throws {
        let dead = try deadAddress(loop)
        let server = try FakeRoomServer(loop: loop)
        let session = try makeSession(configuration([dead, server.address]))
        session.start()
        XCTAssertTrue(try runLoop(loop) { session.connectionState == .connected })
        XCTAssertEqual(session.statistics.connectAttempts, 2)
        XCTAssertEqual(server.hellos.count, 1)
        XCTAssertFalse(states.contains { if case .failed = $0 { true } else { false } })
    }

    func testReconnectAfterServerDropsConnectionSendsPreviousParticipantID() throws {
        let server = try FakeRoomServer(loop: loop)
        let session = try joinedSession(server)
        session.raiseHand()
        XCTAssertTrue(try runLoop(loop) { session.localParticipant?.stage == .onStage })

        server.dropConnections()
        XCTAssertTrue(try runLoop(loop) { session.connectionState == .reconnecting })
        XCTAssertTrue(try runLoop(loop) { session.connectionState == .connected })
        XCTAssertEqual(server.hellos.count, 2)
        XCTAssertEqual(server.hellos[1].previousParticipantID, 7)
        XCTAssertEqual(server.hellos[1].role, .streamer, "asks for the role it held")
        XCTAssertEqual(session.statistics.reconnects, 1)
        let info = try XCTUnwrap(session.joinInfo)
        XCTAssertTrue(info.restored)
        XCTAssertTrue(info.isRejoin)
        XCTAssertEqual(states, [.connecting, .connected, .reconnecting, .connected])
    }

    func testReconnectAfterServerRestartOnSamePort() throws {
        var server = try FakeRoomServer(loop: loop)
        let port = server.address.port!
        let session = try joinedSession(server)
        server.shutDown()
        XCTAssertTrue(try runLoop(loop) { session.connectionState == .reconnecting })
        try runLoop(loop, for: 0.2)  // a few refused attempts
        server = try FakeRoomServer(loop: loop, port: port)
        server.remembers = false
        server.nextParticipantID = 20
        XCTAssertTrue(try runLoop(loop) { session.connectionState == .connected })
        XCTAssertEqual(server.hellos.first?.previousParticipantID, 7)
        XCTAssertEqual(session.joinInfo?.participantID, 20)
        XCTAssertEqual(session.joinInfo?.restored, false)
        XCTAssertTrue(try runLoop(loop) { session.isMediaPathUp }, "media path rebuilt on the new server")
    }

    func testBackoffIsExponentialBoundedAndJittered() {
        let b = RoomBackoff()  // 0.5 s, ×2, 10 s
        XCTAssertEqual(b.delay(afterFailures: 0, random: 0), .milliseconds(500))
        XCTAssertEqual(b.delay(afterFailures: 1, random: 0), .seconds(1))
        XCTAssertEqual(b.delay(afterFailures: 3, random: 0), .seconds(4))
        XCTAssertEqual(b.delay(afterFailures: 5, random: 0), .seconds(10))
        XCTAssertEqual(b.delay(afterFailures: 1000, random: 0), .seconds(10))
        XCTAssertEqual(b.slowest(random: 0), .seconds(10))
        XCTAssertEqual(b.delay(afterFailures: 1000, random: 1), .seconds(8), "jitter takes off at most 20 %")
        for failures in 0 ..< 40 {
            for r in stride(from: 0.0, through: 1.0, by: 0.25) {
                let d = b.delay(afterFailures: failures, random: r)
                XCTAssertLessThanOrEqual(d, .seconds(10))
                XCTAssertGreaterThanOrEqual(d, .milliseconds(400))
            }
        }
    }

    func testFailedIsReportedAndRetriesContinueUntilAServerAppears() throws {
        let dead = try deadAddress(loop)
        let session = try makeSession(configuration([dead]))
        var attemptTimes: [UInt64] = []
        session.onEvent = { [unowned self] in self.events.append($0) }
        session.start()
        XCTAssertTrue(try runLoop(loop) { if case .failed = session.connectionState { true } else { false } })
        XCTAssertEqual(session.statistics.connectAttempts, 3, "failed after the threshold of 3 attempts")
        // Keeps trying, at the longest back-off (120 ms here).
        var last = session.statistics.connectAttempts
        let start = monotonicNanoseconds()
        try runLoop(loop, seconds: 1.0) {
            if session.statistics.connectAttempts != last {
                last = session.statistics.connectAttempts
                attemptTimes.append(monotonicNanoseconds())
            }
            return false
        }
        XCTAssertGreaterThanOrEqual(attemptTimes.count, 3)
        XCTAssertLessThanOrEqual(attemptTimes.count, 10)
        var previous = start
        for t in attemptTimes.dropFirst() {
            XCTAssertLessThan(Double(t &- previous) / 1e9, 0.3, "bounded back-off")
            previous = t
        }
        // A server appears at that address: the session recovers by itself.
        let server = try FakeRoomServer(loop: loop, port: dead.port!)
        XCTAssertTrue(try runLoop(loop) { session.connectionState == .connected })
        XCTAssertEqual(server.hellos.count, 1)
        XCTAssertEqual(states.first, .connecting)
        XCTAssertEqual(states.last, .connected)
        XCTAssertEqual(states.filter { if case .failed = $0 { true } else { false } }.count, 1)
    }

    func testRefusedTokenReportsFailedAtOnceAndKeepsTrying() throws {
        let server = try FakeRoomServer(loop: loop)
        server.refuseHello = .badSignature
        let session = try makeSession(configuration([server.address]))
        session.start()
        XCTAssertTrue(try runLoop(loop) { if case .failed = session.connectionState { true } else { false } })
        guard case .failed(let reason) = session.connectionState else { return XCTFail() }
        XCTAssertTrue(reason.contains("bad_signature"), reason)
        XCTAssertEqual(server.hellos.count, 1)
        server.refuseHello = nil
        XCTAssertTrue(try runLoop(loop) { session.connectionState == .connected })
    }

    // MARK: Keepalive

    func testKeepalivePingsAndSilentServerCausesReconnect() throws {
        let server = try FakeRoomServer(loop: loop)
        let session = try joinedSession(server)
        XCTAssertTrue(try runLoop(loop) { server.pings >= 3 })
        XCTAssertNotNil(session.statistics.lastSignalRTTMs)
        XCTAssertEqual(session.connectionState, .connected, "pongs keep it alive")

        server.silent = true
        let silentSince = monotonicNanoseconds()
        XCTAssertTrue(try runLoop(loop) { session.connectionState == .reconnecting })
        let waited = Double(monotonicNanoseconds() - silentSince) / 1e9
        XCTAssertGreaterThanOrEqual(waited, 0.3)
        XCTAssertLessThan(waited, 2.0)
        server.silent = false
        XCTAssertTrue(try runLoop(loop) { session.connectionState == .connected })
        XCTAssertEqual(server.hellos.last?.previousParticipantID, 7)
    }

    // MARK: Media

    func testBindingDatagramFirstAuthenticatedWithMediaKey() throws {
        let server = try FakeRoomServer(loop: loop)
        let session = try joinedSession(server)
        let first = try XCTUnwrap(server.datagrams.first)
        XCTAssertEqual(first.bytes.count, BindingDatagram.size)
        let binding = try BindingDatagram.parse(first.bytes, key: server.mediaKey)
        XCTAssertEqual(binding.participantID, 7)
        XCTAssertThrowsError(try BindingDatagram.parse(first.bytes, key: MediaKey(bytes: Array(repeating: 9, count: 16))!))
        XCTAssertTrue(events.contains(.mediaPathChanged(up: true)))
        XCTAssertNotNil(session.statistics.lastMediaRTTMs)
        // Keepalives keep coming, with growing timestamps.
        XCTAssertTrue(try runLoop(loop) { server.bindings.count >= 3 })
        XCTAssertEqual(server.bindings.map(\.timestampMs), server.bindings.map(\.timestampMs).sorted())
        XCTAssertEqual(Set(server.bindings.map(\.timestampMs)).count, server.bindings.count)
    }

    /// The server drops a participant's media until it is bound, so lost binding datagrams at
    /// join must be retried within tens of milliseconds (production timings: 20 ms, doubling,
    /// 1 s at most), not after a second.
    func testLostBindingDatagramsAreRetriedFast() throws {
        let server = try FakeRoomServer(loop: loop)
        server.bindingsToDrop = 2
        var config = configuration([server.address])
        config.bindingRetryFirst = .milliseconds(20)
        config.bindingRetryInterval = .seconds(1)
        let session = try makeSession(config)
        let start = monotonicNanoseconds()
        session.start()
        XCTAssertTrue(try runLoop(loop, seconds: 3) { session.isMediaPathUp })
        let ms = Double(monotonicNanoseconds() - start) / 1e6
        XCTAssertEqual(server.bindings.count, 3, "two lost, the third answered")
        // 20 + 40 ms of retries plus the join itself; before: 1 s after each loss.
        XCTAssertLessThan(ms, 400, "media path up after \(ms) ms")
        session.stop()
    }

    func testOutgoingMediaOnlyWhenOnStageAndUnmuted() throws {
        let server = try FakeRoomServer(loop: loop)
        let session = try joinedSession(server)
        var seq: UInt16 = 100
        func push(_ n: Int) {
            for _ in 0 ..< n {
                XCTAssertTrue(outgoing.push(makePacket(sequence: seq, timestamp: UInt32(seq) * 480)))
                seq &+= 1
            }
            session.outgoingSignal.signal()
        }
        // Audience: nothing is sent.
        push(3)
        XCTAssertTrue(try runLoop(loop) { session.statistics.droppedNotOnStage == 3 })
        XCTAssertEqual(outgoing.availableToRead, 0)
        XCTAssertFalse(session.isSendingMedia)

        session.raiseHand()
        XCTAssertTrue(try runLoop(loop) { session.isSendingMedia })
        push(4)
        XCTAssertTrue(try runLoop(loop) { server.rtp.count == 4 })
        XCTAssertEqual(server.rtp.map(\.ssrc), Array(repeating: 0x1007, count: 4), "the assigned SSRC")
        XCTAssertEqual(server.rtp.map(\.sequenceNumber), [0, 1, 2, 3], "numbered by what is sent, not by what the engine encoded")
        XCTAssertEqual(server.rtp.map(\.timestamp), [103, 104, 105, 106].map { UInt32($0) * 480 })
        XCTAssertEqual(server.rtp[0].audioLevel, 30)
        server.rtp[0].withPayload { XCTAssertEqual(Array($0), [0xF8, 0xFF, 0xFE]) }
        XCTAssertEqual(session.statistics.packetsSent, 4)
        // The binding datagram came before any RTP.
        XCTAssertEqual(server.datagrams.first?.bytes.first, 0x52)

        // Muted: dropped at once, before the server even confirms.
        session.setMute(true)
        push(2)
        XCTAssertTrue(try runLoop(loop) { session.statistics.droppedMuted == 2 })
        XCTAssertTrue(try runLoop(loop) { session.localParticipant?.muted == true })
        XCTAssertTrue(events.contains(.localMuteChanged(true)))
        session.setMute(false)
        XCTAssertTrue(try runLoop(loop) { session.localParticipant?.muted == false })
        push(1)
        XCTAssertTrue(try runLoop(loop) { server.rtp.count == 5 })
        XCTAssertEqual(server.rtp.last?.sequenceNumber, 4, "packets dropped while muted leave no hole a listener would count as lost")
        XCTAssertEqual(server.rtp.last?.timestamp, 109 * 480, "the timestamp keeps the gap, as after DTX")

        // Off stage again: dropped.
        session.stepDown()
        XCTAssertTrue(try runLoop(loop) { session.localParticipant?.stage == .off })
        push(1)
        XCTAssertTrue(try runLoop(loop) { session.statistics.droppedNotOnStage == 4 })
        try runLoop(loop, for: 0.05)
        XCTAssertEqual(server.rtp.count, 5)
        XCTAssertTrue(events.contains(.localStageChanged(.onStage)))
        XCTAssertTrue(events.contains(.localStageChanged(.off)))
    }

    func testModeratorMuteStopsMedia() throws {
        let server = try FakeRoomServer(loop: loop)
        let session = try joinedSession(server, role: .streamer)
        XCTAssertTrue(session.isSendingMedia, "hello with role streamer put it on stage")
        var me = try XCTUnwrap(session.localParticipant)
        me.muted = true
        server.send(.participantUpdated(me))
        XCTAssertTrue(try runLoop(loop) { !session.isSendingMedia })
        XCTAssertTrue(outgoing.push(makePacket(sequence: 1, timestamp: 480)))
        session.outgoingSignal.signal()
        XCTAssertTrue(try runLoop(loop) { session.statistics.droppedMuted == 1 })
    }

    func testIncomingRTPGoesToTheRingWithArrivalTime() throws {
        let server = try FakeRoomServer(loop: loop)
        let session = try joinedSession(server)
        let before = mediaClockSamples(nanoseconds: monotonicNanoseconds())
        var remote = makePacket(sequence: 500, timestamp: 48000, payload: [1, 2, 3, 4, 5])
        remote.ssrc = 0x3333
        server.sendDatagram(rtpBytes(remote))
        XCTAssertTrue(try runLoop(loop) { incoming.availableToRead == 1 })
        let after = mediaClockSamples(nanoseconds: monotonicNanoseconds())
        let packet = try XCTUnwrap(incoming.pop())
        XCTAssertEqual(packet.ssrc, 0x3333)
        XCTAssertEqual(packet.sequenceNumber, 500)
        XCTAssertEqual(packet.timestamp, 48000)
        XCTAssertEqual(packet.audioLevel, 30)
        packet.withPayload { XCTAssertEqual(Array($0), [1, 2, 3, 4, 5]) }
        XCTAssertGreaterThanOrEqual(packet.arrivalSamples, before)
        XCTAssertLessThanOrEqual(packet.arrivalSamples, after)
        XCTAssertEqual(session.statistics.packetsReceived, 1)

        // A full ring drops and counts.
        for i in 0 ..< 70 {
            remote.sequenceNumber = UInt16(600 + i)
            server.sendDatagram(rtpBytes(remote))
        }
        XCTAssertTrue(try runLoop(loop) { session.statistics.packetsReceived + session.statistics.droppedIncomingRingFull == 71 })
        XCTAssertEqual(session.statistics.droppedIncomingRingFull, 70 - incoming.capacity)
    }

    func testGarbageDatagramsAreCountedAndDropped() throws {
        let server = try FakeRoomServer(loop: loop)
        let session = try joinedSession(server)
        let answersBefore = session.statistics.bindingAnswers
        server.sendDatagram([0x00, 1, 2, 3])  // unknown first byte
        server.sendDatagram([0x80, 111])  // RTP too short
        var notOpus = rtpBytes(makePacket(sequence: 1, timestamp: 1))
        notOpus[1] = 0  // payload type 0
        server.sendDatagram(notOpus)
        // A binding answer made with the wrong key, and one of the wrong length.
        server.sendDatagram(BindingDatagram(participantID: 0, timestampMs: 1).encoded(key: MediaKey(bytes: Array(repeating: 5, count: 16))!))
        server.sendDatagram(Array("RMB1".utf8))
        // From another socket (not the server's media port).
        let stranger = try UDPSocket(bindingTo: .ipv4Loopback(port: 0))
        try stranger.send(rtpBytes(makePacket(sequence: 1, timestamp: 1)), to: try XCTUnwrap(server.clientMediaAddress))
        XCTAssertTrue(try runLoop(loop) {
            session.statistics.garbageDatagrams == 3 && session.statistics.invalidBindingDatagrams == 2
                && session.statistics.foreignDatagrams == 1
        })
        XCTAssertEqual(incoming.availableToRead, 0)
        XCTAssertEqual(session.statistics.packetsReceived, 0)
        XCTAssertEqual(session.statistics.bindingAnswers, answersBefore)
        XCTAssertEqual(session.connectionState, .connected)
    }

    // MARK: Removal, leave, requests

    func testKickedDoesNotRejoin() throws {
        let server = try FakeRoomServer(loop: loop)
        let session = try joinedSession(server)
        server.send(.removed(reason: .kicked, message: "bye"))
        XCTAssertTrue(try runLoop(loop) { if case .disconnected = session.connectionState { true } else { false } })
        XCTAssertEqual(session.connectionState, .disconnected(.removed(.kicked, message: "bye")))
        XCTAssertTrue(events.contains(.removed(reason: .kicked, message: "bye")))
        try runLoop(loop, for: 0.3)
        XCTAssertEqual(server.hellos.count, 1, "no automatic rejoin after a kick")
        XCTAssertFalse(session.isMediaPathUp)
    }

    func testReplacedDoesNotRejoin() throws {
        let server = try FakeRoomServer(loop: loop)
        let session = try joinedSession(server)
        server.send(.removed(reason: .replaced, message: ""))
        XCTAssertTrue(try runLoop(loop) { session.connectionState == .disconnected(.removed(.replaced, message: "")) })
        try runLoop(loop, for: 0.3)
        XCTAssertEqual(server.hellos.count, 1)
    }

    func testRoomClosedRejoinsAfresh() throws {
        let server = try FakeRoomServer(loop: loop)
        let session = try joinedSession(server)
        server.send(.removed(reason: .roomClosed, message: "shutting down"))
        XCTAssertTrue(try runLoop(loop) { session.connectionState == .reconnecting })
        XCTAssertTrue(try runLoop(loop) { session.connectionState == .connected })
        XCTAssertEqual(server.hellos.count, 2)
        XCTAssertNil(server.hellos[1].previousParticipantID)
    }

    func testRoomClosedStopsWhenConfigured() throws {
        let server = try FakeRoomServer(loop: loop)
        var config = configuration([server.address])
        config.rejoinAfterRoomClosed = false
        let session = try makeSession(config)
        session.start()
        XCTAssertTrue(try runLoop(loop) { session.connectionState == .connected })
        server.send(.removed(reason: .roomClosed, message: ""))
        XCTAssertTrue(try runLoop(loop) { session.connectionState == .disconnected(.removed(.roomClosed, message: "")) })
        try runLoop(loop, for: 0.2)
        XCTAssertEqual(server.hellos.count, 1)
    }

    func testTokenExpiredWaitsForANewToken() throws {
        let server = try FakeRoomServer(loop: loop)
        let session = try joinedSession(server)
        server.send(.removed(reason: .tokenExpired, message: ""))
        XCTAssertTrue(try runLoop(loop) { session.connectionState == .disconnected(.tokenExpired(message: "")) })
        try runLoop(loop, for: 0.2)
        XCTAssertEqual(server.hellos.count, 1)
        session.refreshToken("fresh-token")
        XCTAssertTrue(try runLoop(loop) { session.connectionState == .connected })
        XCTAssertEqual(server.hellos.last?.token, "fresh-token")
        XCTAssertEqual(server.hellos.last?.previousParticipantID, 7)
    }

    func testRequestsCompleteOrFailWithCodes() throws {
        let server = try FakeRoomServer(loop: loop)
        let session = try makeSession(configuration([server.address]))
        var results: [String: Result<Void, RoomRequestError>] = [:]
        session.raiseHand { results["early"] = $0 }
        XCTAssertNil(results["early"], "never calls back re-entrantly")
        session.start()
        XCTAssertTrue(try runLoop(loop) { session.connectionState == .connected && results["early"] != nil })
        guard case .failure(let early)? = results["early"] else { return XCTFail() }
        XCTAssertEqual(early.code, RoomRequestError.notConnected)

        server.refuse["kick"] = .notModerator
        session.kick(3, reason: "spam") { results["kick"] = $0 }
        session.setAttribute(key: "k", value: "v") { results["attr"] = $0 }
        session.sendMessage(to: 3, data: "hello") { results["msg"] = $0 }
        session.invite(3)  // no completion: a failure would be an event
        server.refuse["approve"] = .unknownParticipant
        session.approve(42)
        XCTAssertTrue(try runLoop(loop) {
            results.count == 4 && events.contains { if case .requestFailed = $0 { true } else { false } }
        })
        guard case .failure(let kick)? = results["kick"] else { return XCTFail() }
        XCTAssertEqual(kick.code, .notModerator)
        if case .failure? = results["attr"] { XCTFail() }
        if case .failure? = results["msg"] { XCTFail() }
        let failure = events.compactMap { if case .requestFailed(let f) = $0 { f } else { nil } }
        XCTAssertEqual(failure.map(\.request), ["approve"])
        XCTAssertEqual(failure.first?.error.code, .unknownParticipant)
        XCTAssertTrue(server.received.contains { $0.body == .kick(participantID: 3, reason: "spam") })
        XCTAssertTrue(server.received.contains { $0.body == .appMessage(.init(to: 3, data: "hello")) })

        // Limits are checked locally, the connection stays.
        session.sendMessage(data: String(repeating: "x", count: 9000)) { results["big"] = $0 }
        XCTAssertTrue(try runLoop(loop) { results["big"] != nil })
        guard case .failure(let big)? = results["big"] else { return XCTFail() }
        XCTAssertEqual(big.code, .invalidField)
        XCTAssertEqual(session.connectionState, .connected)
    }

    func testLeaveClosesWithoutRejoin() throws {
        let server = try FakeRoomServer(loop: loop)
        let session = try joinedSession(server)
        var done = false
        session.leave { _ in done = true }
        XCTAssertTrue(try runLoop(loop) { done })
        XCTAssertEqual(session.connectionState, .disconnected(.left))
        XCTAssertTrue(server.received.contains { $0.body == .leave })
        try runLoop(loop, for: 0.2)
        XCTAssertEqual(server.hellos.count, 1)
        // Packets pushed now are drained and counted, never sent.
        XCTAssertTrue(outgoing.push(makePacket(sequence: 1, timestamp: 1)))
        session.outgoingSignal.signal()
        XCTAssertTrue(try runLoop(loop) { session.statistics.droppedNotConnected == 1 })
    }

    /// A second leave while the first is under way waits for the same end instead of being
    /// dropped (roomctl leave twice, or a join that leaves first), and a restart from a leave's
    /// completion (what roomd's join does) works.
    func testEveryLeaveIsAnsweredAndARestartFromTheCompletionRejoins() throws {
        let server = try FakeRoomServer(loop: loop)
        let session = try joinedSession(server)
        var answers = 0
        session.leave { _ in answers += 1 }
        session.leave { _ in
            answers += 1
            session.start()
        }
        XCTAssertTrue(try runLoop(loop) { answers == 2 })
        XCTAssertTrue(try runLoop(loop) { server.hellos.count == 2 }, "joined again from the completion")
        XCTAssertTrue(try runLoop(loop) { session.joinInfo != nil && session.connectionState == .connected })
    }
}
