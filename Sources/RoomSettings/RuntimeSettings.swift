import RoomBase

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
    /// The second room listened to (`roomctl listen`), listened to again after a restart.
    public var listen: Listen?

    public struct Listen: Sendable, Equatable {
        public var room: String
        /// host:port list as given; nil: the room's servers.
        public var server: String?
        /// The token for it (an audience token is enough; none for Janus). Kept in roomd's
        /// state directory (mode 0750, roomd's own): a bearer credential, like the configured
        /// token file; so is a Janus room's PIN.
        public var token: String?
        public var gainDB: Double
        public var backend: RoomBackendKind
        public var pin: String?
        public init(room: String, server: String?, token: String?, gainDB: Double, backend: RoomBackendKind = .roomserver,
                    pin: String? = nil) {
            self.room = room
            self.server = server
            self.token = token
            self.gainDB = gainDB
            self.backend = backend
            self.pin = pin
        }
    }
    /// The configuration file's values when the settings above were written. An installer
    /// who edits the file while roomd is stopped and restarts it expects the edit to win, as
    /// a reload would make it: at start, a key whose file value differs from its basis drops
    /// its run-time value. `.some(nil)`: the file did not set the key; nil: unknown basis.
    public var basis = Basis()

    public struct Basis: Sendable, Equatable {
        public var volumeDB: Double??
        public var profile: AudioProfile??
        public var logLevel: String??
        public init(volumeDB: Double?? = nil, profile: AudioProfile?? = nil, logLevel: String?? = nil) {
            self.volumeDB = volumeDB
            self.profile = profile
            self.logLevel = logLevel
        }
    }

    public init(volumeDB: Double? = nil, profile: AudioProfile? = nil, logLevel: String? = nil, muted: Bool? = nil) {
        self.volumeDB = volumeDB
        self.profile = profile
        self.logLevel = logLevel
        self.muted = muted
    }

    public var isEmpty: Bool { volumeDB == nil && profile == nil && logLevel == nil && muted == nil && listen == nil }

    /// Records the file's current values as the basis of the run-time values that are set.
    public mutating func rebase(on file: ApplianceConfiguration) {
        basis = Basis(volumeDB: volumeDB == nil ? nil : .some(file.volumeDB),
                      profile: profile == nil ? nil : .some(file.profile),
                      logLevel: logLevel == nil ? nil : .some(file.logLevel))
    }

    /// The file keys whose value is no longer the one the run-time values were set against.
    public func keysChanged(in file: ApplianceConfiguration) -> [String] {
        var keys: [String] = []
        if case .some(let v) = basis.volumeDB, v != file.volumeDB { keys.append("audio.volume_db") }
        if case .some(let p) = basis.profile, p != file.profile { keys.append("audio.profile") }
        if case .some(let l) = basis.logLevel, l != file.logLevel { keys.append("log.level") }
        return keys
    }

    public static let fileName = "settings.conf"

    static let schema: [(name: String, keys: [String])] = [
        ("audio", ["volume_db", "profile"]),
        ("log", ["level"]),
        ("room", ["muted"]),
        ("listen", ["room", "server", "token", "gain_db", "backend", "pin"]),
        ("based_on", ["volume_db", "profile", "log_level"]),
    ]

    /// Reads a settings file. It is roomd's own file, but a person may have edited it: the same
    /// checks and `file:line` errors as the configuration file.
    public static func parse(text: String, file: String) throws(ConfigError) -> RuntimeSettings {
        let values = ConfigValues(entries: try INIParser.parse(text: text, file: file), file: file)
        try values.checkNames(sections: schema)
        var s = RuntimeSettings()
        s.volumeDB = try values.double("audio.volume_db", in: ApplianceConfiguration.volumeRange)
        s.profile = try values.value("audio.profile", as: AudioProfile.self)
        s.logLevel = try values.string("log.level", oneOf: ApplianceConfiguration.logLevels)
        s.muted = try values.yesNo("room.muted")
        if let room = try values.string("listen.room") {
            let backend = try values.value("listen.backend", as: RoomBackendKind.self) ?? .roomserver
            let token = try values.string("listen.token")
            if backend == .roomserver, token == nil { throw values.error("listen.room", "needs listen.token beside it") }
            s.listen = Listen(room: room, server: try values.string("listen.server"), token: token,
                              gainDB: try values.double("listen.gain_db", in: ApplianceConfiguration.volumeRange) ?? 0,
                              backend: backend, pin: try values.string("listen.pin"))
        }
        // The basis: absent → unknown (nil); "none" → the file did not set the key.
        func basis<T>(_ key: String, expected: String, _ parse: (String) -> T?) throws(ConfigError) -> T?? {
            guard let v = try values.string(key) else { return nil }
            if v == "none" { return .some(nil) }
            guard let parsed = parse(v) else { throw values.error(key, "\"\(v)\" is not \(expected) or none") }
            return .some(parsed)
        }
        s.basis = Basis(volumeDB: try basis("based_on.volume_db", expected: "a number") { Double($0).flatMap { $0.isFinite ? $0 : nil } },
                        profile: try basis("based_on.profile", expected: "speech, music", AudioProfile.init(rawValue:)),
                        logLevel: try basis("based_on.log_level", expected: "a log level") { $0 })
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
            if let volumeDB { lines.append("volume_db = \(shortestNumberText(volumeDB))") }
            if let profile { lines.append("profile = \(profile.rawValue)") }
        }
        if let logLevel { lines += ["[log]", "level = \(logLevel)"] }
        if let muted { lines += ["[room]", "muted = \(muted ? "yes" : "no")"] }
        if let listen {
            lines += ["[listen]", "room = \(listen.room)"]
            if let server = listen.server { lines.append("server = \(server)") }
            if let token = listen.token { lines.append("token = \(token)") }
            lines.append("gain_db = \(shortestNumberText(listen.gainDB))")
            if listen.backend != .roomserver { lines.append("backend = \(listen.backend.rawValue)") }
            if let pin = listen.pin { lines.append("pin = \(pin)") }
        }
        var based: [String] = []
        if case .some(let v) = basis.volumeDB { based.append("volume_db = \(v.map(shortestNumberText) ?? "none")") }
        if case .some(let v) = basis.profile { based.append("profile = \(v?.rawValue ?? "none")") }
        if case .some(let v) = basis.logLevel { based.append("log_level = \(v ?? "none")") }
        if !based.isEmpty { lines += ["# What roomd.conf said when these were set: a file edited since wins at start."] + ["[based_on]"] + based }
        return lines.joined(separator: "\n") + "\n"
    }

    /// Drops the run-time values of keys the configuration file has just changed.
    public mutating func forget(changedConfigurationKeys keys: [String]) {
        if keys.contains("audio.volume_db") { volumeDB = nil }
        if keys.contains("audio.profile") { profile = nil }
        if keys.contains("log.level") { logLevel = nil }
    }
}
