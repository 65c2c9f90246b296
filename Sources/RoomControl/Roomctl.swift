import RoomBase
import RoomSystem

/// roomctl's command line, parsing and running, kept in the library so tests can call it
/// without starting a process (Sources/roomctl/main.swift is wiring only).
public enum Roomctl {
    /// Exit codes (docs/control-api.md, "roomctl").
    public enum Exit {
        public static let ok: Int32 = 0
        /// The daemon refused the command; its error code is printed.
        public static let refused: Int32 = 1
        public static let usage: Int32 = 2
        /// `wait` (or `events --count`) did not see the condition in time.
        public static let timeout: Int32 = 3
        /// `selftest` ran and found problems (they are printed).
        public static let checkFailed: Int32 = 4
        /// No daemon at the socket, or it stopped answering (EX_UNAVAILABLE).
        public static let unavailable: Int32 = 69
        /// The caller may not open the control socket (EX_NOPERM): the message names the group.
        public static let noPermission: Int32 = 77
        /// roomd is there but cannot serve this connection now (`too_many_clients`, or it
        /// closed the connection as idle: `timeout`): try again later (EX_TEMPFAIL).
        public static let tryAgain: Int32 = 75
    }

    public struct Options: Sendable, Equatable {
        public var socketPath: String
        public var json: Bool
        public init(socketPath: String = defaultControlSocketPath, json: Bool = false) {
            self.socketPath = socketPath
            self.json = json
        }
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

    public enum Action: Sendable, Equatable {
        /// Help on everything (nil) or on one subcommand.
        case help(String?)
        case version
        /// One request; `subcommand` is how the user spelled it (for messages).
        case request(subcommand: String, command: String, arguments: [String: JSONValue])
        /// Follow the event stream: all events (nil) or the named ones; stop after `count`
        /// events or `timeout` seconds when given.
        case events(names: [String]?, levels: Bool, count: Int?, timeout: Double?)
        case wait(WaitCondition, timeout: Double)
    }

    public struct Invocation: Sendable, Equatable {
        public var options: Options
        public var action: Action
    }

    public struct UsageError: Error, Sendable, Equatable, CustomStringConvertible {
        public var message: String
        /// The subcommand whose usage to show (nil: the global one).
        public var subcommand: String?
        public var description: String { message }
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

    // MARK: Subcommands

    struct Positional {
        let argument: ControlArgument
        let optional: Bool
    }

    /// A roomctl subcommand: a control command with its arguments as positionals (required
    /// ones, in table order) and `--options` (optional ones), or one of roomctl's own.
    struct Subcommand {
        let name: String
        let summary: String
        let command: String?
        let positionals: [Positional]
        /// "--to" → argument
        let options: [(flag: String, argument: ControlArgument)]
        let usage: String

        init(spec: ControlCommandSpec) {
            name = spec.name.replacingUnderscores()
            summary = spec.summary
            command = spec.name
            var positionals: [Positional] = []
            var options: [(String, ControlArgument)] = []
            for arg in spec.arguments {
                if arg.required {
                    positionals.append(Positional(argument: arg, optional: false))
                } else if arg.positional {
                    positionals.append(Positional(argument: arg, optional: true))
                } else {
                    options.append(("--" + arg.name.replacingUnderscores(), arg))
                }
            }
            self.positionals = positionals
            self.options = options
            var usage = "roomctl \(name)"
            for o in options { usage += " [\(o.0) \(o.1.name.uppercased())]" }
            if name == "join" { usage += " [--token-file FILE]" }
            for p in positionals { usage += p.optional ? " [\(p.argument.name.uppercased())]" : " \(p.argument.name.uppercased())" }
            self.usage = usage
        }

        init(name: String, summary: String, usage: String) {
            self.name = name
            self.summary = summary
            self.command = nil
            self.positionals = []
            self.options = []
            self.usage = usage
        }

