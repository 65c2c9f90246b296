import RoomJSON
import RoomSystem

/// roomctl's command line: the option tables, which both parse (RoomSystem's
/// `CommandLineParser`, the one parser of every program: issue 28) and print the help, and the
/// parse into an `Invocation`.
///
/// `roomctl [GLOBAL...] SUBCOMMAND [ARGS...]`: the global options come before the subcommand
/// and, except `--version`, after it too (`roomctl reload --json`); the subcommand's own options
/// and its operands in any order after it; `--` ends the options (`roomctl send-message --
/// -dash-led`); a number is an operand even with its minus (`roomctl volume 7 -6`).
extension Roomctl {
    public struct Options: Sendable, Equatable {
        public var socketPath: String
        public var json: Bool
        public init(socketPath: String = defaultControlSocketPath, json: Bool = false) {
            self.socketPath = socketPath
            self.json = json
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
        public init(options: Options, action: Action) {
            self.options = options
            self.action = action
        }
    }

    // MARK: Tables

    static let socketOption = CommandOption("--socket", "PATH",
                                            help: "control socket (default: $\(controlSocketEnvironmentVariable), else \(defaultControlSocketPath))")
    static let jsonOption = CommandOption("--json", help: "print the daemon's JSON answers / events as they are")
    static let helpOption = CommandOption("--help", aliases: ["-h"], help: "this help; after a subcommand: its help")
    static let versionOption = CommandOption("--version", help: "roomctl's version")
    /// Before the subcommand.
    static let globalOptions = [socketOption, jsonOption, helpOption, versionOption]
    /// After the subcommand too; not `--version` (`roomctl version` asks roomd for its own).
    static let optionsAfterSubcommand = [socketOption, jsonOption, helpOption]

    /// join's option that is roomctl's own: roomctl reads the file (as the person running it),
    /// roomd gets the token over the socket: a token on the command line is in /proc for everyone.
    static let tokenFileOption = CommandOption("--token-file", "FILE",
                                               help: "the join token from FILE, read by roomctl (needed for a server other than the configured one)")

    struct Operand {
        let argument: ControlArgument
        let optional: Bool
    }

    /// A roomctl subcommand: a control command with its arguments as operands (the required
    /// ones and those the table marks positional, in table order) and `--options` (the other
    /// optional ones), or one of roomctl's own. `options` is what parses its command line and
    /// what its help lists.
    struct Subcommand {
        let name: String
        let summary: String
        /// The control command it sends; nil for roomctl's own.
        let command: String?
        /// A control command's arguments taken as operands.
        let operands: [Operand]
        let options: [CommandOption]
        /// Whether it takes operands at all (`events` takes none).
        let takesOperands: Bool
        let usage: String

        init(spec: ControlCommandSpec) {
            name = spec.name.replacingUnderscores()
            summary = spec.summary
            command = spec.name
            operands = spec.arguments.filter { $0.required || $0.positional }.map { Operand(argument: $0, optional: !$0.required) }
            var options = spec.arguments.filter { !$0.required && !$0.positional }.map { arg in
                CommandOption(Self.optionName(arg), arg.name.uppercased(), help: arg.help)
            }
            if spec.name == "join" || spec.name == "listen" { options.append(Roomctl.tokenFileOption) }
            self.options = options
            takesOperands = true
            usage = Self.usage(name, options, operands: operands.map { $0.optional ? "[\($0.argument.name.uppercased())]" : $0.argument.name.uppercased() })
        }

        /// One of roomctl's own. `operands`: how the usage line writes them (nil: it takes none),
        /// before the options when `operandsFirst`.
        init(name: String, summary: String, options: [CommandOption], repeatable: Set<String> = [],
             operands: String?, operandsFirst: Bool = false) {
            self.name = name
            self.summary = summary
            self.command = nil
            self.operands = []
            self.options = options
            takesOperands = operands != nil
            usage = Self.usage(name, options, repeatable: repeatable, operands: operands.map { [$0] } ?? [], operandsFirst: operandsFirst)
        }

        /// `--to` for the argument `to`, `--some-name` for `some_name`.
        static func optionName(_ argument: ControlArgument) -> String { "--" + argument.name.replacingUnderscores() }

        /// `roomctl NAME [--option VALUE]... OPERANDS`, from the tables.
        static func usage(_ name: String, _ options: [CommandOption], repeatable: Set<String> = [], operands: [String],
                          operandsFirst: Bool = false) -> String {
            let optionWords = options.map { "[\(Roomctl.head($0))]" + (repeatable.contains($0.name) ? "..." : "") }
            return (["roomctl", name] + (operandsFirst ? operands + optionWords : optionWords + operands)).joined(separator: " ")
        }

