import RoomModel
import RoomProtocol
import RoomServerKit
import RoomSystem
import Synchronization
import XCTest

/// The room service over several worker threads (issue 30, "every core"): the kernel steers
/// media to the worker of its SSRC, a `hello` for another worker's room moves the connection
/// there, and the budgets that are the process's (connections) stay the process's.
final class RoomServerWorkersTests: XCTestCase {
    /// The first room names the group's hash puts on each worker, in worker order.
    private func roomsByWorker(_ group: RoomServerWorkers) -> [String] {
        var found = [String?](repeating: nil, count: group.count)
        for n in 0 ..< 1000 where found.contains(nil) {
            let name = "room-\(n)"
            let worker = group.worker(for: RoomKey(app: ServerHarness.app, name: name))
            if found[worker] == nil { found[worker] = name }
        }
        return found.map { $0! }
    }

    /// What worker `index` holds, read on its thread.
    private func rooms(on index: Int, of group: RoomServerWorkers) -> [RoomKey]? {
        let result = Mutex<[RoomKey]?>(nil)
        group.perform(on: index) { server in result.withLock { $0 = server.roomKeys } }
        let deadline = monotonicNanoseconds() + 2_000_000_000
        while monotonicNanoseconds() < deadline {
            if let keys = result.withLock({ $0 }) { return keys }
            sleepMilliseconds(2)
        }
        return nil
    }

    func testTheKernelSteersEachDatagramToTheSocketOfItsNumber() throws {
        let sockets = try UDPSocket.steeredGroup(bindingTo: .ipv4Loopback(port: 0), count: 3)
        XCTAssertEqual(Set(sockets.map(\.localPort)).count, 1, "one port for the group")
        let sender = try UDPSocket(bindingTo: .ipv4Loopback(port: 0))
        let target = sockets[0].localAddress
        for ssrc in UInt32(1) ... 9 { _ = try sender.send(TestClient.rtp(ssrc: ssrc * 1_000_003, sequence: 1), to: target) }
        let key = MediaKey.random()
        for participant in RoomParticipantID(20) ... 25 {
            _ = try sender.send(BindingDatagram(participantID: participant, timestampMs: 1).encoded(key: key), to: target)
        }
        _ = try sender.send([0x80, 0x00], to: target)  // too short for an SSRC: the first socket
        sleepMilliseconds(20)
        var buffer = [UInt8](repeating: 0, count: 2048)
        for (index, socket) in sockets.enumerated() {
            var ssrcs: [UInt32] = [], participants: [RoomParticipantID] = [], short = 0
            while let d = try buffer.withUnsafeMutableBytes({ try socket.receive(into: $0) }) {
                let bytes = Array(buffer[0 ..< d.count])
                if d.count < 12 {
                    short += 1
                } else if bytes[0] == 0x52 {
                    participants.append(bytes[4 ..< 8].reduce(0) { $0 << 8 | UInt32($1) })
                } else {
                    ssrcs.append(bytes[8 ..< 12].reduce(0) { $0 << 8 | UInt32($1) })
                }
            }
            XCTAssertEqual(ssrcs, (UInt32(1) ... 9).map { $0 * 1_000_003 }.filter { Int($0 % 3) == index }, "socket \(index)")
            XCTAssertEqual(participants, (RoomParticipantID(20) ... 25).filter { Int($0 % 3) == index }, "socket \(index)")
            XCTAssertEqual(short, index == 0 ? 1 : 0, "socket \(index)")
        }
    }

    /// SO_REUSEPORT would let a second group (a second roomserver of the same user) share the
    /// port and take half its media: a port in use is refused as for one socket.
    func testAMediaPortInUseIsRefusedNotShared() throws {
        let single = try UDPSocket(bindingTo: .ipv4Loopback(port: 0))
        XCTAssertThrowsError(try UDPSocket.steeredGroup(bindingTo: single.localAddress, count: 2)) { error in
            XCTAssertTrue("\(error)".contains("in use"), "\(error)")
        }
        let group = try UDPSocket.steeredGroup(bindingTo: .ipv4Loopback(port: 0), count: 2)
        XCTAssertThrowsError(try UDPSocket.steeredGroup(bindingTo: group[0].localAddress, count: 2)) { error in
            XCTAssertTrue("\(error)".contains("in use"), "\(error)")
        }
    }

