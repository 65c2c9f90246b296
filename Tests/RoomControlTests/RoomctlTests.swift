import Glibc
import RoomControl
import RoomJSON
import RoomSystem
import Synchronization
import XCTest

/// Only touched on the fixture's loop thread (through `post`).
struct LoopBound<T>: @unchecked Sendable { let value: T }

/// A fake roomd: a ControlServer on its own loop thread with a little state machine behind it.
final class FakeDaemon: Sendable {
    let path: String
    private final class Handles: Sendable {
        let remote = Mutex<EventLoopRemote?>(nil)
        let daemon = Mutex<LoopBound<FakeState>?>(nil)
    }
    private let handles = Handles()
    private let thread: NativeThread

    final class FakeState {
        var status: [String: JSONValue] = ["connection": "connected", "joined": true, "stage": "off", "muted": false, "room": "lobby"]
        var server: ControlServer?
    }

    init(path: String) throws {
        self.path = path
        let handles = self.handles
        thread = try NativeThread(name: "fake-roomd") {
            guard let loop = try? EventLoop() else { return }
            let state = FakeState()
            let server = try? ControlServer(configuration: .init(path: path), loop: loop) { [weak state] request, reply in
                guard let state else { return }
                switch request.command {
                case .status: reply(.success(state.status))
                case .mute, .unmute:
                    state.status["muted"] = .bool(request.command == .mute)
                    state.server?.broadcast(event: "mute", ["muted": state.status["muted"]!])
                    reply(.ok)
                case .raiseHand:
                    reply(.ok)
                    // The moderator approves a little later.
                    loop.schedule(after: .milliseconds(100)) {
                        state.status["stage"] = "on_stage"
                        state.server?.broadcast(event: "stage", ["stage": "on_stage"])
                    }
                case .leave: reply(.failure(.notInRoom()))
                case .moderate(.kick, _, _): reply(.failure(.room(code: "not_moderator", "only moderators can kick")))
                // A server's (or a fake Janus's) own text, passed on by roomd.
                case .moderate(.deny, _, _): reply(.failure(.room(code: "janus", "no\u{1b}[2J\n<0>roomd: forged line")))
                case .participants:
                    reply(.success(["participants": [["id": 1, "name": "alice", "role": "streamer"], ["id": 7, "name": "bob", "role": "audience", "muted": true]]]))
                default: reply(.success(["cmd": .string(request.name), "args": .object(request.arguments)]))
                }
            }
            state.server = server
            handles.daemon.withLock { $0 = LoopBound(value: state) }
            handles.remote.withLock { $0 = loop.remote }
            try? loop.run()
            server?.close()
        }
        let deadline = monotonicNanoseconds() + 5_000_000_000
        while handles.remote.withLock({ $0 == nil }) && monotonicNanoseconds() < deadline { sleepMilliseconds(1) }
    }

    /// Runs `body` with the fake's state on its loop thread.
    func post(_ body: @escaping @Sendable (FakeState) -> Void) {
        guard let bound = handles.daemon.withLock({ $0 }) else { return }
        handles.remote.withLock { $0 }?.post { body(bound.value) }
    }

    func stop() {
        handles.remote.withLock { $0 }?.stop()
        thread.join()
    }
}

final class RoomctlTests: XCTestCase {
    func parse(_ args: [String], env: [String: String] = [:]) throws -> Roomctl.Invocation {
        try Roomctl.parse(args, environment: env)
    }

    func action(_ args: String...) throws -> Roomctl.Action { try parse(args).action }

    func usageError(_ args: String...) -> CommandLineUsageError? {
        do { _ = try Roomctl.parse(args, environment: [:]); return nil } catch { return error }
    }

