import Glibc
import RoomBase
import Synchronization

/// Log levels use syslog priorities so journald keeps them (`<3>` error … `<7>` debug) when
/// stderr goes to the journal under systemd.
public enum LogLevel: Int32, Sendable, Comparable, CaseIterable {
    case error = 3, warning = 4, notice = 5, info = 6, debug = 7

    public static func < (a: LogLevel, b: LogLevel) -> Bool { a.rawValue < b.rawValue }

    /// Exactly one of `LogLevelNames.all` (RoomBase), the one set every option, key and
    /// command accepts; nil for anything else.
    public init?(name: String) {
        guard let index = LogLevelNames.all.firstIndex(of: name) else { return nil }
        self = Self.allCases[index]
    }

    /// Its name in `LogLevelNames.all`.
    public var name: String { LogLevelNames.all[Self.allCases.firstIndex(of: self)!] }
}

/// The daemon's one logger. Never call it from the audio loop: it formats strings and
/// writes to a file descriptor, both of which can allocate or block.
public enum Log {
    private static let threshold = Atomic<Int32>(LogLevel.info.rawValue)

    public static var level: LogLevel {
        get { LogLevel(rawValue: threshold.load(ordering: .relaxed)) ?? .info }
        set { threshold.store(newValue.rawValue, ordering: .relaxed) }
    }

    public static func write(_ level: LogLevel, _ message: String) {
        guard level.rawValue <= threshold.load(ordering: .relaxed) else { return }
        // One message, one line: names and ids from tokens and peers go into messages, and a
        // newline or escape sequence in them must not forge a line or reach a terminal raw.
        writeLine("<\(level.rawValue)>\(inertText(message))", to: 2)
    }

    public static func error(_ m: String) { write(.error, m) }
    public static func warning(_ m: String) { write(.warning, m) }
    public static func notice(_ m: String) { write(.notice, m) }
    public static func info(_ m: String) { write(.info, m) }
    public static func debug(_ m: String) { write(.debug, m) }
}

/// Writes a line to standard error without the log prefix: command-line usage errors, which a
/// person reads in a terminal rather than the journal. (The C `stderr` global is not
/// concurrency-safe in Swift 6.)
public func printError(_ text: String) { writeLine(text, to: 2) }

/// Writes a line to standard output unbuffered, so status lines reach a pipe as they happen.
public func printLine(_ text: String) { writeLine(text, to: 1) }

private func writeLine(_ text: String, to fd: Int32) {
    var line = text
    if !line.hasSuffix("\n") { line += "\n" }
    var bytes = Array(line.utf8)
    bytes.withUnsafeMutableBytes { buffer in
        var offset = 0
        while offset < buffer.count {
            let n = retryingEINTR { Glibc.write(fd, buffer.baseAddress! + offset, buffer.count - offset) }
            if n < 0 { return }
            offset += n
        }
    }
}
