import Glibc
import RoomSystem

/// Which way a datagram travels: `up` client → server, `down` server → client.
enum Direction: Int, CaseIterable {
    case up = 0, down = 1
    var name: String { self == .up ? "up" : "down" }
}

/// What `roomproxy` does to the datagrams of one direction. Percentages are 0 … 100.
struct Impairment: Equatable {
    var lossPct = 0.0
    var baseDelayMs = 0.0
    var jitterMs = 0.0
    var reorderPct = 0.0
    var duplicatePct = 0.0

    static let none = Impairment()
    var isNone: Bool { self == .none }
    /// True when datagrams are never held (no delay and no reordering): they go out at once.
    var isImmediate: Bool { baseDelayMs == 0 && jitterMs == 0 && reorderPct == 0 }
}

struct ProxyOptions {
    var listenHost = "127.0.0.2"
    var server: SocketAddress?
    var mediaPort: UInt16?
    var impairment = Impairment()
    var directions: Set<Direction> = [.up, .down]
    var seed: UInt64?
    var statsInterval: Double = 0
    var maxHoldMs = 50.0
    var flowIdleSeconds = 30.0
    var logLevel = LogLevel.notice
    /// A file whose line (impairment options, as on the command line) replaces the impairment
    /// while the proxy runs; read and removed when it appears.
    var controlPath: String?

    func impairment(_ d: Direction) -> Impairment { directions.contains(d) ? impairment : .none }

    /// The options that say what happens to the datagrams: on the command line, and in a
    /// `--control` file's line at run time.
    static let impairmentOptions: [CommandOption] = [
        CommandOption("--loss", "PCT", help: "drop each datagram with probability PCT % (default 0)"),
        CommandOption("--jitter-ms", "MS", help: "add a uniform random 0 … 2×MS ms to each datagram's delay, i.e.\n±MS around the mean (default 0); reorders when delays differ"),
        CommandOption("--delay-ms", "MS", help: "fixed base delay added to every datagram (default 0)"),
        CommandOption("--reorder", "PCT", help: "hold a datagram with probability PCT % and send it after the\nnext one of its flow and direction (an adjacent swap; default 0)"),
        CommandOption("--duplicate", "PCT", help: "send a datagram twice with probability PCT %; the copy gets its\nown delay (default 0)"),
        CommandOption("--direction", "D", help: "up (client → server), down (server → client) or both (default)"),
    ]

    /// The command line: parsing and `--help` both come from this table.
    static let options: [CommandOption] = [
        CommandOption("--listen", "HOST", help: "address to listen on (default 127.0.0.2; all of 127/8 is loopback)"),
        CommandOption("--server", "HOST:PORT", help: "roomserver's signalling address (numeric)"),
        CommandOption("--media-port", "PORT", help: "roomserver's UDP media port (on the server's host)"),
    ] + impairmentOptions + [
        CommandOption("--control", "FILE", help: "while running, when FILE appears: read its line of impairment\noptions (--loss 8 --delay-ms 150; empty: none), which replace\nthe impairment, and remove it (write it with mv: atomically)"),
        CommandOption("--seed", "N", help: "seed of the random decisions (default: from the clock; printed)"),
        CommandOption("--stats", "SECONDS", help: "print the counters as a JSON line every SECONDS (default: only\non SIGINT/SIGTERM)"),
        CommandOption("--max-hold-ms", "MS", help: "longest a --reorder hold waits for a next datagram (default 50)"),
        CommandOption("--log-level", "LEVEL", help: "error, warning, notice, info or debug (default notice)"),
        CommandOption("--help", aliases: ["-h"], help: "print this help and exit"),
    ]

    static let usage = """
    usage: roomproxy --server HOST:PORT --media-port PORT [options]

    A relay between roomd and roomserver that injects network impairment into the media.
    Listens on LISTEN with the server's own port numbers: TCP on PORT (signalling, relayed
    byte for byte) and UDP on the media port (relayed per client with impairment). Point
    roomd at LISTEN:PORT instead of the server; its media follows, since a client sends media
    to its signalling host and the udp_port of the welcome.

    """ + "\n" + CommandLineParser.help(options, column: 25)

    enum Parsed { case run(ProxyOptions), exit(String, Int32) }

