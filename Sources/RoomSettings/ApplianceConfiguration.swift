import RoomBase

/// roomd's configuration file (`/etc/roomd/roomd.conf`, reference: docs/config.md).
///
/// Only the installer's choices live here; what people change at run time through roomctl
/// (volume, profile, mute, log level) is kept apart in `RuntimeSettings`, so that roomd never
/// rewrites a file someone edits by hand. Every field is optional: an absent key means "the
/// built-in default, or the command line".
public struct ApplianceConfiguration: Sendable, Equatable {
    /// The board directory (or its board.conf), absolute after parsing.
    public var boardPath: String?
    /// Room servers tried in turn (`host:port`, a host name or a numeric address); empty: no
    /// room (local only).
    public var servers: [String] = []
    /// `room.tls_ca_file` (absolute after parsing): the CA certificate(s) the server's
    /// certificate must chain to.
    public var tlsCAFile: String?
    /// `room.tls_pin`: accepted SPKI pins of the server's key ("sha256/…", comma-separated).
    public var tlsPins: [String] = []
    /// `room.tls_server_name`: the name the server's certificate must carry, when it is not
    /// the host of `room.server` (e.g. the server is reached by address).
    public var tlsServerName: String?
    /// `room.plaintext_signalling = yes`: no TLS (development only; tokens and media keys in
    /// clear). TLS is the default.
    public var plaintextSignalling: Bool?
    /// `room.backend`: which kind of server `room.server` is (our roomserver, or a Janus
    /// WebSocket transport). nil: roomserver.
    public var backend: RoomBackendKind?
    /// `room.janus_room`: the AudioBridge room number (backend janus).
    public var janusRoom: UInt64?
    /// `room.janus_pin`: the AudioBridge room's PIN, when it has one.
    public var janusPin: String?
    /// `room.janus_secret`: the AudioBridge room's secret, which makes the appliance a moderator.
    public var janusSecret: String?
    /// `room.stun_server`: `host:port` of a STUN server (backend janus): the appliance offers its
    /// NAT's address too.
    public var stunServer: String?
    /// `room.display_name`: the name people in the room see (Janus; roomserver takes the
    /// token's name). nil: the host name.
    public var displayName: String?
    public var token: String?
    /// Absolute after parsing. Preferred over `token`: it keeps the token out of a world-readable file.
    public var tokenFile: String?
    /// `room.placement_key` (absolute after parsing): the room service's Ed25519 public key
    /// (PEM). With it, a token that names its server (`backend`, `server` claims) places the
    /// room; without it such a token is refused (docs/scaling.md, "Placement in the token").
    public var placementKey: String?
    public var role: String?
    public var profile: AudioProfile?
    public var volumeDB: Double?
    /// 0 low, 1 moderate, 2 high.
    public var aecSuppression: Int32?
    public var opusFrameMilliseconds: Int?
    /// A path, or "none" to switch the socket off.
    public var controlSocket: String?
    /// A group name or number; resolved by roomd (this module does not touch the system).
    public var controlGroup: String?
    public var logLevel: String?
    /// Where roomd keeps settings changed at run time; "none" keeps them in memory only.
    public var stateDirectory: String?
    /// The SIP account (`[sip]`), nil without one.
    public var sip: SIPSettings?

    public init() {}

    /// roomd's log levels by name: the one accepted set, for `log.level`, `--log-level`, the
    /// control API's `log_level` and settings.conf alike (`LogLevel(name:)` reads this list).
    public static let logLevels = LogLevelNames.all
    public static let roles = ["streamer", "audience"]
    public static let aecSuppressionLevels = ["low", "moderate", "high"]
    public static let volumeRange: ClosedRange<Double> = -80...20

    static let schema: [(name: String, keys: [String])] = [
        ("board", ["path"]),
        ("room", ["server", "token", "token_file", "role", "tls_ca_file", "tls_pin", "tls_server_name", "plaintext_signalling",
                  "backend", "janus_room", "janus_pin", "janus_secret", "stun_server", "display_name", "placement_key"]),
        ("audio", ["profile", "volume_db", "aec_suppression", "opus_frame_ms"]),
        ("control", ["socket", "group"]),
        ("log", ["level"]),
        ("state", ["directory"]),
        ("sip", SIPSettings.keys),
    ]

