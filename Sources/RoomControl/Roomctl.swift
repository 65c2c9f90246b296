import RoomBase
import RoomJSON
import RoomSystem

/// roomctl: the request/response driver, kept in the library so tests can call it without
/// starting a process (Sources/roomctl/main.swift is wiring only). Its command line is in
/// RoomctlCommandLine.swift, its human-readable output in RoomctlOutput.swift.
public enum Roomctl {
    /// Exit codes (docs/control-api.md, "roomctl").
    public enum Exit {
        public static let ok: Int32 = 0
        /// The daemon refused the command; its error code is printed.
        public static let refused: Int32 = 1
        /// A command line that does not parse: the same status and message shape as every
        /// program here (`CommandLineUsageError`).
        public static let usage: Int32 = CommandLineUsageError.exitCode
        /// `wait` (or `events --count`) did not see the condition in time.
        public static let timeout: Int32 = 3
        /// `selftest` ran and found problems (they are printed).
        public static let checkFailed: Int32 = 4
        /// No daemon at the socket, or it stopped answering (EX_UNAVAILABLE).
        public static let unavailable: Int32 = ExitStatus.unavailable
        /// The caller may not open the control socket (EX_NOPERM): the message names the group.
        public static let noPermission: Int32 = ExitStatus.noPermission
        /// roomd is there but cannot serve this connection now (`too_many_clients`, or it
        /// closed the connection as idle: `timeout`): try again later (EX_TEMPFAIL).
        public static let tryAgain: Int32 = ExitStatus.tryAgain
    }

    public enum WaitCondition: String, Sendable, Equatable, CaseIterable {
        case joined
        case onStage = "on-stage"
        case muted
        case unmuted
        case connected

        /// Whether a `status` result meets the condition (the fields roomd's status must
        /// carry: docs/control-api.md, "status").
        public func isMet(status: [String: JSONValue]) -> Bool {
            let connected = status["connection"]?.stringValue == "connected"
            let joined = status["joined"]?.boolValue ?? connected
            switch self {
            case .connected: return connected
            case .joined: return joined
            // On stage *in the room*: while roomd reconnects its stage still reads on_stage (the
            // seat is held for the grace), but nobody hears it until it is back.
            case .onStage: return status["stage"]?.stringValue == "on_stage" && joined
            case .muted: return status["muted"]?.boolValue == true
            case .unmuted: return status["muted"]?.boolValue == false
            }
        }
    }

    /// Where output goes (tests capture it).
    public struct IO {
        public var out: (String) -> Void
        public var err: (String) -> Void
        public init(out: @escaping (String) -> Void, err: @escaping (String) -> Void) {
            self.out = out
            self.err = err
        }
        public static var standard: IO { IO(out: { printLine($0) }, err: { printError($0) }) }
    }

    // MARK: Running

    /// Parses and runs; returns the exit status. `versionLine` is what `--version` prints (the
    /// executable passes its build's line, with the git commit).
    public static func main(_ arguments: [String], environment: [String: String], io: IO = .standard,
                            versionLine: String = "roomctl \(roomdVersion) (control API \(controlAPIVersion))") -> Int32 {
        let invocation: Invocation
        do {
            invocation = try parse(arguments, environment: environment)
        } catch {
            io.err(error.text(program: "roomctl"))
            return Exit.usage
        }
        return run(invocation, io: io, versionLine: versionLine)
    }

    public static func run(_ invocation: Invocation, io: IO = .standard, connectTimeout: Duration = .seconds(3),
                           versionLine: String = "roomctl \(roomdVersion) (control API \(controlAPIVersion))") -> Int32 {
        let options = invocation.options
        switch invocation.action {
        case .help(nil):
            io.out(globalHelp)
            return Exit.ok
        case .help(let topic?):
            io.out(help(for: topic) ?? globalHelp)
            return Exit.ok
        case .version:
            io.out(versionLine)
            return Exit.ok
        default: break
        }
        let client: ControlClient
        do {
            client = try ControlClient(path: options.socketPath, timeout: connectTimeout)
        } catch {
            if case .permissionDenied(let m) = error {
                io.err("roomctl: \(m)")
                return Exit.noPermission
            }
            io.err("roomctl: roomd is not reachable: \(error)")
            return Exit.unavailable
        }
        defer { client.close() }
        switch invocation.action {
        case .request(let sub, let command, let arguments):
            return runRequest(client, sub, command, arguments, options, io)
        case .events(let names, let levels, let count, let timeout):
            return runEvents(client, names, levels, count, timeout, options, io)
        case .wait(let condition, let timeout):
            return runWait(client, condition, timeout, options, io)
        case .help, .version:
            return Exit.ok
        }
    }