        /// The control argument an option of this subcommand sets.
        func argument(forOption option: String) -> ControlArgument? {
            command.flatMap(ControlCommands.spec(named:))?.arguments.first { Self.optionName($0) == option }
        }

        var help: String {
            var lines = ["usage: \(usage)", "", summary + "."]
            if !operands.isEmpty || !options.isEmpty {
                lines.append("")
                for p in operands {
                    lines.append("  \(p.argument.name.uppercased().padded(to: 18)) \(p.argument.help)\(p.optional ? " (optional)" : "")")
                }
                if !options.isEmpty { lines.append(CommandLineParser.help(options, column: 21)) }
            }
            if let command, let spec = ControlCommands.spec(named: command) {
                lines.append("")
                lines.append(spec.access == .control
                    ? "Changes the appliance: needs root or membership in roomd's control group."
                    : "Reads state: anyone who can open the socket.")
            }
            lines.append("")
            lines.append("Global options: " + Roomctl.optionsAfterSubcommand.map(Roomctl.head).joined(separator: ", ") + ".")
            return lines.joined(separator: "\n")
        }
    }

    /// `--socket PATH`, `--json`: an option as usage lines write it.
    static func head(_ option: CommandOption) -> String { option.name + (option.value.map { " " + $0 } ?? "") }

    static let ownSubcommands: [Subcommand] = [
        Subcommand(name: "events", summary: "follow the event stream (one line per event)", options: [
            CommandOption("--event", "NAME", aliases: ["-e"], help: "only these events, comma-separated or repeated; default: all but levels"),
            CommandOption("--levels", help: "also the audio levels, ten a second"),
            CommandOption("--count", "N", help: "stop after N events (fewer before --timeout: exit status 3)"),
            CommandOption("--timeout", "S", help: "stop after S seconds"),
        ], repeatable: ["--event"], operands: nil),
        Subcommand(name: "wait", summary: "wait until the appliance is " + WaitCondition.allCases.map(\.rawValue).joined(separator: " | "), options: [
            CommandOption("--timeout", "S", help: "give up after S seconds (default 30): exit status 3"),
        ], operands: WaitCondition.allCases.map(\.rawValue).joined(separator: "|"), operandsFirst: true),
        Subcommand(name: "help", summary: "help on roomctl or one subcommand", options: [], operands: "[SUBCOMMAND]"),
    ]

    static let subcommands: [Subcommand] =
        ControlCommands.all.filter { $0.name != "subscribe" }.map(Subcommand.init(spec:)) + ownSubcommands

    /// Every subcommand name (the bash completion lists the same).
    public static var subcommandNames: [String] { subcommands.map(\.name) }

    static func subcommand(_ name: String) -> Subcommand? { subcommands.first { $0.name == name } }

