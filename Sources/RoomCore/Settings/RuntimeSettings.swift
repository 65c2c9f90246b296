/// Settings people change while roomd runs (roomctl, the mute button), kept in
/// `<state directory>/settings.conf` so a restart or a power cut loses none of them.
///
/// Precedence, from strongest: command line, these settings, the configuration file, defaults.
/// A reload that changes a key in the configuration file drops the run-time value of that key:
/// the installer's latest edit wins over an older roomctl command (docs/config.md).
public struct RuntimeSettings: Sendable, Equatable {
    public var volumeDB: Double?
    public var profile: AudioProfile?
    public var logLevel: String?
    /// Self mute: a room that muted the appliance expects it to come back muted.
    public var muted: Bool?

    public init(volumeDB: Double? = nil, profile: AudioProfile? = nil, logLevel: String? = nil, muted: Bool? = nil) {
        self.volumeDB = volumeDB
        self.profile = profile
        self.logLevel = logLevel
        self.muted = muted
    }

    public var isEmpty: Bool { self == RuntimeSettings() }

    public static let fileName = "settings.conf"

    static let schema: [(name: String, keys: [String])] = [
        ("audio", ["volume_db", "profile"]),
        ("log", ["level"]),
        ("room", ["muted"]),
    ]

    /// Reads a settings file. It is roomd's own file, but a person may have edited it: the same
    /// checks and `file:line` errors as the configuration file.
    public static func parse(text: String, file: String) throws(ConfigError) -> RuntimeSettings {
        let values = ConfigValues(entries: try INIParser.parse(text: text, file: file), file: file)
        try values.checkNames(sections: schema)
        var s = RuntimeSettings()
        s.volumeDB = try ApplianceConfiguration.number(values, "audio.volume_db", in: ApplianceConfiguration.volumeRange)
        if let p = try ApplianceConfiguration.oneOf(values, "audio.profile", AudioProfile.allCases.map(\.rawValue)) {
            s.profile = AudioProfile(rawValue: p)
        }
        s.logLevel = try ApplianceConfiguration.oneOf(values, "log.level", ApplianceConfiguration.logLevels)
        s.muted = try values.yesNo("room.muted")
        return s
    }

    /// The file's text; `parse(text:)` reads it back to an equal value.
    public func serialized() -> String {
        var lines = [
            "# Written by roomd: settings changed at run time (roomctl, buttons). They override",
            "# roomd.conf until that key changes there; delete this file to forget them all.",
        ]
        if volumeDB != nil || profile != nil {
            lines.append("[audio]")
            if let volumeDB { lines.append("volume_db = \(Self.format(volumeDB))") }
            if let profile { lines.append("profile = \(profile.rawValue)") }
        }
        if let logLevel { lines += ["[log]", "level = \(logLevel)"] }
        if let muted { lines += ["[room]", "muted = \(muted ? "yes" : "no")"] }
        return lines.joined(separator: "\n") + "\n"
    }

    /// Shortest text that reads back to the same Double (Swift's description does that).
    static func format(_ v: Double) -> String {
        v == v.rounded() && abs(v) < 1e15 ? String(Int(v)) : "\(v)"
    }

    /// Drops the run-time values of keys the configuration file has just changed.
    public mutating func forget(changedConfigurationKeys keys: [String]) {
        if keys.contains("audio.volume_db") { volumeDB = nil }
        if keys.contains("audio.profile") { profile = nil }
        if keys.contains("log.level") { logLevel = nil }
    }
}