    func testParsing() throws {
        XCTAssertEqual(try action("status"), .request(subcommand: "status", command: "status", arguments: [:]))
        XCTAssertEqual(try action("raise-hand"), .request(subcommand: "raise-hand", command: "raise_hand", arguments: [:]))
        XCTAssertEqual(try action("raise_hand"), .request(subcommand: "raise-hand", command: "raise_hand", arguments: [:]))
        XCTAssertEqual(try action("kick", "7", "--reason", "too loud"),
                       .request(subcommand: "kick", command: "kick", arguments: ["participant": 7, "reason": "too loud"]))
        XCTAssertEqual(try action("kick", "--reason=spam", "7"),
                       .request(subcommand: "kick", command: "kick", arguments: ["participant": 7, "reason": "spam"]))
        XCTAssertEqual(try action("volume", "-6"), .request(subcommand: "volume", command: "volume", arguments: ["db": -6]))
        XCTAssertEqual(try action("volume", "7", "-6.5"),
                       .request(subcommand: "volume", command: "volume", arguments: ["participant": 7, "db": -6.5]))
        XCTAssertEqual(try action("send-message", "--to", "3", "hello there"),
                       .request(subcommand: "send-message", command: "send_message", arguments: ["to": 3, "data": "hello there"]))
        XCTAssertEqual(try action("set-attribute", "topic"), .request(subcommand: "set-attribute", command: "set_attribute", arguments: ["key": "topic"]))
        XCTAssertEqual(try action("set-attribute", "topic", "budget"),
                       .request(subcommand: "set-attribute", command: "set_attribute", arguments: ["key": "topic", "value": "budget"]))
        XCTAssertEqual(try action("join", "--role", "audience", "--server", "10.0.0.5:7700"),
                       .request(subcommand: "join", command: "join", arguments: ["role": "audience", "server": "10.0.0.5:7700"]))
        XCTAssertEqual(try action("profile", "music"), .request(subcommand: "profile", command: "profile", arguments: ["name": "music"]))
        XCTAssertEqual(try action("wait", "on-stage", "--timeout", "2.5"), .wait(.onStage, timeout: 2.5))
        XCTAssertEqual(try action("wait", "--timeout=1", "muted"), .wait(.muted, timeout: 1))
        XCTAssertEqual(try action("wait", "joined"), .wait(.joined, timeout: 30))
        XCTAssertEqual(try action("events"), .events(names: nil, levels: false, count: nil, timeout: nil))
        XCTAssertEqual(try action("events", "--event", "mute,stage", "--levels", "--count", "3", "--timeout", "4"),
                       .events(names: ["mute", "stage"], levels: true, count: 3, timeout: 4))
        XCTAssertEqual(try action("--version"), .version)
        XCTAssertEqual(try action("--help"), .help(nil))
        XCTAssertEqual(try action("kick", "--help"), .help("kick"))
        XCTAssertEqual(try action("help", "wait"), .help("wait"))
    }

    /// Every subcommand takes `--option=value` as well as `--option value` (events refused it).
    func testOptionEqualsValueEverywhere() throws {
        XCTAssertEqual(try action("events", "--event=mute,stage", "--levels", "--count=3", "--timeout=4"),
                       .events(names: ["mute", "stage"], levels: true, count: 3, timeout: 4))
        XCTAssertEqual(try action("events", "--event=mute", "--event", "stage"),
                       .events(names: ["mute", "stage"], levels: false, count: nil, timeout: nil))
        XCTAssertEqual(try action("wait", "joined", "--timeout=2"), .wait(.joined, timeout: 2))
        XCTAssertEqual(try action("kick", "7", "--reason=spam"),
                       .request(subcommand: "kick", command: "kick", arguments: ["participant": 7, "reason": "spam"]))
        XCTAssertTrue(usageError("events", "--timeout=")?.message.contains("--timeout needs seconds") == true)
        XCTAssertTrue(usageError("events", "--count=0")?.message.contains("--count needs a positive integer") == true)
        XCTAssertTrue(usageError("events", "--event=nonsense")?.message.contains("unknown event \"nonsense\"") == true)
        XCTAssertTrue(usageError("events", "--levels=yes")?.message.contains("--levels takes no value") == true)
        XCTAssertEqual(usageError("events", "--bogus=1")?.message, "events: unknown option '--bogus'")
    }