    private static func failure(_ error: ControlClientError, _ what: String, _ io: IO) -> Int32 {
        switch error {
        case .refused(let e):
            // The message may carry a server's or Janus's own text: inert on a terminal.
            io.err("roomctl: \(what): \(e.codeText): \(inertText(e.message))")
            return e.code == .tooManyClients || e.code == .timeout ? Exit.tryAgain : Exit.refused
        case .timeout(let m):
            io.err("roomctl: \(what): roomd did not answer (\(m))")
            return Exit.unavailable
        case .unreachable(let m):
            io.err("roomctl: \(what): \(m)")
            return Exit.unavailable
        case .permissionDenied(let m):
            io.err("roomctl: \(what): \(m)")
            return Exit.noPermission
        case .protocolError(let m):
            io.err("roomctl: \(what): \(m)")
            return Exit.unavailable
        }
    }

    private static func runRequest(_ client: ControlClient, _ sub: String, _ command: String, _ arguments: [String: JSONValue],
                                   _ options: Options, _ io: IO) -> Int32 {
        if options.json {
            do {
                let answer = try client.requestRaw(command, arguments, timeout: requestTimeout(command))
                io.out(answer.jsonText)
                if answer["ok"]?.boolValue == true { return outcome(command, answer["result"]?.objectValue ?? [:]) }
                if let e = answer["error"].flatMap(ControlError.init(json:)) { io.err("roomctl: \(sub): \(e.codeText): \(inertText(e.message))") }
                return Exit.refused
            } catch {
                return failure(error, sub, io)
            }
        }
        do {
            let result = try client.request(command, arguments, timeout: requestTimeout(command))
            io.out(formatHuman(result))
            return outcome(command, result)
        } catch {
            return failure(error, sub, io)
        }
    }

    /// A self-test that found problems is a failure for a rig script, though roomd answered ok.
    private static func outcome(_ command: String, _ result: [String: JSONValue]) -> Int32 {
        command == "selftest" && result["passed"]?.boolValue == false ? Exit.checkFailed : Exit.ok
    }

    /// The self-test plays for about 3 s and is analysed after: give it longer than a command.
    private static func requestTimeout(_ command: String) -> Duration {
        command == "selftest" ? .seconds(30) : .seconds(10)
    }

    private static func remaining(_ deadline: UInt64?) -> Duration? {
        guard let deadline else { return nil }
        let now = monotonicNanoseconds()
        return .nanoseconds(Int64(deadline > now ? deadline - now : 0))
    }

    private static func deadline(_ seconds: Double?) -> UInt64? {
        seconds.map { monotonicNanoseconds() + UInt64($0 * 1e9) }
    }

    private static func runEvents(_ client: ControlClient, _ names: [String]?, _ levels: Bool, _ count: Int?, _ timeout: Double?,
                                  _ options: Options, _ io: IO) -> Int32 {
        var args: [String: JSONValue] = [:]
        if let names { args["events"] = .array(names.map(JSONValue.string)) }
        if levels { args["levels"] = true }
        do {
            _ = try client.request("subscribe", args)
        } catch {
            return failure(error, "events", io)
        }
        let end = deadline(timeout)
        var seen = 0
        while count.map({ seen < $0 }) ?? true {
            let event: ControlEvent?
            do {
                event = try client.nextEvent(timeout: remaining(end))
            } catch {
                return failure(error, "events", io)
            }
            guard let event else { return count == nil ? Exit.ok : Exit.timeout }
            seen += 1
            io.out(options.json ? event.json.jsonText : formatEvent(event))
        }
        return Exit.ok
    }

    private static func runWait(_ client: ControlClient, _ condition: WaitCondition, _ timeout: Double,
                                _ options: Options, _ io: IO) -> Int32 {
        // Subscribe first, then read the status: a change between the two is not missed.
        let end = deadline(timeout)!
        do {
            _ = try client.request("subscribe", ["events": ["connection", "joined", "stage", "mute", "removed"]])
            while true {
                let status = try client.request("status")
                if condition.isMet(status: status) {
                    io.out(options.json ? JSONValue.object(status).jsonText : condition.rawValue)
                    return Exit.ok
                }
                // Any relevant event: read the status again (it is the one source of truth).
                guard try client.nextEvent(timeout: remaining(end)) != nil else {
                    io.err("roomctl: wait \(condition.rawValue): not reached within \(formatNumber(timeout)) s")
                    return Exit.timeout
                }
                while try client.nextEvent(timeout: .zero) != nil {} // coalesce a burst
            }
        } catch {
            return failure(error, "wait", io)
        }
    }
}
