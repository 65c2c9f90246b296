import Glibc
import RoomControl
import RoomJSON
import RoomSystem
import XCTest

/// A client on the test's own loop that collects the lines it receives.
final class LineClient {
    let connection: StreamConnection
    var lines: [JSONValue] = []
    var closed = false
    private var buffer: [UInt8] = []

    init(path: String, loop: EventLoop) throws {
        connection = try StreamConnection.connect(to: try SocketAddress(unixPath: path), loop: loop)
        connection.handler = { [weak self] c, event in
            guard let self else { return }
            switch event {
            case .readable:
                var chunk = [UInt8](repeating: 0, count: 65536)
                switch (try? chunk.withUnsafeMutableBytes { try c.read(into: $0) }) ?? .endOfStream {
                case .bytes(let n):
                    self.buffer += chunk[0..<n]
                    while let nl = self.buffer.firstIndex(of: 0x0A) {
                        if let v = try? JSONValue.parse(self.buffer[..<nl]) { self.lines.append(v) }
                        self.buffer.removeSubrange(0...nl)
                    }
                case .endOfStream:
                    self.closed = true
                    c.close()
                case .wouldBlock: break
                }
            case .closed: self.closed = true
            default: break
            }
        }
    }

    func send(_ text: String) { connection.write(text + "\n") }
}

final class ControlServerTests: XCTestCase {
    var path = ""
    var loop: EventLoop!

    override func setUp() {
        path = "/tmp/roomctl-test-\(getpid())-\(UInt32.random(in: 0...UInt32.max)).sock"
        loop = try! EventLoop()
    }

    override func tearDown() {
        unlink(path)
        loop = nil
    }

    /// A handler that answers every command with its arguments, status with a fixed state.
    func makeServer(configure: (inout ControlServer.Configuration) -> Void = { _ in },
                    authorize: ControlServer.Authorizer? = { _, _ in true },
                    handler: ControlServer.Handler? = nil) throws -> ControlServer {
        var config = ControlServer.Configuration(path: path)
        configure(&config)
        return try ControlServer(configuration: config, loop: loop, authorize: authorize, handler: handler ?? { request, reply in
            if request.command == .status {
                reply(.success(["connection": "connected", "muted": false]))
            } else if case .moderate(.kick, _, _) = request.command {
                reply(.failure(.room(code: "not_moderator", "only moderators can kick")))
            } else {
                reply(.success(["cmd": .string(request.name), "args": .object(request.arguments)]))
            }
        })
    }

    func pump(until done: () -> Bool, timeout: Double = 5) {
        let deadline = monotonicNanoseconds() + UInt64(timeout * 1e9)
        while !done() && monotonicNanoseconds() < deadline { _ = try? loop.runOnce(timeout: .milliseconds(10)) }
    }

    func roundTrip(_ client: LineClient, _ text: String) -> JSONValue? {
        let before = client.lines.count
        client.send(text)
        pump { client.lines.count > before || client.closed }
        return client.lines.count > before ? client.lines[before] : nil
    }

    func testSocketFileModeAndRemoval() throws {
        var server: ControlServer? = try makeServer()
        var st = stat()
        XCTAssertEqual(lstat(path, &st), 0)
        XCTAssertEqual(st.st_mode & 0o777, 0o660)
        XCTAssertEqual(st.st_mode & S_IFMT, S_IFSOCK)
        server?.close()
        server = nil
        XCTAssertNotEqual(lstat(path, &st), 0)
    }

    func testEveryCommandRoundTripsWithGoodAndBadArguments() throws {
        let server = try makeServer()
        let client = try LineClient(path: path, loop: loop)
        var id = 0
        for spec in ControlCommands.all {
            var good: [String: JSONValue] = [:]
            for a in spec.arguments where a.required { good[a.name] = ControlRequestTests.sample(a.type) }
            id += 1
            let answer = try XCTUnwrap(roundTrip(client, ControlRequestTests.line(spec.name, good, id: .int(id))), spec.name)
            XCTAssertEqual(answer["id"], .int(id))
            if spec.name == "kick" {
                XCTAssertEqual(answer["ok"], false)
                XCTAssertEqual(answer["error"]?["code"], "room_error")
                XCTAssertEqual(answer["error"]?["room_code"], "not_moderator")
            } else {
                XCTAssertEqual(answer["ok"], true, "\(spec.name): \(answer)")
            }
            for a in spec.arguments {
                var bad = good
                bad[a.name] = ControlRequestTests.wrong(a.type)
                id += 1
                let answer = try XCTUnwrap(roundTrip(client, ControlRequestTests.line(spec.name, bad, id: .int(id))))
                XCTAssertEqual(answer["id"], .int(id))
                XCTAssertEqual(answer["ok"], false)
                XCTAssertEqual(answer["error"]?["code"], "wrong_type")
                XCTAssertEqual(answer["error"]?["field"], .string("args.\(a.name)"))
                XCTAssertEqual(answer["error"]?["expected"], .string(a.type.expectedName))
            }
        }
        XCTAssertFalse(client.closed)
        XCTAssertEqual(server.clientCount, 1)
    }