    /// Issue 28: roomctl parses with RoomSystem's CommandLineParser, as every program does. The
    /// cases its own parser handled, and GNU's: both spellings of a value, `--` ends the options,
    /// errors that name the option (exit 2, the shared message shape), a flag given a value.
    func testBothSpellingsOfAValueParseTheSame() throws {
        let token = "/tmp/roomctl-token-\(getpid())"
        try Files.writeAtomically(token, Array("tok123\n".utf8))
        defer { unlink(token) }
        let pairs: [([String], [String])] = [
            (["kick", "7", "--reason=spam"], ["kick", "7", "--reason", "spam"]),
            (["send-message", "--to=3", "hi"], ["send-message", "--to", "3", "hi"]),
            (["join", "--server=10.0.0.5:7700", "--role=audience"], ["join", "--server", "10.0.0.5:7700", "--role", "audience"]),
            (["join", "--token-file=" + token], ["join", "--token-file", token]),
            (["events", "--event=mute", "-e", "stage", "--count=3", "--timeout=4"], ["events", "--event", "mute", "--event", "stage", "--count", "3", "--timeout", "4"]),
            (["wait", "joined", "--timeout=2.5"], ["wait", "joined", "--timeout", "2.5"]),
            (["--socket=/tmp/a.sock", "status"], ["--socket", "/tmp/a.sock", "status"]),
            (["status", "--socket=/tmp/a.sock"], ["status", "--socket", "/tmp/a.sock"]),
        ]
        for (attached, separate) in pairs {
            XCTAssertEqual(try parse(attached), try parse(separate), "\(attached) vs \(separate)")
        }
        XCTAssertEqual(try action("join", "--token-file", token), .request(subcommand: "join", command: "join", arguments: ["token": "tok123"]))
        XCTAssertEqual(try parse(["status", "--socket=/tmp/a.sock"]).options.socketPath, "/tmp/a.sock")
        // A value may start with a dash; the table's range check then judges it.
        XCTAssertEqual(try action("kick", "7", "--reason", "-x"), .request(subcommand: "kick", command: "kick", arguments: ["participant": 7, "reason": "-x"]))
        XCTAssertEqual(usageError("send-message", "--to", "-3", "hi")?.message, "send-message: to: -3 is out of range 1…4294967295")
    }

    func testGlobalOptionsGoBeforeOrAfterTheSubcommand() throws {
        XCTAssertEqual(try parse(["reload", "--json"]), try parse(["--json", "reload"]))
        XCTAssertEqual(try parse(["wait", "joined", "--socket", "/tmp/x.sock", "--timeout", "10"]),
                       Roomctl.Invocation(options: .init(socketPath: "/tmp/x.sock"), action: .wait(.joined, timeout: 10)))
        XCTAssertEqual(try parse(["--socket", "/tmp/a.sock", "status", "--socket", "/tmp/b.sock"]).options.socketPath, "/tmp/b.sock", "the last one wins")
        // --version only before the subcommand: `roomctl version` asks roomd.
        XCTAssertEqual(try action("--json", "--version", "status"), .version)
        XCTAssertEqual(usageError("status", "--version")?.message, "status: unknown option '--version'")
        // --help, or -h: on the subcommand, whatever else is there.
        XCTAssertEqual(try action("--help", "kick", "7", "8"), .help("kick"))
        XCTAssertEqual(try action("kick", "seven", "-h"), .help("kick"))
        XCTAssertEqual(try action("-h"), .help(nil))
    }

    func testNumbersAreOperandsNotOptions() throws {
        XCTAssertEqual(try action("volume", "-6"), .request(subcommand: "volume", command: "volume", arguments: ["db": -6]))
        XCTAssertEqual(try action("volume", "-1e1"), .request(subcommand: "volume", command: "volume", arguments: ["db": -10]))
        XCTAssertEqual(try action("volume", "7", "-0.5"), .request(subcommand: "volume", command: "volume", arguments: ["participant": 7, "db": -0.5]))
        XCTAssertEqual(usageError("volume", "-inf")?.message, "volume: DB: expected a number, got \"-inf\"")
        XCTAssertEqual(usageError("send-message", "-hello")?.message, "send-message: unknown option '-hello'", "a dash-led word that is not a number is an option")
    }