    public static var globalHelp: String {
        let settings = [socketOption, jsonOption].map { "[\(head($0))]" }.joined(separator: " ")
        var lines = [
            "usage: roomctl \(settings) SUBCOMMAND [ARGS]",
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
            CommandLineParser.help(globalOptions, column: 20),
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

    /// Parses roomctl's arguments (without the program name). A usage error's message names
    /// the subcommand it is about (`kick: missing PARTICIPANT ...`).
    public static func parse(_ arguments: [String], environment: [String: String] = [:]) throws(CommandLineUsageError) -> Invocation {
        var options = Options(socketPath: environment[controlSocketEnvironmentVariable].flatMap { $0.isEmpty ? nil : $0 } ?? defaultControlSocketPath)
        let global = try CommandLineParser.parse(arguments, options: globalOptions, stopAtOperand: true)
        try apply(global, to: &options)
        if global.contains(versionOption.name) { return Invocation(options: options, action: .version) }
        guard let name = global.operands.first else {
            if global.contains(helpOption.name) { return Invocation(options: options, action: .help(nil)) }
            throw CommandLineUsageError("no subcommand given")
        }
        guard let sub = subcommand(name) ?? subcommand(name.replacingUnderscores()) else {
            throw CommandLineUsageError("unknown subcommand \"\(name)\" (roomctl --help lists them)")
        }
        // `roomctl --help kick ...`: the help on kick, whatever follows.
        if global.contains(helpOption.name) { return Invocation(options: options, action: .help(sub.name)) }
        // A `--` before the subcommand ended the options for its arguments too.
        let rest = (global.optionsEnded ? ["--"] : []) + global.operands.dropFirst()
        let parsed: ParsedCommandLine
        do {
            parsed = try CommandLineParser.parse(rest, options: sub.options + optionsAfterSubcommand, operands: sub.takesOperands)
        } catch {
            throw CommandLineUsageError("\(sub.name): \(error.message)")
        }
        try apply(parsed, to: &options)
        if parsed.contains(helpOption.name) { return Invocation(options: options, action: .help(sub.name)) }
        let action: Action
        switch sub.name {
        case "help":
            guard parsed.operands.count <= 1 else { throw CommandLineUsageError("help: at most one subcommand") }
            if let topic = parsed.operands.first, subcommand(topic) == nil {
                throw CommandLineUsageError("help: unknown subcommand \"\(topic)\"")
            }
            action = .help(parsed.operands.first)
        case "events": action = try parseEvents(parsed)
        case "wait": action = try parseWait(parsed)
        default: action = try parseRequest(sub, parsed)
        }
        return Invocation(options: options, action: action)
    }

    /// The global options given (before or after the subcommand; the last `--socket` wins).
    private static func apply(_ parsed: ParsedCommandLine, to options: inout Options) throws(CommandLineUsageError) {
        for (name, value) in parsed.options {
            switch name {
            case socketOption.name: options.socketPath = value ?? ""
            case jsonOption.name: options.json = true
            default: break
            }
        }
        if options.socketPath.isEmpty { throw CommandLineUsageError("--socket: empty path") }
    }

    private static func parseRequest(_ sub: Subcommand, _ parsed: ParsedCommandLine) throws(CommandLineUsageError) -> Action {
        var values: [String: JSONValue] = [:]
        func fail(_ m: String) -> CommandLineUsageError { CommandLineUsageError("\(sub.name): \(m)") }
        for (name, value) in parsed.options {
            guard let text = value else { continue }
            if name == tokenFileOption.name, sub.options.contains(tokenFileOption) {
                let token: String
                do { token = String(try Files.readText(text).filter { !$0.isWhitespace }) } catch {
                    throw fail("--token-file: \(error)")
                }
                guard !token.isEmpty else { throw fail("--token-file: \(text) is empty") }
                values["token"] = .string(token)
            } else if let argument = sub.argument(forOption: name) {
                values[argument.name] = try convert(text, argument, sub)
            }
        }
        let positionals = parsed.operands
        let required = sub.operands.filter { !$0.optional }
        let chosen: [Operand]
        if positionals.count == sub.operands.count {
            chosen = sub.operands
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

    private static func convert(_ text: String, _ arg: ControlArgument, _ sub: Subcommand) throws(CommandLineUsageError) -> JSONValue {
        func fail(_ expected: String) -> CommandLineUsageError {
            CommandLineUsageError("\(sub.name): \(arg.name.uppercased()): expected \(expected), got \"\(text)\"")
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

    private static func parseSeconds(_ text: String?, _ sub: String) throws(CommandLineUsageError) -> Double {
        guard let text, let s = Double(text), s.isFinite, s >= 0 else {
            throw CommandLineUsageError("\(sub): --timeout needs seconds (a number ≥ 0)")
        }
        return s
    }

    private static func parseEvents(_ parsed: ParsedCommandLine) throws(CommandLineUsageError) -> Action {
        var names: [String] = []
        var levels = false
        var count: Int?
        var timeout: Double?
        for (option, value) in parsed.options {
            switch option {
            case "--event":
                for name in (value ?? "").split(separator: ",").map(String.init) {
                    guard ControlEventName.all.contains(name) else {
                        throw CommandLineUsageError("events: unknown event \"\(name)\" (known: \(ControlEventName.all.joined(separator: ", ")))")
                    }
                    names.append(name)
                }
            case "--levels": levels = true
            case "--count":
                guard let n = value.flatMap({ Int($0) }), n > 0 else { throw CommandLineUsageError("events: --count needs a positive integer") }
                count = n
            case "--timeout": timeout = try parseSeconds(value, "events")
            default: break // a global option
            }
        }
        return .events(names: names.isEmpty ? nil : names, levels: levels, count: count, timeout: timeout)
    }

    private static func parseWait(_ parsed: ParsedCommandLine) throws(CommandLineUsageError) -> Action {
        let conditions = WaitCondition.allCases.map(\.rawValue).joined(separator: ", ")
        var condition: WaitCondition?
        for word in parsed.operands {
            guard condition == nil, let c = WaitCondition(rawValue: word) ?? WaitCondition(rawValue: word.replacingUnderscores()) else {
                throw CommandLineUsageError("wait: unexpected argument '\(word)' (conditions: \(conditions))")
            }
            condition = c
        }
        var timeout = 30.0
        for (option, value) in parsed.options where option == "--timeout" { timeout = try parseSeconds(value, "wait") }
        guard let condition else { throw CommandLineUsageError("wait: which condition? (\(conditions))") }
        return .wait(condition, timeout: timeout)
    }
}

extension String {
    func replacingUnderscores() -> String { String(map { $0 == "_" ? "-" : $0 }) }
}
