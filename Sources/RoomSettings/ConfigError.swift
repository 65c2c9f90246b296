/// A problem in a configuration file, located as precisely as the parser knows.
///
/// Every config file roomd reads (board profiles today, others later) reports through this
/// one type, so a user always gets the same shape of message that editors and CI logs can
/// jump to: `file:line: section.key: what is wrong`.
public struct ConfigError: Error, CustomStringConvertible, Sendable, Equatable {
    public let file: String
    /// 1-based line, or nil when the problem is about something missing.
    public let line: Int?
    /// `section.key`, or nil when the problem is not about one key (a malformed line).
    public let key: String?
    public let message: String

    public init(file: String, line: Int?, key: String?, message: String) {
        self.file = file
        self.line = line
        self.key = key
        self.message = message
    }

    /// `board/sim/board.conf:14: audio.rate: 44100 is not supported (8000, 16000, 32000 or 48000)`
    public var description: String {
        var s = file
        if let line { s += ":\(line)" }
        s += ": "
        if let key { s += key + ": " }
        return s + message
    }
}