    func testDoubleDashEndsTheOptions() throws {
        XCTAssertEqual(try action("send-message", "--", "--hello"),
                       .request(subcommand: "send-message", command: "send_message", arguments: ["data": "--hello"]))
        XCTAssertEqual(try action("send-message", "--to", "3", "--", "-"),
                       .request(subcommand: "send-message", command: "send_message", arguments: ["to": 3, "data": "-"]))
        XCTAssertEqual(try action("set-attribute", "--", "-k", "--json"),
                       .request(subcommand: "set-attribute", command: "set_attribute", arguments: ["key": "-k", "value": "--json"]))
        XCTAssertEqual(try action("volume", "7", "--", "-6"), .request(subcommand: "volume", command: "volume", arguments: ["participant": 7, "db": -6]))
        // Before the subcommand it ends them for the subcommand's arguments too.
        XCTAssertEqual(try parse(["--json", "--", "send-message", "--to"]),
                       Roomctl.Invocation(options: .init(json: true), action: .request(subcommand: "send-message", command: "send_message", arguments: ["data": "--to"])))
        XCTAssertEqual(usageError("status", "--", "--json")?.message, "status: too many arguments (usage: roomctl status)", "after --, --json is an operand")
        XCTAssertEqual(usageError("--")?.message, "no subcommand given")
    }

    func testUsageErrorsNameTheOptionAndExit2() throws {
        func run(_ args: [String]) -> (Int32, Captured) {
            let c = Captured()
            return (Roomctl.main(args, environment: ["ROOMD_CONTROL_SOCKET": "/tmp/no-such-roomd.sock"], io: c.io), c)
        }
        for (args, message) in [
            (["kick", "7", "--because", "x"], "kick: unknown option '--because'"),
            (["kick", "7", "--because=x"], "kick: unknown option '--because'"),
            (["--bogus", "status"], "unknown option '--bogus'"),
            (["events", "--levels=yes"], "events: --levels takes no value"),
            (["--json=yes", "status"], "--json takes no value"),
            (["status", "--json=1"], "status: --json takes no value"),
            (["status", "--help=x"], "status: --help takes no value"),
            (["kick", "7", "--reason"], "kick: --reason needs REASON"),
            (["--socket"], "--socket needs PATH"),
            (["events", "stray"], "events: unexpected argument 'stray'"),
        ] {
            let (status, c) = run(args)
            XCTAssertEqual(status, 2, "\(args)")
            XCTAssertEqual(status, CommandLineUsageError.exitCode)
            XCTAssertEqual(c.err, [CommandLineUsageError(message).text(program: "roomctl")], "\(args)")
            XCTAssertEqual(c.err.first?.hasSuffix("\nTry 'roomctl --help' for the options."), true)
            XCTAssertEqual(c.out, [])
        }
    }

    func testGlobalOptions() throws {
        XCTAssertEqual(try parse(["status"]).options, Roomctl.Options(socketPath: "/run/roomd/control.sock", json: false))
        XCTAssertEqual(try parse(["status"], env: ["ROOMD_CONTROL_SOCKET": "/tmp/a.sock"]).options.socketPath, "/tmp/a.sock")
        let both = try parse(["--socket", "/tmp/b.sock", "status", "--json"], env: ["ROOMD_CONTROL_SOCKET": "/tmp/a.sock"])
        XCTAssertEqual(both.options, Roomctl.Options(socketPath: "/tmp/b.sock", json: true))
        XCTAssertEqual(try parse(["--socket=/tmp/c.sock", "mute"]).options.socketPath, "/tmp/c.sock")
    }

    func testUsageErrors() {
        XCTAssertNil(usageError("status"))
        XCTAssertNotNil(usageError())
        XCTAssertEqual(usageError("frobnicate")?.message, "unknown subcommand \"frobnicate\" (roomctl --help lists them)")
        XCTAssertEqual(usageError("kick")?.message, "kick: missing PARTICIPANT (usage: roomctl kick [--reason REASON] PARTICIPANT)",
                       "a subcommand's error names it")
        XCTAssertTrue(usageError("kick", "seven")?.message.contains("PARTICIPANT") == true)
        XCTAssertNotNil(usageError("kick", "7", "8"))
        XCTAssertNotNil(usageError("kick", "7", "--because", "x"))
        XCTAssertNotNil(usageError("kick", "7", "--reason"))
        XCTAssertNotNil(usageError("volume"))
        XCTAssertNotNil(usageError("volume", "loud"))
        XCTAssertTrue(usageError("volume", "7", "-100")?.message.contains("out of range") == true)
        XCTAssertNotNil(usageError("kick", "0"))
        XCTAssertNotNil(usageError("profile", "karaoke"))
        XCTAssertNotNil(usageError("mute", "now"))
        XCTAssertNotNil(usageError("wait"))
        XCTAssertNotNil(usageError("wait", "sleepy"))
        XCTAssertNotNil(usageError("wait", "muted", "--timeout", "soon"))
        XCTAssertNotNil(usageError("events", "--event", "nonsense"))
        XCTAssertNotNil(usageError("--socket"))
        XCTAssertNotNil(usageError("--bogus", "status"))
    }