        var help: String {
            var lines = ["usage: \(usage)", "", summary + "."]
            if let command, let spec = ControlCommands.spec(named: command) {
                if !spec.arguments.isEmpty { lines.append("") }
                for p in positionals {
                    lines.append("  \(p.argument.name.uppercased().padded(to: 18)) \(p.argument.help)\(p.optional ? " (optional)" : "")")
                }
                for o in options { lines.append("  \((o.flag + " " + o.argument.name.uppercased()).padded(to: 18)) \(o.argument.help)") }
                if name == "join" {
                    lines.append("  \("--token-file FILE".padded(to: 18)) the join token from FILE, read by roomctl (needed for a server other than the configured one)")
                }
                lines.append("")
                lines.append(spec.access == .control
                    ? "Changes the appliance: needs root or membership in roomd's control group."
                    : "Reads state: anyone who can open the socket.")
            }
            lines.append("")
            lines.append("Global options: --socket PATH, --json, --help.")
            return lines.joined(separator: "\n")
        }
    }

    static let ownSubcommands: [Subcommand] = [
        Subcommand(name: "events", summary: "follow the event stream (one line per event)",
                   usage: "roomctl events [--event NAME]... [--levels] [--count N] [--timeout S]"),
        Subcommand(name: "wait", summary: "wait until the appliance is " + WaitCondition.allCases.map(\.rawValue).joined(separator: " | "),
                   usage: "roomctl wait joined|on-stage|muted|unmuted|connected [--timeout S]"),
        Subcommand(name: "help", summary: "help on roomctl or one subcommand", usage: "roomctl help [SUBCOMMAND]"),
    ]

    static let subcommands: [Subcommand] =
        ControlCommands.all.filter { $0.name != "subscribe" }.map(Subcommand.init(spec:)) + ownSubcommands

    /// Every subcommand name (the bash completion lists the same).
    public static var subcommandNames: [String] { subcommands.map(\.name) }

    static func subcommand(_ name: String) -> Subcommand? { subcommands.first { $0.name == name } }

    public static var globalHelp: String {
        var lines = [
            "usage: roomctl [--socket PATH] [--json] SUBCOMMAND [ARGS]",
            "       roomctl --help | --version | SUBCOMMAND --help",
            "",
            "Controls a running roomd through its control socket (control API \(controlAPIVersion)).",
            "",
            "Subcommands:",
        ]
        for s in subcommands { lines.append("  \(s.name.padded(to: 17)) \(s.summary)") }
        lines += [
            "",
            "Options:",
            "  --socket PATH     control socket (default: $\(controlSocketEnvironmentVariable), else \(defaultControlSocketPath))",
            "  --json            print the daemon's JSON answers / events as they are",
            "  --help, -h        this help; after a subcommand: its help",
            "  --version         roomctl's version",
            "",
            "Exit status: 0 ok, 1 refused by roomd (its error code is printed), 2 usage,",
            "3 timeout (wait, events --count), 4 selftest found problems, 69 roomd not reachable,",
            "75 roomd cannot take the connection now (too many control clients): try again,",
            "77 no permission to open the control socket (the message names the group to join).",
        ]
        return lines.joined(separator: "\n")
    }

    public static func help(for name: String) -> String? { subcommand(name)?.help }

    // MARK: Parsing