    /// Parses and validates the whole file; the first problem is thrown as `file:line: key: …`.
    /// Relative paths are resolved against `directory` (the file's own directory), so a
    /// configuration directory can be moved as a whole.
    public static func parse(text: String, file: String, directory: String) throws(ConfigError) -> ApplianceConfiguration {
        let values = ConfigValues(entries: try INIParser.parse(text: text, file: file), file: file)
        try values.checkNames(sections: schema)
        var c = ApplianceConfiguration()
        func path(_ key: String) throws(ConfigError) -> String? {
            guard let p = try values.string(key) else { return nil }
            return p.hasPrefix("/") ? p : (directory.hasSuffix("/") ? directory : directory + "/") + p
        }
        c.boardPath = try path("board.path")

        if let list = try values.string("room.server") {
            let servers = serverList(list)
            for s in servers where !isHostPort(s) {
                throw values.error("room.server", "\"\(s)\" is not host:port (a host name or numeric address, and a port 1..65535; several are separated by commas)")
            }
            c.servers = servers
        }
        c.token = try values.string("room.token")
        c.tokenFile = try path("room.token_file")
        if c.token != nil && c.tokenFile != nil {
            throw values.error("room.token_file", "give room.token or room.token_file, not both")
        }
        c.placementKey = try path("room.placement_key")
        if c.placementKey != nil && c.token == nil && c.tokenFile == nil {
            throw values.error("room.placement_key", "checks where the token places the room, so it needs room.token_file (or room.token)")
        }
        c.backend = try values.value("room.backend", as: RoomBackendKind.self)
        if let room = try values.string("room.janus_room") {
            guard let n = UInt64(room), n > 0 else { throw values.error("room.janus_room", "\"\(room)\" is not a room number (1 or more)") }
            guard c.backend == .janus else { throw values.error("room.janus_room", "only for room.backend = janus") }
            c.janusRoom = n
        }
        c.janusPin = try values.string("room.janus_pin")
        if c.janusPin != nil && c.backend != .janus { throw values.error("room.janus_pin", "only for room.backend = janus") }
        c.janusSecret = try values.string("room.janus_secret")
        if c.janusSecret != nil && c.backend != .janus { throw values.error("room.janus_secret", "only for room.backend = janus") }
        if let stun = try values.string("room.stun_server") {
            guard isHostPort(stun) else { throw values.error("room.stun_server", "\"\(stun)\" is not host:port (e.g. stun.example.org:3478)") }
            guard c.backend == .janus else { throw values.error("room.stun_server", "only for room.backend = janus") }
            c.stunServer = stun
        }
        if let name = try values.string("room.display_name") {
            guard (1 ... 64).contains(name.count), !name.contains(where: { $0.isNewline || $0 == "\"" }) else {
                throw values.error("room.display_name", "1-64 characters, no quotes or line breaks")
            }
            c.displayName = name
        }
        if c.backend == .janus && !c.servers.isEmpty && c.janusRoom == nil {
            throw values.error("room.backend", "janus needs room.janus_room (the AudioBridge room number)")
        }
        if !c.servers.isEmpty && c.backend != .janus && c.token == nil && c.tokenFile == nil {
            throw values.error("room.server", "needs room.token_file (or room.token)")
        }
        c.role = try values.string("room.role", oneOf: roles)
        c.tlsCAFile = try path("room.tls_ca_file")
        if let pins = try values.string("room.tls_pin") {
            c.tlsPins = serverList(pins)
            for pin in c.tlsPins {
                if let problem = SPKIPin.problem(pin) { throw values.error("room.tls_pin", problem) }
            }
            if c.tlsPins.isEmpty { throw values.error("room.tls_pin", "empty (give sha256/… pins, or leave the key out)") }
        }
        if let name = try values.string("room.tls_server_name") {
            guard isHostPort(name + ":1") else { throw values.error("room.tls_server_name", "\"\(name)\" is not a host name or numeric address") }
            c.tlsServerName = name
        }
        c.plaintextSignalling = try values.yesNo("room.plaintext_signalling")
        if c.plaintextSignalling == true, let other = [("room.tls_ca_file", c.tlsCAFile != nil), ("room.tls_pin", !c.tlsPins.isEmpty),
                                                       ("room.tls_server_name", c.tlsServerName != nil)].first(where: \.1)?.0 {
            throw values.error("room.plaintext_signalling", "yes turns TLS off, but \(other) is set: choose one")
        }

        c.profile = try values.value("audio.profile", as: AudioProfile.self)
        c.volumeDB = try values.double("audio.volume_db", in: volumeRange)
        if let level = try values.string("audio.aec_suppression", oneOf: aecSuppressionLevels) {
            c.aecSuppression = Int32(aecSuppressionLevels.firstIndex(of: level)!)
        }
        c.opusFrameMilliseconds = try values.int("audio.opus_frame_ms", oneOf: [10, 20])
        if c.backend == .janus && c.opusFrameMilliseconds == 10 {
            throw values.error("audio.opus_frame_ms", "10 with room.backend = janus: a Janus AudioBridge mixes one packet per participant every 20 ms and drops the rest (20 is the default there)")
        }

        if let socket = try values.string("control.socket") {
            c.controlSocket = socket == "none" ? "none" : try path("control.socket")
        }
        if let group = try values.string("control.group") {
            guard group.allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "_" || $0 == "-") }), group.count <= 32 else {
                throw values.error("control.group", "\"\(group)\" is not a group name or number")
            }
            c.controlGroup = group
        }
        c.logLevel = try values.string("log.level", oneOf: logLevels)
        if let dir = try values.string("state.directory") {
            c.stateDirectory = dir == "none" ? "none" : try path("state.directory")
        }
        c.sip = try SIPSettings.parse(values, path: path)
        return c
    }

    /// `host:port, host:port` → the addresses as written, blanks removed (room.server, --server,
    /// roomctl join --server).
    public static func serverList(_ text: String) -> [String] {
        text.split(separator: ",").map { String($0.filter { !$0.isWhitespace }) }
    }

    /// `name:port`, `a.b.c.d:port` or `[v6]:port`: the same rule as `--server`, checked here so
    /// a typo is reported with its line rather than when roomd first connects. A name is letters,
    /// digits and hyphens in dot-separated labels (RFC 1123); all-digit labels must be an IPv4
    /// address (so "1.2.3:7" is refused, not looked up).
    public static func isHostPort(_ s: String) -> Bool {
        guard let colon = s.lastIndex(of: ":"), let port = Int(s[s.index(after: colon)...]), (1...65535).contains(port) else { return false }
        let host = s[..<colon]
        if host.hasPrefix("[") && host.hasSuffix("]") { return host.count > 2 }
        let parts = host.split(separator: ".", omittingEmptySubsequences: false)
        if parts.allSatisfy({ !$0.isEmpty && $0.allSatisfy(\.isNumber) }) {
            return parts.count == 4 && parts.allSatisfy { p in p.count <= 3 && Int(p).map { (0...255).contains($0) } == true }
        }
        return host.utf8.count <= 253 && parts.allSatisfy { label in
            !label.isEmpty && label.utf8.count <= 63 && !label.hasPrefix("-") && !label.hasSuffix("-")
                && label.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-") }
        }
    }

    /// The keys whose values differ between two configurations, in schema order: what a
    /// reload has to act on.
    public func changedKeys(from old: ApplianceConfiguration) -> [String] {
        var keys: [String] = []
        if boardPath != old.boardPath { keys.append("board.path") }
        if servers != old.servers { keys.append("room.server") }
        if token != old.token { keys.append("room.token") }
        if tokenFile != old.tokenFile { keys.append("room.token_file") }
        if placementKey != old.placementKey { keys.append("room.placement_key") }
        if role != old.role { keys.append("room.role") }
        if tlsCAFile != old.tlsCAFile { keys.append("room.tls_ca_file") }
        if tlsPins != old.tlsPins { keys.append("room.tls_pin") }
        if tlsServerName != old.tlsServerName { keys.append("room.tls_server_name") }
        if plaintextSignalling != old.plaintextSignalling { keys.append("room.plaintext_signalling") }
        if backend != old.backend { keys.append("room.backend") }
        if janusRoom != old.janusRoom { keys.append("room.janus_room") }
        if janusPin != old.janusPin { keys.append("room.janus_pin") }
        if janusSecret != old.janusSecret { keys.append("room.janus_secret") }
        if stunServer != old.stunServer { keys.append("room.stun_server") }
        if displayName != old.displayName { keys.append("room.display_name") }
        if profile != old.profile { keys.append("audio.profile") }
        if volumeDB != old.volumeDB { keys.append("audio.volume_db") }
        if aecSuppression != old.aecSuppression { keys.append("audio.aec_suppression") }
        if opusFrameMilliseconds != old.opusFrameMilliseconds { keys.append("audio.opus_frame_ms") }
        if controlSocket != old.controlSocket { keys.append("control.socket") }
        if controlGroup != old.controlGroup { keys.append("control.group") }
        if logLevel != old.logLevel { keys.append("log.level") }
        if stateDirectory != old.stateDirectory { keys.append("state.directory") }
        if sip != old.sip { keys.append("sip") }
        return keys
    }
}

/// What serves the appliance's room (`room.backend`).
public enum RoomBackendKind: String, Sendable, Equatable, CaseIterable {
    /// Our roomserver: token, stage and moderation (docs/protocol.md).
    case roomserver
    /// A Janus AudioBridge room over WebRTC, where browsers join too (docs/janus.md).
    case janus
}

/// What the appliance is tuned for. Speech: voice codec mode, noise suppression and gain
/// control on, DTX. Music: full band at a higher bitrate, no noise suppression or gain control
/// (they treat sustained tones as noise and pump on dynamics), no DTX (quiet passages are not
/// silence). Values: docs/audio-engine.md.
public enum AudioProfile: String, Sendable, Equatable, CaseIterable {
    case speech, music
}