    func testEverySubcommandHasHelp() {
        for name in Roomctl.subcommandNames {
            let text = Roomctl.help(for: name)
            XCTAssertNotNil(text, name)
            XCTAssertTrue(text?.hasPrefix("usage: roomctl \(name)") == true, name)
            XCTAssertTrue(Roomctl.globalHelp.contains(name), name)
        }
    }

    func testHumanOutput() {
        XCTAssertEqual(Roomctl.formatHuman([:]), "ok")
        XCTAssertEqual(Roomctl.formatHuman(["muted": true, "stage": "on_stage", "net": ["rtt_ms": 12]]),
                       "muted       yes\nnet.rtt_ms  12\nstage       on_stage")
        let table = Roomctl.formatHuman(["participants": [["id": 1, "name": "alice"], ["id": 7, "name": "bob", "muted": true]]])
        XCTAssertEqual(table, "participants:\nID  NAME   MUTED\n1   alice  -\n7   bob    yes")
        XCTAssertEqual(Roomctl.formatEvent(ControlEvent("mute", ["muted": true, "by": "the button"])), "mute by=\"the button\" muted=yes")
    }

    /// Names come from tokens: on the terminal their control characters are shown, not obeyed
    /// (`--json` keeps the raw value).
    func testHumanOutputShowsControlCharactersInsteadOfObeyingThem() {
        let evil = "Eve\n\u{1B}[2J\u{1B}[31mroot"
        let table = Roomctl.formatHuman(["participants": [["id": 3, "name": .string(evil)]]])
        XCTAssertEqual(table, "participants:\nID  NAME\n3   Eve\\n\\x1B[2J\\x1B[31mroot")
        XCTAssertEqual(Roomctl.formatHuman(["room": .string("a\rb")]), "room  a\\rb")
        let event = Roomctl.formatEvent(ControlEvent("participant_joined", ["name": .string(evil)]))
        XCTAssertFalse(event.contains("\n") || event.contains("\u{1B}"), event)
    }

    // MARK: Against a fake daemon

    final class Captured: @unchecked Sendable {
        var out: [String] = []
        var err: [String] = []
        var io: Roomctl.IO { Roomctl.IO(out: { self.out.append($0) }, err: { self.err.append($0) }) }
    }

    func run(_ args: [String], socket: String) -> (Int32, Captured) {
        let c = Captured()
        return (Roomctl.main(args, environment: ["ROOMD_CONTROL_SOCKET": socket], io: c.io), c)
    }

    func withDaemon(_ body: (FakeDaemon) throws -> Void) throws {
        let path = "/tmp/roomctl-cli-\(getpid())-\(UInt32.random(in: 0...UInt32.max)).sock"
        let daemon = try FakeDaemon(path: path)
        defer { daemon.stop(); unlink(path) }
        try body(daemon)
    }