    /// Parses roomctl's arguments (without the program name).
    public static func parse(_ arguments: [String], environment: [String: String] = [:]) throws(UsageError) -> Invocation {
        var options = Options(socketPath: environment[controlSocketEnvironmentVariable].flatMap { $0.isEmpty ? nil : $0 } ?? defaultControlSocketPath)
        var helpWanted = false
        var versionWanted = false
        var rest: [String] = []
        var index = 0
        var noMoreOptions = false
        while index < arguments.count {
            let arg = arguments[index]
            index += 1
            if noMoreOptions { rest.append(arg); continue }
            switch arg {
            case "--": noMoreOptions = true; rest.append(arg)
            case "--json": options.json = true
            case "--help", "-h": helpWanted = true
            case "--version" where rest.isEmpty: versionWanted = true
            case "--socket":
                guard index < arguments.count else { throw UsageError(message: "--socket needs a path") }
                options.socketPath = arguments[index]
                index += 1
            default:
                if arg.hasPrefix("--socket=") {
                    options.socketPath = String(arg.dropFirst("--socket=".count))
                } else {
                    rest.append(arg)
                }
            }
        }
        if options.socketPath.isEmpty { throw UsageError(message: "--socket: empty path") }
        if versionWanted { return Invocation(options: options, action: .version) }
        guard let name = rest.first else {
            if helpWanted { return Invocation(options: options, action: .help(nil)) }
            throw UsageError(message: "no subcommand given")
        }
        if name.hasPrefix("-") && name != "--" { throw UsageError(message: "unknown option \(name)") }
        guard let sub = subcommand(name) ?? subcommand(name.replacingUnderscores()) else {
            throw UsageError(message: "unknown subcommand \"\(name)\" (roomctl --help lists them)")
        }
        if helpWanted { return Invocation(options: options, action: .help(sub.name)) }
        let args = Array(rest.dropFirst()).filter { $0 != "--" }
        let action: Action
        switch sub.name {
        case "help":
            guard args.count <= 1 else { throw UsageError(message: "help takes at most one subcommand", subcommand: "help") }
            if let topic = args.first, subcommand(topic) == nil {
                throw UsageError(message: "unknown subcommand \"\(topic)\"", subcommand: "help")
            }
            action = .help(args.first)
        case "events": action = try parseEvents(args)
        case "wait": action = try parseWait(args)
        default: action = try parseRequest(sub, args)
        }
        return Invocation(options: options, action: action)
    }

    private static func looksLikeOption(_ arg: String) -> Bool {
        arg.hasPrefix("-") && arg.count > 1 && Double(arg) == nil
    }

    private static func parseRequest(_ sub: Subcommand, _ args: [String]) throws(UsageError) -> Action {
        var values: [String: JSONValue] = [:]
        var positionals: [String] = []
        var index = 0
        func fail(_ m: String) -> UsageError { UsageError(message: "\(sub.name): \(m)", subcommand: sub.name) }
        while index < args.count {
            let arg = args[index]
            index += 1
            guard looksLikeOption(arg) else { positionals.append(arg); continue }
            var flag = arg
            var inline: String?
            if let eq = arg.firstIndex(of: "=") {
                flag = String(arg[..<eq])
                inline = String(arg[arg.index(after: eq)...])
            }
            if flag == "--token-file", sub.name == "join" {
                // roomctl reads the file (as the person running it), roomd gets the token over
                // the socket: a token on the command line would be in /proc for everyone.
                let path: String
                if let inline { path = inline } else {
                    guard index < args.count else { throw fail("--token-file needs a path") }
                    path = args[index]
                    index += 1
                }
                let token: String
                do { token = String(try Files.readText(path).filter { !$0.isWhitespace }) } catch {
                    throw fail("--token-file: \(error)")
                }
                guard !token.isEmpty else { throw fail("--token-file: \(path) is empty") }
                values["token"] = .string(token)
                continue
            }
            guard let option = sub.options.first(where: { $0.flag == flag }) else {
                throw fail("unknown option \(flag)")
            }
            let text: String
            if let inline { text = inline } else {
                guard index < args.count else { throw fail("\(flag) needs a value") }
                text = args[index]
                index += 1
            }
            values[option.argument.name] = try convert(text, option.argument, sub)
        }
        let required = sub.positionals.filter { !$0.optional }
        let chosen: [Positional]
        if positionals.count == sub.positionals.count {
            chosen = sub.positionals
        } else if positionals.count == required.count {
            chosen = required
        } else if positionals.count < required.count {
            throw fail("missing \(required[positionals.count].argument.name.uppercased()) (usage: \(sub.usage))")
        } else {
            throw fail("too many arguments (usage: \(sub.usage))")
        }
        for (p, text) in zip(chosen, positionals) { values[p.argument.name] = try convert(text, p.argument, sub) }
        guard let command = sub.command, let spec = ControlCommands.spec(named: command) else {
            throw fail("not a daemon command")
        }
        // The daemon checks the same table; checking here turns a range error into a usage
        // error before anything is sent.
        do {
            _ = try ControlRequest.validate(values, spec)
        } catch {
            throw fail(error.message.hasPrefix("args.") ? String(error.message.dropFirst(5)) : error.message)
        }
        return .request(subcommand: sub.name, command: command, arguments: values)
    }