    static func parse(_ args: [String]) -> Parsed {
        do throws(CommandLineUsageError) {
            let parsed = try CommandLineParser.parse(args, options: options)
            if parsed.contains("--help") { return .exit(usage, 0) }
            return .run(try settings(parsed))
        } catch {
            return .exit(error.text(program: "roomproxy"), CommandLineUsageError.exitCode)
        }
    }

    /// The parsed options as settings; a value out of range is a usage error naming the option.
    private static func settings(_ parsed: ParsedCommandLine) throws(CommandLineUsageError) -> ProxyOptions {
        var o = ProxyOptions()
        for (name, value) in parsed.options {
            let v = value ?? ""
            switch name {
            case "--listen":
                guard (try? SocketAddress(ip: v, port: 0)) != nil else { throw CommandLineUsageError("--listen needs a numeric IP address") }
                o.listenHost = v
            case "--server":
                do { o.server = try SocketAddress(parsing: v) } catch { throw CommandLineUsageError("--server: \(error)") }
            case "--media-port":
                guard let p = UInt16(v), p > 0 else { throw CommandLineUsageError("--media-port needs a port 1-65535") }
                o.mediaPort = p
            case "--loss", "--reorder", "--duplicate", "--jitter-ms", "--delay-ms", "--direction":
                try applyImpairment(name, v, to: &o.impairment, directions: &o.directions)
            case "--max-hold-ms": o.maxHoldMs = try number(v, name, 1 ... 10_000, "1-10000 ms")
            case "--control": o.controlPath = v
            case "--seed":
                guard let seed = UInt64(v) else { throw CommandLineUsageError("--seed needs a non-negative integer") }
                o.seed = seed
            case "--stats": o.statsInterval = try number(v, name, Double.leastNonzeroMagnitude ... Double.greatestFiniteMagnitude, "seconds > 0")
            case "--log-level":
                guard let level = LogLevel(name: v) else { throw CommandLineUsageError("--log-level is error, warning, notice, info or debug") }
                o.logLevel = level
            default: break
            }
        }
        guard o.server != nil else { throw CommandLineUsageError("--server HOST:PORT is required") }
        if o.controlPath?.isEmpty == true { throw CommandLineUsageError("--control needs a file name") }
        guard o.mediaPort != nil else { throw CommandLineUsageError("--media-port PORT is required") }
        return o
    }

    private static func number(_ v: String, _ name: String, _ range: ClosedRange<Double>, _ what: String) throws(CommandLineUsageError) -> Double {
        guard let d = Double(v), d.isFinite, range.contains(d) else { throw CommandLineUsageError("\(name) needs \(what)") }
        return d
    }

    /// One impairment option into `impairment` and `directions`.
    private static func applyImpairment(_ name: String, _ v: String, to im: inout Impairment,
                                        directions: inout Set<Direction>) throws(CommandLineUsageError) {
        switch name {
        case "--loss": im.lossPct = try number(v, name, 0 ... 100, "a percentage 0-100")
        case "--reorder": im.reorderPct = try number(v, name, 0 ... 100, "a percentage 0-100")
        case "--duplicate": im.duplicatePct = try number(v, name, 0 ... 100, "a percentage 0-100")
        case "--jitter-ms": im.jitterMs = try number(v, name, 0 ... 10_000, "0-10000 ms")
        case "--delay-ms": im.baseDelayMs = try number(v, name, 0 ... 10_000, "0-10000 ms")
        case "--direction":
            switch v {
            case "up": directions = [.up]
            case "down": directions = [.down]
            case "both": directions = [.up, .down]
            default: throw CommandLineUsageError("--direction is up, down or both")
            }
        default: break
        }
    }

    /// A `--control` file's line: the impairment it sets (options not given are 0) and the
    /// directions (`--direction`, else those the proxy started with).
    static func controlImpairment(_ line: String, directions start: Set<Direction>)
        throws(CommandLineUsageError) -> (Impairment, Set<Direction>) {
        let words = line.split(whereSeparator: { $0 == " " || $0 == "\t" || $0 == "\n" || $0 == "\r" }).map(String.init)
        let parsed = try CommandLineParser.parse(words, options: impairmentOptions)
        var im = Impairment(), directions = start
        for (name, value) in parsed.options { try applyImpairment(name, value ?? "", to: &im, directions: &directions) }
        return (im, directions)
    }
}