    /// Issue 10: with every slot held by a stuck script, roomctl said "connection to roomd
    /// lost" (exit 69). It now prints roomd's reason and exits 75 (try again).
    func testRefusedConnectionSaysWhyAndExitsTryAgain() throws {
        try withDaemon { d in
            var held: [Int32] = []
            defer { held.forEach { _ = Glibc.close($0) } }
            for _ in 0..<ControlServer.Configuration(path: d.path).maxClientsPerUser {
                let fd = socket(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0)
                var address = sockaddr_un()
                address.sun_family = sa_family_t(AF_UNIX)
                withUnsafeMutableBytes(of: &address.sun_path) { raw in
                    for (i, b) in d.path.utf8.enumerated() { raw[i] = b }
                }
                let rc = withUnsafePointer(to: &address) {
                    $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_un>.size)) }
                }
                XCTAssertEqual(rc, 0)
                held.append(fd)
            }
            sleepMilliseconds(100)   // the fake accepts them on its thread
            let (status, out) = run(["status"], socket: d.path)
            XCTAssertEqual(status, Roomctl.Exit.tryAgain, "\(out.err)")
            XCTAssertTrue(out.err.first?.contains("too_many_clients") == true, "\(out.err)")
            XCTAssertTrue(out.err.first?.contains("per user") == true, "\(out.err)")
            held.forEach { _ = Glibc.close($0) }
            held = []
            sleepMilliseconds(100)
            XCTAssertEqual(run(["status"], socket: d.path).0, Roomctl.Exit.ok, "a slot frees when a holder goes")
        }
    }

    func testExitCodes() throws {
        let (unreachable, u) = run(["status"], socket: "/tmp/no-such-roomd.sock")
        XCTAssertEqual(unreachable, Roomctl.Exit.unavailable)
        XCTAssertTrue(u.err.first?.contains("not reachable") == true)
        XCTAssertEqual(run(["frobnicate"], socket: "/tmp/x").0, Roomctl.Exit.usage)
        XCTAssertEqual(run(["--version"], socket: "/tmp/x").0, Roomctl.Exit.ok)
        try withDaemon { d in
            let (ok, o) = run(["status"], socket: d.path)
            XCTAssertEqual(ok, Roomctl.Exit.ok)
            XCTAssertTrue(o.out.first?.contains("connection  connected") == true, "\(o.out)")
            let (refused, r) = run(["kick", "7", "--reason", "x"], socket: d.path)
            XCTAssertEqual(refused, Roomctl.Exit.refused)
            XCTAssertEqual(r.err, ["roomctl: kick: room_error: only moderators can kick"])
            XCTAssertEqual(run(["leave"], socket: d.path).0, Roomctl.Exit.refused)
            // Issue 27: a server's text was printed raw, escapes and line breaks included.
            let (_, hostile) = run(["deny", "7"], socket: d.path)
            XCTAssertEqual(hostile.err, ["roomctl: deny: room_error: no\\x1B[2J\\n<0>roomd: forged line"])
            let (json, j) = run(["--json", "mute"], socket: d.path)
            XCTAssertEqual(json, Roomctl.Exit.ok)
            XCTAssertEqual(try JSONValue.parse(j.out.first ?? ""), ["id": 1, "ok": true, "result": [:]])
            let (_, p) = run(["participants"], socket: d.path)
            XCTAssertEqual(p.out.first, "participants:\nID  NAME   ROLE      MUTED\n1   alice  streamer  -\n7   bob    audience  yes")
            let (_, v) = run(["volume", "7", "-6"], socket: d.path)
            XCTAssertTrue(v.out.first?.contains("args.db") == true && v.out.first?.contains("-6") == true, "\(v.out)")
            let (version, vv) = run(["version"], socket: d.path)
            XCTAssertEqual(version, 0)
            XCTAssertTrue(vv.out.first?.contains("api") == true)
        }
    }

    func testWait() throws {
        try withDaemon { d in
            // Already true: answered from status at once.
            XCTAssertEqual(run(["wait", "joined", "--timeout", "2"], socket: d.path).0, Roomctl.Exit.ok)
            XCTAssertEqual(run(["wait", "unmuted", "--timeout", "2"], socket: d.path).0, Roomctl.Exit.ok)
            // Never happens: timeout.
            let start = monotonicNanoseconds()
            let (timeout, t) = run(["wait", "muted", "--timeout", "0.3"], socket: d.path)
            XCTAssertEqual(timeout, Roomctl.Exit.timeout)
            XCTAssertGreaterThanOrEqual(monotonicNanoseconds() - start, 300_000_000)
            XCTAssertTrue(t.err.first?.contains("not reached") == true)
            // Becomes true while waiting: the raise-hand is approved 100 ms later.
            XCTAssertEqual(run(["raise-hand"], socket: d.path).0, Roomctl.Exit.ok)
            XCTAssertEqual(run(["wait", "on-stage", "--timeout", "3"], socket: d.path).0, Roomctl.Exit.ok)
        }
    }

    /// `wait on-stage` means heard in the room: while roomd reconnects its stage still reads
    /// on_stage, and the wait must go on (it returned at once: seen under the sanitizers).
    func testOnStageWaitsForTheRoomWhileReconnecting() {
        let reconnecting: [String: JSONValue] = ["connection": "reconnecting", "joined": false, "stage": "on_stage"]
        XCTAssertFalse(Roomctl.WaitCondition.onStage.isMet(status: reconnecting))
        let back: [String: JSONValue] = ["connection": "connected", "joined": true, "stage": "on_stage"]
        XCTAssertTrue(Roomctl.WaitCondition.onStage.isMet(status: back))
        XCTAssertFalse(Roomctl.WaitCondition.onStage.isMet(status: ["connection": "connected", "joined": true, "stage": "hand_raised"]))
    }

    func testWaitSeesAChangeByAnotherClient() throws {
        try withDaemon { d in
            let path = d.path
            let muter = try NativeThread(name: "muter") {
                sleepMilliseconds(150)
                _ = Roomctl.main(["mute"], environment: ["ROOMD_CONTROL_SOCKET": path], io: Roomctl.IO(out: { _ in }, err: { _ in }))
            }
            let (code, c) = run(["wait", "muted", "--timeout", "3"], socket: path)
            muter.join()
            XCTAssertEqual(code, Roomctl.Exit.ok, "\(c.err)")
            XCTAssertEqual(c.out, ["muted"])
        }
    }

    func testEvents() throws {
        try withDaemon { d in
            let path = d.path
            let muter = try NativeThread(name: "events") {
                sleepMilliseconds(150)
                let quiet = Roomctl.IO(out: { _ in }, err: { _ in })
                _ = Roomctl.main(["mute"], environment: ["ROOMD_CONTROL_SOCKET": path], io: quiet)
                _ = Roomctl.main(["unmute"], environment: ["ROOMD_CONTROL_SOCKET": path], io: quiet)
            }
            let (code, c) = run(["events", "--event", "mute", "--count", "2", "--timeout", "3"], socket: path)
            muter.join()
            XCTAssertEqual(code, Roomctl.Exit.ok)
            XCTAssertEqual(c.out, ["mute muted=yes", "mute muted=no"])
            let (timeout, _) = run(["events", "--count", "1", "--timeout", "0.2"], socket: path)
            XCTAssertEqual(timeout, Roomctl.Exit.timeout)
            let (json, j) = run(["--json", "events", "--timeout", "0.2"], socket: path)
            XCTAssertEqual(json, Roomctl.Exit.ok)
            XCTAssertEqual(j.out, [])
        }
    }

    func testBroadcastFromTheDaemonSide() throws {
        try withDaemon { d in
            d.post { state in
                state.server?.broadcast(event: "device", ["kind": "lost"]) // no subscriber yet: nobody gets it
            }
            let client = try ControlClient(path: d.path)
            _ = try client.request("subscribe", ["events": ["device"]])
            d.post { state in state.server?.broadcast(event: "device", ["kind": "lost", "device": "hw:0"]) }
            let event = try client.nextEvent(timeout: .seconds(3))
            XCTAssertEqual(event, ControlEvent("device", ["kind": "lost", "device": "hw:0"]))
            // Requests still work on a subscribed connection; events in between are queued.
            d.post { state in state.server?.broadcast(event: "device", ["kind": "restored"]) }
            XCTAssertEqual(try client.request("status")["room"], "lobby")
            XCTAssertEqual(try client.nextEvent(timeout: .seconds(3))?.fields["kind"], "restored")
            XCTAssertNil(try client.nextEvent(timeout: .milliseconds(50)))
        }
    }

    func testCompletionAndDocsCoverEveryCommand() throws {
        let root = URLPath.packageRoot
        let completion = try Files.readText(root + "/scripts/roomctl-completion.bash")
        let docs = try Files.readText(root + "/docs/control-api.md")
        for name in Roomctl.subcommandNames {
            XCTAssertTrue(completion.contains(" \(name)") || completion.contains("\"\(name)"), "completion lacks \(name)")
        }
        for spec in ControlCommands.all {
            XCTAssertTrue(docs.contains("`\(spec.name)`"), "docs lack \(spec.name)")
        }
        for code in ControlErrorCode.allCases { XCTAssertTrue(docs.contains("`\(code.rawValue)`"), "docs lack \(code.rawValue)") }
        for event in ControlEventName.all { XCTAssertTrue(docs.contains("`\(event)`"), "docs lack event \(event)") }
    }
}

enum URLPath {
    /// The package root, from this file's path (Tests/RoomControlTests/RoomctlTests.swift).
    static var packageRoot: String {
        var parts = "\(#filePath)".split(separator: "/", omittingEmptySubsequences: false)
        parts.removeLast(3)
        return parts.joined(separator: "/")
    }
}
