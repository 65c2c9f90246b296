import Glibc

/// One option of a program's command line: the table a program's parsing and its `--help`
/// text both come from, so the two cannot disagree (issue 28: five hand-written parsers had
/// five habits — only roomctl took `--opt=value`, usage errors exited 2 in three and 64 in two).
public struct CommandOption: Sendable, Equatable {
    /// `--name`, with its dashes.
    public let name: String
    /// Other spellings (`-h` for `--help`).
    public let aliases: [String]
    /// The value's placeholder in the help (`PCT`), nil for a flag.
    public let value: String?
    /// The help text, wrapped by the caller's line breaks.
    public let help: String

    public init(_ name: String, _ value: String? = nil, aliases: [String] = [], help: String) {
        self.name = name
        self.aliases = aliases
        self.value = value
        self.help = help
    }
}

/// A command line that does not parse: the message says which option and why, in the shape
/// every program prints (`PROGRAM: MESSAGE`, then how to get help) and exits with
/// `CommandLineUsageError.exitCode`.
public struct CommandLineUsageError: Error, Equatable, CustomStringConvertible {
    public let message: String
    /// 2, as GNU programs and POSIX utilities use for a usage error (sysexits' 64 was the odd one).
    public static let exitCode: Int32 = ExitStatus.usage

    public init(_ message: String) { self.message = message }
    public var description: String { message }

    /// What the program prints on standard error.
    public func text(program: String) -> String { "\(program): \(message)\nTry '\(program) --help' for the options." }

    /// Prints `text(program:)` on standard error and exits with `exitCode`.
    public func exit(program: String) -> Never {
        printError(text(program: program))
        Glibc.exit(Self.exitCode)
    }
}

/// The options and operands of one command line, in the order given.
public struct ParsedCommandLine: Sendable {
    /// Each option given, by its `name` (an alias is reported under the name), with its value.
    public var options: [(name: String, value: String?)]
    /// Arguments that are not options, and everything after `--`.
    public var operands: [String]
    /// Whether a `--` ended the options (with `stopAtOperand`: before the first operand, so a
    /// subcommand's own parse must not read options from `operands` either).
    public var optionsEnded = false

    /// Whether the option `name` was given (`--help`, `--version`: answered before the rest).
    public func contains(_ name: String) -> Bool { options.contains { $0.name == name } }
}

/// GNU conventions: `--opt value` and `--opt=value`, `--` ends the options, options and
/// operands in any order, a value may start with a dash (`--gain -3`), a flag given a value
/// (`--help=yes`) and an unknown option are errors naming them. A number is an operand even with
/// its minus sign (`volume -6`), as in Python's argparse, unless the table has an option that
/// looks like one. No clustered short flags: no program here has more than `-h`.
public enum CommandLineParser {
    /// `operands`: whether arguments that are not options are allowed (else each is an error).
    /// `stopAtOperand`: a program with subcommands (`roomctl [--json] status ...`): the first
    /// operand ends the options, and it and everything after it are `operands`, unparsed, for
    /// the subcommand's own table (implies `operands`).
    public static func parse(_ arguments: [String], options: [CommandOption], operands allowed: Bool = false,
                             stopAtOperand: Bool = false)
        throws(CommandLineUsageError) -> ParsedCommandLine {
        var result = ParsedCommandLine(options: [], operands: [])
        let numbersAreOptions = options.contains { o in ([o.name] + o.aliases).contains(where: isNumber) }
        var i = 0
        while i < arguments.count {
            let argument = arguments[i]
            i += 1
            if argument == "--" {
                result.operands += arguments[i...]
                result.optionsEnded = true
                break
            }
            guard argument.hasPrefix("-"), argument != "-", numbersAreOptions || !isNumber(argument) else {
                if stopAtOperand {
                    result.operands += arguments[(i - 1)...]
                    break
                }
                guard allowed else { throw CommandLineUsageError("unexpected argument '\(argument)'") }
                result.operands.append(argument)
                continue
            }
            let (spelled, attached): (String, String?) = {
                guard argument.hasPrefix("--"), let eq = argument.firstIndex(of: "=") else { return (argument, nil) }
                return (String(argument[..<eq]), String(argument[argument.index(after: eq)...]))
            }()
            guard let option = options.first(where: { $0.name == spelled || $0.aliases.contains(spelled) }) else {
                throw CommandLineUsageError("unknown option '\(spelled)'")
            }
            guard let placeholder = option.value else {
                if attached != nil { throw CommandLineUsageError("\(option.name) takes no value") }
                result.options.append((option.name, nil))
                continue
            }
            if let attached {
                result.options.append((option.name, attached))
            } else {
                guard i < arguments.count else { throw CommandLineUsageError("\(option.name) needs \(placeholder)") }
                result.options.append((option.name, arguments[i]))
                i += 1
            }
        }
        return result
    }

    /// `-6`, `-0.5`, `-1e3`: what `Double` reads (roomctl's `volume -6` always took it so).
    private static func isNumber(_ argument: String) -> Bool { Double(argument) != nil }

    /// The options part of `--help`: one option per entry, `-h, --name VALUE` (the aliases
    /// first, as GNU programs print them) in a column of `column` characters, the help beside it
    /// (its own line breaks continue under it), or on the next line when the head leaves less
    /// than two spaces. The aliases come from the table, so the help cannot forget one.
    public static func help(_ options: [CommandOption], column: Int = 23) -> String {
        options.map { o in
            let head = "  " + (o.aliases + [o.name]).joined(separator: ", ") + (o.value.map { " " + $0 } ?? "")
            let lines = o.help.split(separator: "\n", omittingEmptySubsequences: false)
            let pad = String(repeating: " ", count: column)
            // At least two spaces between the head and its help, else the help goes under it.
            let first = head.count + 2 <= column ? head + String(repeating: " ", count: column - head.count) + lines[0]
                                                 : head + "\n" + pad + lines[0]
            return ([first] + lines.dropFirst().map { pad + $0 }).joined(separator: "\n")
        }.joined(separator: "\n")
    }
}