    private static func convert(_ text: String, _ arg: ControlArgument, _ sub: Subcommand) throws(UsageError) -> JSONValue {
        func fail(_ expected: String) -> UsageError {
            UsageError(message: "\(sub.name): \(arg.name.uppercased()): expected \(expected), got \"\(text)\"", subcommand: sub.name)
        }
        switch arg.type {
        case .integer:
            guard let i = Int(text) else { throw fail("an integer") }
            return .int(i)
        case .number:
            guard let d = Double(text), d.isFinite else { throw fail("a number") }
            return d == d.rounded() && abs(d) < 1e15 ? .int(Int(d)) : .double(d)
        case .string: return .string(text)
        case .oneOf(let allowed):
            guard allowed.contains(text) else { throw fail("one of " + allowed.joined(separator: ", ")) }
            return .string(text)
        case .boolean:
            switch text {
            case "true", "yes", "on", "1": return .bool(true)
            case "false", "no", "off", "0": return .bool(false)
            default: throw fail("true or false")
            }
        case .stringList: return .array(text.split(separator: ",").map { .string(String($0)) })
        }
    }

    private static func parseSeconds(_ text: String?, _ sub: String) throws(UsageError) -> Double {
        guard let text, let s = Double(text), s.isFinite, s >= 0 else {
            throw UsageError(message: "\(sub): --timeout needs seconds (a number ≥ 0)", subcommand: sub)
        }
        return s
    }

    /// `--flag=value` as (`--flag`, `value`); anything else as itself with no inline value. Every
    /// subcommand's options take both spellings (`--timeout 3` and `--timeout=3`), as the
    /// request commands and the global `--socket` always did.
    private static func splitInline(_ arg: String) -> (flag: String, inline: String?) {
        guard arg.hasPrefix("--"), let eq = arg.firstIndex(of: "=") else { return (arg, nil) }
        return (String(arg[..<eq]), String(arg[arg.index(after: eq)...]))
    }

    private static func parseEvents(_ args: [String]) throws(UsageError) -> Action {
        var names: [String] = []
        var levels = false
        var count: Int?
        var timeout: Double?
        var index = 0
        var inline: String?
        var flag = ""
        func value() throws(UsageError) -> String {
            if let inline { return inline }
            guard index < args.count else { throw UsageError(message: "events: \(flag) needs a value", subcommand: "events") }
            index += 1
            return args[index - 1]
        }
        while index < args.count {
            let arg = args[index]
            index += 1
            (flag, inline) = splitInline(arg)
            if flag == "--levels", inline != nil {
                throw UsageError(message: "events: --levels takes no value", subcommand: "events")
            }
            switch flag {
            case "--event", "-e":
                for name in try value().split(separator: ",").map(String.init) {
                    guard ControlEventName.all.contains(name) else {
                        throw UsageError(message: "events: unknown event \"\(name)\" (known: \(ControlEventName.all.joined(separator: ", ")))", subcommand: "events")
                    }
                    names.append(name)
                }
            case "--levels": levels = true
            case "--count":
                guard let n = Int(try value()), n > 0 else { throw UsageError(message: "events: --count needs a positive integer", subcommand: "events") }
                count = n
            case "--timeout": timeout = try parseSeconds(try value(), "events")
            default: throw UsageError(message: "events: unexpected argument \(arg)", subcommand: "events")
            }
        }
        return .events(names: names.isEmpty ? nil : names, levels: levels, count: count, timeout: timeout)
    }

