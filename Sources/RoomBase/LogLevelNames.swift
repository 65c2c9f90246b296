/// The log levels by name, in order of priority (syslog's err … debug): the one set every
/// way of choosing a level accepts — roomd's `log.level` and `--log-level`, the control API's
/// `log_level`, roomserver's `server.log_level` and `--log-level` — exactly, lower case, no
/// aliases. (Aliases such as "warn" and "err" were taken on some command lines and refused
/// in the files: one spelling that works everywhere is easier to document and to script.)
public enum LogLevelNames {
    public static let all = ["error", "warning", "notice", "info", "debug"]

    /// "error, warning, notice, info or debug", for messages.
    public static var choices: String { choiceList(all) }

    /// The message for a refused level, naming the field: `--log-level: "warn" is not error, …`.
    public static func refusal(_ field: String, _ text: String) -> String {
        "\(field): \"\(text)\" is not \(choices)"
    }
}