    func testVersionAnsweredByTheServer() throws {
        let server = try makeServer(handler: { _, _ in XCTFail("version goes to the handler") })
        let client = try LineClient(path: path, loop: loop)
        let answer = roundTrip(client, #"{"id":"v","cmd":"version"}"#)
        XCTAssertEqual(answer?["result"]?["api"], .int(controlAPIVersion))
        XCTAssertEqual(answer?["id"], "v")
        _ = server
    }

    func testMalformedJSONAndUnknownCommandKeepTheConnection() throws {
        let server = try makeServer()
        let client = try LineClient(path: path, loop: loop)
        XCTAssertEqual(roundTrip(client, "{\"id\":1,\"cmd\":")?["error"]?["code"], "bad_json")
        XCTAssertEqual(roundTrip(client, "\u{1}\u{2}garbage")?["error"]?["code"], "bad_json")
        XCTAssertEqual(roundTrip(client, "42")?["error"]?["code"], "bad_json")
        let unknown = roundTrip(client, #"{"id":9,"cmd":"self_destruct"}"#)
        XCTAssertEqual(unknown?["error"]?["code"], "unknown_command")
        XCTAssertEqual(unknown?["id"], 9)
        // Blank lines are skipped, CRLF is accepted, and the connection still works.
        XCTAssertEqual(roundTrip(client, "\n\r\n" + #"{"id":10,"cmd":"status"}"# + "\r")?["ok"], true)
        XCTAssertFalse(client.closed)
        XCTAssertEqual(server.statistics.errors, 4)
    }

    func testHugeLineIsCutOff() throws {
        let server = try makeServer()
        let client = try LineClient(path: path, loop: loop)
        let other = try LineClient(path: path, loop: loop)
        // 100 KiB without a newline: refused as soon as the buffer passes 64 KiB.
        client.connection.write(#"{"id":1,"cmd":"send_message","args":{"data":""# + String(repeating: "x", count: 100_000))
        pump { client.closed }
        XCTAssertTrue(client.closed)
        XCTAssertEqual(client.lines.first?["error"]?["code"], "too_long")
        XCTAssertEqual(server.statistics.tooLong, 1)
        // A line of exactly 64 KiB is fine (it is answered with bad_json: it is not JSON).
        XCTAssertEqual(roundTrip(other, String(repeating: " ", count: 10) + String(repeating: "y", count: 65536 - 10))?["error"]?["code"], "bad_json")
        XCTAssertEqual(roundTrip(other, #"{"id":2,"cmd":"status"}"#)?["ok"], true)
    }

    func testStuckSubscriberIsCutOffAndOthersAreServed() throws {
        let server = try makeServer(configure: { $0.outgoingLimit = 64 * 1024 })
        let stuck = try LineClient(path: path, loop: loop)
        let reader = try LineClient(path: path, loop: loop)
        XCTAssertEqual(roundTrip(stuck, #"{"id":1,"cmd":"subscribe"}"#)?["ok"], true)
        XCTAssertEqual(roundTrip(reader, #"{"id":1,"cmd":"subscribe","args":{"events":["active_speakers"]}}"#)?["ok"], true)
        stuck.connection.isReadingPaused = true // connects, subscribes, then never reads again
        let blob = JSONValue.string(String(repeating: "z", count: 4000))
        var sent = 0
        let deadline = monotonicNanoseconds() + 10_000_000_000
        // Broadcast until the stuck subscriber's socket and buffer are full; keep the loop
        // turning so the reader drains, as the daemon's loop would.
        while server.statistics.subscribersCutOff == 0 && monotonicNanoseconds() < deadline {
            server.broadcast(event: "active_speakers", ["participants": [1, 2], "pad": blob, "n": .int(sent)])
            sent += 1
            _ = try loop.runOnce(timeout: .zero)
        }
        XCTAssertEqual(server.statistics.subscribersCutOff, 1)
        XCTAssertEqual(server.subscriberCount, 1)
        pump { reader.lines.count >= sent + 1 }
        XCTAssertEqual(reader.lines.count, sent + 1, "the reader got every event")
        XCTAssertEqual(reader.lines.last?["n"], .int(sent - 1))
        // The server keeps serving: a new client gets answers, new events still flow.
        let fresh = try LineClient(path: path, loop: loop)
        XCTAssertEqual(roundTrip(fresh, #"{"id":1,"cmd":"status"}"#)?["ok"], true)
        server.broadcast(event: "active_speakers", ["participants": []])
        pump { reader.lines.count == sent + 2 }
        XCTAssertEqual(reader.lines.count, sent + 2)
    }

    func testPermissionRefusalWithInjectedAuthorizer() throws {
        var asked: [(PeerCredentials, String)] = []
        let server = try makeServer(authorize: { credentials, spec in
            asked.append((credentials, spec.name))
            return spec.name == "raise_hand"
        })
        let client = try LineClient(path: path, loop: loop)
        let refused = roundTrip(client, #"{"id":1,"cmd":"mute"}"#)
        XCTAssertEqual(refused?["error"]?["code"], "permission_denied")
        XCTAssertEqual(refused?["id"], 1)
        XCTAssertEqual(roundTrip(client, #"{"id":2,"cmd":"raise_hand"}"#)?["ok"], true)
        // Reading commands are not asked about.
        XCTAssertEqual(roundTrip(client, #"{"id":3,"cmd":"status"}"#)?["ok"], true)
        XCTAssertEqual(roundTrip(client, #"{"id":4,"cmd":"subscribe"}"#)?["ok"], true)
        XCTAssertEqual(asked.map(\.1), ["mute", "raise_hand"])
        XCTAssertEqual(asked.first?.0.uid, geteuid())
        XCTAssertEqual(asked.first?.0.pid, getpid())
        // Issue 27: the groups come from the socket (SO_PEERGROUPS, as at connect time), not from
        // /proc/<pid>, which may name another process by the time a request is read.
        XCTAssertEqual(asked.first?.0.groups.map(Set.init), Set(ControlAuthorization.supplementaryGroups(pid: getpid())))
        XCTAssertEqual(server.statistics.permissionDenied, 1)
    }

    func testDefaultPolicy() {
        func allowed(uid: uid_t, gid: gid_t, group: gid_t?, groups: [gid_t] = ControlAuthorization.supplementaryGroups(pid: getpid())) -> Bool {
            ControlAuthorization.isAllowed(uid: uid, gid: gid, groups: groups, allowedGroup: group, daemonUID: 4242)
        }
        XCTAssertTrue(allowed(uid: 54321, gid: 54321, group: 777, groups: [5, 777]), "a supplementary group")
        XCTAssertFalse(allowed(uid: 54321, gid: 54321, group: 777, groups: [5]))
        XCTAssertTrue(allowed(uid: 4242, gid: 1, group: nil), "roomd's own user")
        XCTAssertTrue(allowed(uid: 0, gid: 0, group: nil), "root")
        XCTAssertFalse(allowed(uid: 54321, gid: 54321, group: nil))
        XCTAssertTrue(allowed(uid: 54321, gid: 54321, group: 54321), "primary group")
        XCTAssertFalse(allowed(uid: 54321, gid: 54321, group: 999_999))
        // Supplementary groups come from /proc/<pid>/status (this process's own here).
        let mine = ControlAuthorization.supplementaryGroups(pid: getpid())
        if let g = mine.first { XCTAssertTrue(allowed(uid: 54321, gid: 54321, group: g)) }
        XCTAssertEqual(ControlAuthorization.supplementaryGroups(pid: -5), [])
    }

    func testManySubscribersReceiveAnEvent() throws {
        let server = try makeServer(configure: { $0.maxClientsPerUser = 64 })   // all 41 are this test's uid
        var clients: [LineClient] = []
        for i in 0..<40 {
            let c = try LineClient(path: path, loop: loop)
            c.send(i % 2 == 0 ? #"{"id":1,"cmd":"subscribe"}"# : #"{"id":1,"cmd":"subscribe","args":{"events":["mute"]}}"#)
            clients.append(c)
        }
        let onlooker = try LineClient(path: path, loop: loop) // not subscribed: gets no events
        pump { clients.allSatisfy { $0.lines.count == 1 } }
        XCTAssertEqual(server.subscriberCount, 40)
        server.broadcast(event: "mute", ["muted": true, "by": "button"])
        server.broadcast(event: "stage", ["stage": "on_stage"])
        server.broadcast(event: "levels", ["mic_dbfs": -30])
        pump { clients.allSatisfy { $0.lines.count >= 2 } && clients.enumerated().allSatisfy { $0.offset % 2 == 1 || $0.element.lines.count == 3 } }
        for (i, c) in clients.enumerated() {
            XCTAssertEqual(c.lines[1], ["event": "mute", "muted": true, "by": "button"])
            XCTAssertEqual(c.lines.count, i % 2 == 0 ? 3 : 2, "client \(i)")
        }
        XCTAssertFalse(server.hasLevelSubscribers)
        XCTAssertEqual(onlooker.lines.count, 0)
        XCTAssertEqual(server.statistics.eventsSent, 60)
    }

    func testLevelsOnlyWhenAsked() throws {
        let server = try makeServer()
        let client = try LineClient(path: path, loop: loop)
        let answer = roundTrip(client, #"{"id":1,"cmd":"subscribe","args":{"levels":true}}"#)
        XCTAssertEqual(answer?["result"]?["levels"], true)
        XCTAssertTrue(server.hasLevelSubscribers)
        server.broadcast(event: "levels", ["mic_dbfs": -30])
        pump { client.lines.count == 2 }
        XCTAssertEqual(client.lines.last?["event"], "levels")
    }

    func testAsynchronousRepliesAndPipelining() throws {
        let loop = self.loop!
        let server = try makeServer(handler: { request, reply in
            // Later requests answered sooner: answers are matched by id, not order.
            let delay = request.command == .mute ? 50 : 5
            loop.schedule(after: .milliseconds(Int64(delay))) { reply(.success(["cmd": .string(request.name)])); reply(.ok) }
        })
        let client = try LineClient(path: path, loop: loop)
        client.send(#"{"id":1,"cmd":"mute"}"# + "\n" + #"{"id":2,"cmd":"unmute"}"#)
        pump { client.lines.count == 2 }
        XCTAssertEqual(client.lines.map { $0["id"] }, [2, 1])
        pump(until: { false }, timeout: 0.1)
        XCTAssertEqual(client.lines.count, 2, "a second reply is ignored")
        _ = server
    }

    func testHalfClosedClientGetsItsAnswers() throws {
        let server = try makeServer()
        let client = try LineClient(path: path, loop: loop)
        client.connection.write(#"{"id":1,"cmd":"status"}"# + "\n" + #"{"id":2,"cmd":"mute"}"#) // no final newline
        pump { client.connection.bufferedByteCount == 0 }
        shutdown(client.connection.fileDescriptor, Int32(SHUT_WR))
        pump { client.closed }
        XCTAssertEqual(client.lines.map { $0["id"] }, [1, 2])
        XCTAssertTrue(client.closed)
        pump { server.clientCount == 0 }
        XCTAssertEqual(server.clientCount, 0)
    }

    /// Issue 10: Ctrl-C on `roomctl events` (or `roomctl wait` running out) left a subscriber
    /// whose peer was gone; its hang-up was reported on every loop turn and roomd spun a core.
    func testSubscriberThatGoesAwayIsDroppedWithoutSpinning() throws {
        let server = try makeServer()
        let client = try LineClient(path: path, loop: loop)
        client.send(#"{"id":1,"cmd":"subscribe"}"#)
        pump { client.lines.count == 1 }
        // Like `roomctl events` piped from a here-document: input over, still listening.
        shutdown(client.connection.fileDescriptor, Int32(SHUT_WR))
        pump(until: { false }, timeout: 0.05)
        XCTAssertEqual(server.subscriberCount, 1, "a half-closed subscriber still gets events")
        client.connection.close()   // then the process dies
        var turns = 0
        let end = monotonicNanoseconds() + 100_000_000
        while monotonicNanoseconds() < end { turns += (try? loop.runOnce(timeout: .milliseconds(10))) ?? 0 }
        XCTAssertLessThan(turns, 20, "the loop spun on the departed subscriber")
        XCTAssertEqual(server.clientCount, 0)
        XCTAssertEqual(server.subscriberCount, 0)
    }

    func testOneUserCannotTakeEverySlot() throws {
        let server = try makeServer(configure: { $0.maxClientsPerUser = 2 })
        let a = try LineClient(path: path, loop: loop), b = try LineClient(path: path, loop: loop)
        let c = try LineClient(path: path, loop: loop)
        pump { c.closed }
        XCTAssertEqual(c.lines.first?["error"]?["code"], "too_many_clients")
        XCTAssertTrue(c.lines.first?["error"]?["message"]?.stringValue?.contains("per user") == true, "\(c.lines)")
        XCTAssertEqual(server.clientCount, 2)
        XCTAssertEqual(roundTrip(a, #"{"id":1,"cmd":"status"}"#)?["ok"], true)
        _ = b
    }

    /// Issue 10: 64 idle connections locked everyone out. A client that says nothing, leaves a
    /// line unfinished, or idles after its answers is closed with `timeout`; subscribers and
    /// clients waiting for an answer are not.
    func testIdleAndUnfinishedClientsAreClosed() throws {
        let loop = self.loop!
        let server = try makeServer(configure: { $0.lineTimeout = .milliseconds(200); $0.idleTimeout = .milliseconds(400) },
                                    handler: { request, reply in
            // `selftest` answers late (longer than either timeout).
            if request.command == .selfTest { loop.schedule(after: .milliseconds(700)) { reply(.ok) } } else { reply(.ok) }
        })
        let silent = try LineClient(path: path, loop: loop)
        let dripping = try LineClient(path: path, loop: loop)
        dripping.connection.write(#"{"id":1,"cmd":"sta"#)
        let idle = try LineClient(path: path, loop: loop)
        XCTAssertEqual(roundTrip(idle, #"{"id":1,"cmd":"status"}"#)?["ok"], true)
        let subscriber = try LineClient(path: path, loop: loop)
        XCTAssertEqual(roundTrip(subscriber, #"{"id":1,"cmd":"subscribe"}"#)?["ok"], true)
        let waiting = try LineClient(path: path, loop: loop)
        waiting.send(#"{"id":1,"cmd":"selftest"}"#)
        let start = monotonicNanoseconds()
        pump(until: { silent.closed && dripping.closed })
        XCTAssertLessThan(Double(monotonicNanoseconds() - start) / 1e9, 0.5)
        XCTAssertEqual(silent.lines.first?["error"]?["code"], "timeout")
        XCTAssertTrue(dripping.lines.first?["error"]?["message"]?.stringValue?.contains("not completed") == true, "\(dripping.lines)")
        XCTAssertFalse(idle.closed, "answered 0.2 s ago: not idle yet")
        pump(until: { idle.closed })
        XCTAssertEqual(idle.lines.last?["error"]?["code"], "timeout")
        pump(until: { waiting.lines.count == 1 })
        XCTAssertEqual(waiting.lines.first?["ok"], true, "a client waiting for its answer is kept")
        XCTAssertFalse(subscriber.closed)
        XCTAssertEqual(server.clientCount, 2)
        XCTAssertEqual(server.statistics.timeouts, 3)
    }

    /// Issue 10: 60 clients sending 1-byte chunks drove roomd to 79 % of a core: every byte
    /// searched the whole unfinished line again. Each byte is now looked at once.
    func testADrippedLineCostsItsLengthOnce() throws {
        let server = try makeServer()
        let client = try LineClient(path: path, loop: loop)
        let line = Array(#"{"id":1,"cmd":"status","args":{}}"#.utf8) + Array(repeating: 0x20, count: 3000) + [0x0A]
        for byte in line {
            client.connection.write([byte])
            _ = try? loop.runOnce(timeout: .milliseconds(1))
            _ = try? loop.runOnce(timeout: .zero)
        }
        pump { client.lines.count == 1 }
        XCTAssertEqual(client.lines.first?["ok"], true)
        XCTAssertEqual(server.statistics.bytesRead, line.count)
        XCTAssertLessThanOrEqual(server.statistics.bytesScanned, line.count, "each byte searched once (was ~n²/2 = \(line.count * line.count / 2))")
    }

    func testTooManyClientsAreRefused() throws {
        let server = try makeServer(configure: { $0.maxClients = 2 })
        let a = try LineClient(path: path, loop: loop)
        let b = try LineClient(path: path, loop: loop)
        let c = try LineClient(path: path, loop: loop)
        pump { c.closed }
        XCTAssertTrue(c.closed)
        XCTAssertEqual(c.lines.first?["error"]?["code"], "too_many_clients")
        XCTAssertEqual(roundTrip(a, #"{"id":1,"cmd":"status"}"#)?["ok"], true)
        XCTAssertEqual(roundTrip(b, #"{"id":1,"cmd":"status"}"#)?["ok"], true)
        XCTAssertEqual(server.statistics.clientsRefused, 1)
    }
}