    func testRoomsSpreadOverWorkersAndEachRoomsMediaFlowsThere() throws {
        let h = try ServerHarness(workers: 2)
        let group = try XCTUnwrap(h.group)
        let names = roomsByWorker(group)
        for (worker, room) in names.enumerated() {
            let talker = try h.join("talker-\(worker)", role: .streamer, publish: true, room: room)
            let listener = try h.join("listener-\(worker)", room: room)
            // The kernel finds this worker by these numbers (RoomServerWorkers).
            XCTAssertEqual(Int(talker.id) % 2, worker)
            XCTAssertEqual(Int(talker.welcome!.ssrc) % 2, worker)
            XCTAssertEqual(talker.welcome!.udpPort, h.mediaPort)
            let packet = try talker.sendRTP()
            func sameButSequence(_ d: [UInt8]) -> Bool {
                d.count == packet.count && d.indices.allSatisfy { $0 == 2 || $0 == 3 || d[$0] == packet[$0] }
            }
            XCTAssertTrue(h.run(seconds: 2) { listener.datagrams.contains(where: sameButSequence) }, "room \(room) on worker \(worker)")
            // Signalling after the move: a request and the event it causes.
            let id = talker.request(.setAttribute(key: "topic", value: "w\(worker)"))
            XCTAssertTrue(h.run { talker.gotOK(id) && listener.has { if case .attributeChanged = $0 { true } else { false } } })
        }
        for (worker, room) in names.enumerated() {
            XCTAssertEqual(rooms(on: worker, of: group), [RoomKey(app: ServerHarness.app, name: room)], "worker \(worker)")
        }
    }

    /// A seat in its reconnect grace is taken back through the front door: the hello moves to
    /// the room's worker, which finds the seat.
    func testAReconnectResumesTheSeatOnItsRoomsWorker() throws {
        let h = try ServerHarness(workers: 2)
        let room = roomsByWorker(try XCTUnwrap(h.group))[1]
        let alice = try h.join("alice", role: .streamer, publish: true, room: room)
        let bob = try h.join("bob", room: room)
        let seat = alice.id
        alice.connection.close()
        h.settle(seconds: 0.1)
        let again = try h.connect()
        again.send(.hello(.init(client: "test/1", token: h.token(room: room, user: "alice", publish: true), role: .streamer,
                                previousParticipantID: seat)))
        XCTAssertTrue(h.run { again.welcome != nil })
        XCTAssertEqual(again.id, seat)
        h.settle(seconds: 0.1)
        XCTAssertNil(bob.left(seat), "a resumed seat is not announced as left")
    }

    /// `limits.max_connections` counts every worker's connections: joined participants on
    /// worker 1 fill the process, and the next connection is turned away at the front door.
    func testTheConnectionCapacityIsTheProcesssAcrossWorkers() throws {
        var limits = RoomServerLimits()
        limits.maxConnections = 2
        let h = try ServerHarness(limits: limits, workers: 2)
        let room = roomsByWorker(try XCTUnwrap(h.group))[1]
        _ = try h.join("a", room: room, bind: false)
        _ = try h.join("b", room: room, bind: false)
        let third = try h.connect()
        XCTAssertTrue(h.run { third.closed }, "a third connection is refused while two are joined elsewhere")
    }

    /// SIGHUP's reload reaches every worker: a key added in the file admits a join to a room on
    /// the second worker, and a changed worker count is reported as needing a restart.
    func testAReloadReachesEveryWorker() throws {
        let h = try ServerHarness(workers: 2)
        let group = try XCTUnwrap(h.group)
        let room = roomsByWorker(group)[1]
        let secret = [UInt8](repeating: 3, count: 32)
        var next = h.configuration
        next.keys["k2"] = RoomServerKey(keyID: "k2", appID: ServerHarness.app, secret: secret)
        next.workers = 3
        let report = Mutex<RoomServer.ReloadReport?>(nil)
        group.reload(next) { r in report.withLock { $0 = r } }
        XCTAssertTrue(h.run { report.withLock { $0 } != nil })
        XCTAssertEqual(report.withLock { $0 }?.applied, ["keys"])
        XCTAssertEqual(report.withLock { $0 }?.restartNeeded, ["server.workers"])
        let client = try h.connect()
        client.send(.hello(.init(client: "test/1", token: h.token(room: room, user: "carol", keyID: "k2", secret: secret), role: .audience)))
        XCTAssertTrue(h.run { client.welcome != nil }, "\(client.messages)")
    }

    /// A listener that cannot bind fails start-up as with one worker, and the workers already
    /// running are stopped, not left behind.
    func testAListenerThatCannotBindFailsTheStartAndStopsTheOthers() throws {
        let loop = try EventLoop()
        let taken = try TCPListener(address: .ipv4Loopback(port: 0), loop: loop) { _ in }
        var configuration = RoomServerConfiguration(listen: [], media: .ipv4Loopback(port: 0), keys: [:])
        configuration.plainListen = [taken.localAddress]
        XCTAssertThrowsError(try RoomServerWorkers(configuration: configuration, count: 3)) { error in
            XCTAssertTrue("\(error)".contains("\(taken.localAddress)"), "\(error)")
        }
    }
}