    private static func parseWait(_ args: [String]) throws(UsageError) -> Action {
        var condition: WaitCondition?
        var timeout = 30.0
        var index = 0
        while index < args.count {
            let arg = args[index]
            index += 1
            let (flag, inline) = splitInline(arg)
            if flag == "--timeout" {
                var text = inline
                if text == nil, index < args.count {
                    text = args[index]
                    index += 1
                }
                timeout = try parseSeconds(text, "wait")
            } else if let c = WaitCondition(rawValue: arg) ?? WaitCondition(rawValue: arg.replacingUnderscores()), condition == nil {
                condition = c
            } else {
                throw UsageError(message: "wait: unexpected argument \(arg) (conditions: \(WaitCondition.allCases.map(\.rawValue).joined(separator: ", ")))", subcommand: "wait")
            }
        }
        guard let condition else {
            throw UsageError(message: "wait: which condition? (\(WaitCondition.allCases.map(\.rawValue).joined(separator: ", ")))", subcommand: "wait")
        }
        return .wait(condition, timeout: timeout)
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
            io.err("roomctl: \(error.message)")
            if let sub = error.subcommand, let s = subcommand(sub) {
                io.err("usage: \(s.usage)\n(roomctl \(sub) --help for more)")
            } else {
                io.err("usage: roomctl [--socket PATH] [--json] SUBCOMMAND [ARGS] (roomctl --help for more)")
            }
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

    // MARK: Human-readable output

    /// A result object as text: "key  value" lines (nested objects as a.b), arrays of
    /// objects as tables; an empty result as "ok".
    public static func formatHuman(_ result: [String: JSONValue]) -> String {
        if result.isEmpty { return "ok" }
        var pairs: [(String, String)] = []
        var tables: [(String, [[String: JSONValue]])] = []
        func flatten(_ prefix: String, _ o: [String: JSONValue]) {
            for key in o.keys.sorted() {
                let name = inertText(prefix.isEmpty ? key : "\(prefix).\(key)")
                switch o[key]! {
                case .object(let inner) where !inner.isEmpty: flatten(name, inner)
                case .array(let items) where !items.isEmpty && items.allSatisfy({ $0.objectValue != nil }):
                    tables.append((name, items.compactMap(\.objectValue)))
                case let value: pairs.append((name, cell(value)))
                }
            }
        }
        flatten("", result)
        var lines: [String] = []
        let width = pairs.map(\.0.count).max() ?? 0
        for (k, v) in pairs { lines.append("\(k.padded(to: width))  \(v)") }
        for (name, rows) in tables {
            if !lines.isEmpty { lines.append("") }
            lines.append("\(name):")
            lines.append(formatTable(rows))
        }
        return lines.joined(separator: "\n")
    }

    static let preferredColumns = ["id", "name", "role", "stage", "muted", "speaking", "volume_db",
                                   "mic", "level_dbfs", "peak_dbfs", "noise_floor_dbfs", "snr_db", "delay_ms", "correlation", "clipped"]

    public static func formatTable(_ rows: [[String: JSONValue]]) -> String {
        var keys = Set<String>()
        for r in rows { keys.formUnion(r.keys) }
        let columns = preferredColumns.filter(keys.contains) + keys.subtracting(preferredColumns).sorted()
        let cells = rows.map { r in columns.map { r[$0].map(cell) ?? "-" } }
        let widths = columns.indices.map { i in max(inertText(columns[i]).count, cells.map { $0[i].count }.max() ?? 0) }
        func line(_ items: [String]) -> String {
            var text = zip(items, widths).map { $0.padded(to: $1) }.joined(separator: "  ")
            while text.hasSuffix(" ") { text.removeLast() }
            return text
        }
        return ([line(columns.map { inertText($0.uppercased()) })] + cells.map(line)).joined(separator: "\n")
    }

    static func cell(_ value: JSONValue) -> String {
        switch value {
        case .null: "-"
        case .bool(let b): b ? "yes" : "no"
        case .int(let i): "\(i)"
        case .double(let d): formatNumber(d)
        case .string(let s): inertText(s)   // names from tokens: no escape sequences on the terminal
        case .array(let a) where a.allSatisfy({ $0.objectValue == nil && $0.arrayValue == nil }): a.map(cell).joined(separator: ",")
        default: value.jsonText
        }
    }

    /// "event_name key=value key=value"
    public static func formatEvent(_ event: ControlEvent) -> String {
        ([inertText(event.name)] + event.fields.keys.sorted().map { key in
            let v = cell(event.fields[key]!)
            return "\(inertText(key))=\(v.contains(" ") ? "\"\(v)\"" : v)"
        }).joined(separator: " ")
    }

    static func formatNumber(_ d: Double) -> String { shortestNumberText(d) }
}

extension String {
    func padded(to width: Int) -> String {
        count >= width ? self : self + String(repeating: " ", count: width - count)
    }

    func replacingUnderscores() -> String { String(map { $0 == "_" ? "-" : $0 }) }
}
