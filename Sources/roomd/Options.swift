import RoomAudio
import RoomBuildInfo
import RoomCore
import RoomSystem

/// roomd's command line. Errors name the option, so a typo in a unit file is obvious in the journal.
struct Options {
    /// Settings that roomd.conf can also give are optional here: nil means "not on the command
    /// line", so the file (or the run-time settings) decides. docs/config.md: precedence.
    var config: String?
    var board: String?
    var loopback = false
    var loopbackLossPercent = 0
    /// Accept plain RTP from a server that sends no SRTP keys (development, the bench's
    /// encryption-off run). Without it such a server gets no media from this appliance.
    var plainMedia = false
    var farEnd: String?
    var farEndOnce = false
    var farEndGainDB = 0.0
    var record: String?
    var duration: Double?
    var statsInterval = 1.0
    var json = false
    var logLevel: String?
    var opusFrameMilliseconds: Int?
    /// Processing stages switched off with --disable.
    var disabled: Set<ProcessingFeature> = []
    var aecSuppression: Int32?
    var servers: [String] = []
    var token: String?
    var tokenFile: String?
    var role: String?
    var tlsCAFile: String?
    var tlsPins: [String]?
    var tlsServerName: String?
    var plaintextSignalling = false
    var backend: RoomBackendKind?
    var janusRoom: UInt64?
    var displayName: String?
    var stunServer: String?
    var controlSocket: String?
    var controlGroup: String?
    var stateDirectory: String?
    var profile: AudioProfile?

    static let usage = """
    usage: roomd [options]

    Runs the conference-room appliance: the audio engine on the board described by --board
    (microphones cleaned by echo cancellation, noise suppression, gain control, Opus-coded),
    the room on roomserver, the control socket for roomctl, the buttons and LEDs.
    Settings come from the command line, then the run-time settings (roomctl), then the
    configuration file, then the defaults (docs/config.md).

      --config PATH          configuration file (default $ROOMD_CONFIG; none without either; the
                             systemd unit passes /etc/roomd/roomd.conf). SIGHUP or
                             `roomctl reload` re-read it.
      --board PATH           board directory or its board.conf (default board/sim)
      --server ADDR[,ADDR]   join a room on roomserver at ADDR (host:port, a host name or a
                             numeric address; a list is tried in turn for failover)
      --backend KIND         roomserver (default) or janus: --server is then a Janus
                             WebSocket transport (wss unless --plaintext-signalling)
      --janus-room N         the Janus AudioBridge room to join (with --backend janus)
      --display-name NAME    the name people in a Janus room see (default: the host name)
      --stun-server ADDR     a STUN server (host:port): also offer Janus this appliance's
                             address outside its NAT
      --token-file PATH      the room token (from the room service, or roomserver mint-token),
                             read from PATH: on the command line it is in every process list
      --token TOKEN          the token itself, for tests and benches only (visible in ps)
      --tls-ca-file PATH     trust the server's certificate when it chains to a CA in PATH (PEM)
      --tls-pin PIN[,PIN]    accept only these server keys (sha256/..., see roomserver(8));
                             with --tls-ca-file both must hold, alone it replaces the CA
      --tls-server-name NAME
                             the name the server's certificate must carry (default: the
                             host of --server)
      --plaintext-signalling
                             no TLS: tokens and media keys cross the network in clear
                             (development only; the server needs a plain_listen)
      --role ROLE            streamer (speak; needs the publish grant) or audience (listen),
                             default streamer
      --loopback             play the cleaned, Opus-coded capture on the speaker
      --loopback-loss PCT    drop PCT % of loopback packets (FEC and concealment at work)
      --plain-media          development only: accept a server that sends media unencrypted
                             (no SRTP keys in welcome); default: no media with such a server
      --far-end FILE.wav     play FILE as a far-end talker (mono or first channel, board rate)
      --far-end-once         play the far-end file once instead of looping it
      --far-end-gain-db DB   scale the far-end talker (default 0)
      --record FILE.wav      write the cleaned capture (what a room would hear) to FILE
      --duration SECONDS     stop after SECONDS (default: until SIGINT/SIGTERM)
      --stats-interval S     print a status line every S seconds (default 1; 0 = never)
      --json                 status lines as JSON objects
      --opus-frame MS        Opus frame length, 10 or 20 (default 10; 20 with --backend janus)
      --disable FEATURE      switch off aec, ns, agc, vad, hpf, beamformer or array (repeatable)
      --aec-suppression L    echo suppression: low, moderate or high (default moderate)
      --control-socket PATH  the control API socket for roomctl (default $ROOMD_CONTROL_SOCKET,
                             else /run/roomd/control.sock when /run/roomd exists; "none" = off)
      --control-group GROUP  members of GROUP may change the appliance through the socket
                             (besides root and roomd's own user); the socket belongs to it
      --state-dir DIR        keep run-time settings (volume, profile, mute, log level) in
                             DIR/settings.conf (default $STATE_DIRECTORY from systemd; "none" = off)
      --profile NAME         audio profile: speech or music (default speech)
      --log-level LEVEL      error, warning, notice, info or debug (default info)
      --version              print the version and exit
      --help                 print this help and exit
    """

    enum Parsed { case run(Options), exit(String, Int32) }

    static func parse(_ args: [String]) -> Parsed {
        var o = Options()
        var i = 0
        func value(_ name: String) -> String? {
            i += 1
            return i < args.count ? args[i] : nil
        }
        while i < args.count {
            let a = args[i]
            switch a {
            case "--help", "-h": return .exit(usage, 0)
            case "--version": return .exit(versionLine(program: "roomd"), 0)
            case "--loopback": o.loopback = true
            case "--plain-media": o.plainMedia = true
            case "--json": o.json = true
            case "--far-end-once": o.farEndOnce = true
            case "--plaintext-signalling": o.plaintextSignalling = true
            case "--tls-ca-file", "--tls-pin", "--tls-server-name":
                guard let v = value(a), !v.isEmpty else { return .exit("roomd: \(a) needs a value", 2) }
                switch a {
                case "--tls-ca-file": o.tlsCAFile = Files.absolute(v)
                case "--tls-pin":
                    let pins = ApplianceConfiguration.serverList(v)
                    if let problem = pins.lazy.compactMap(SPKIPin.problem).first { return .exit("roomd: --tls-pin: \(problem)", 2) }
                    o.tlsPins = pins
                default:
                    guard ApplianceConfiguration.isHostPort(v + ":1") else { return .exit("roomd: --tls-server-name: \"\(v)\" is not a host name or numeric address", 2) }
                    o.tlsServerName = v
                }
            case "--server":
                guard let v = value(a), !v.isEmpty else { return .exit("roomd: --server needs host:port[,host:port...]", 2) }
                o.servers = ApplianceConfiguration.serverList(v)
                // The configuration file's rule (room.server): a port of 0 or a name retried
                // forever before, where the file refused them at once.
                if let bad = o.servers.first(where: { !ApplianceConfiguration.isHostPort($0) }) {
                    return .exit("roomd: --server \(bad): not host:port (a host name, numeric IPv4 a.b.c.d or [IPv6], port 1-65535)", 2)
                }
            case "--backend":
                guard let v = value(a), let kind = RoomBackendKind(rawValue: v) else { return .exit("roomd: --backend takes roomserver or janus", 2) }
                o.backend = kind
            case "--janus-room":
                guard let v = value(a), let n = UInt64(v), n > 0 else { return .exit("roomd: --janus-room needs a room number (1 or more)", 2) }
                o.janusRoom = n
            case "--stun-server":
                guard let v = value(a), ApplianceConfiguration.isHostPort(v) else { return .exit("roomd: --stun-server needs host:port", 2) }
                o.stunServer = v
            case "--display-name":
                guard let v = value(a), (1 ... 64).contains(v.count), !v.contains(where: { $0.isNewline || $0 == "\"" }) else {
                    return .exit("roomd: --display-name needs 1-64 characters, no quotes or line breaks", 2)
                }
                o.displayName = v
            case "--token", "--token-file":
                guard let v = value(a), !v.isEmpty else { return .exit("roomd: \(a) needs a value", 2) }
                if a == "--token" { o.token = v } else { o.tokenFile = v }
            case "--role":
                guard let v = value(a), ApplianceConfiguration.roles.contains(v) else { return .exit("roomd: --role takes streamer or audience", 2) }
                o.role = v
            case "--control-socket":
                guard let v = value(a), !v.isEmpty else { return .exit("roomd: --control-socket needs a path (or none)", 2) }
                // An abstract socket ("@name") has no file, so no owner, group or mode: any local
                // user could drive the appliance through it.
                guard !v.hasPrefix("@") else {
                    return .exit("roomd: --control-socket \(v): abstract sockets have no permissions (anyone on the machine could use it); give a path", 2)
                }
                o.controlSocket = v
            case "--config", "--control-group", "--state-dir":
                guard let v = value(a), !v.isEmpty else { return .exit("roomd: \(a) needs a value", 2) }
                switch a {
                case "--config": o.config = v
                case "--control-group": o.controlGroup = v
                default: o.stateDirectory = v
                }
            case "--profile":
                guard let v = value(a), let p = AudioProfile(rawValue: v) else { return .exit("roomd: --profile takes speech or music", 2) }
                o.profile = p
            case "--board", "--far-end", "--record", "--log-level":
                guard let v = value(a) else { return .exit("roomd: \(a) needs a value\n\(usage)", 2) }
                switch a {
                case "--board": o.board = v
                case "--far-end": o.farEnd = v
                case "--record": o.record = v
                default:
                    // The same set as log.level in the file (LogLevelNames), checked here with the
                    // other options so a typo is exit 2 at once, naming the option.
                    guard LogLevelNames.all.contains(v) else { return .exit("roomd: " + LogLevelNames.refusal("--log-level", v), 2) }
                    o.logLevel = v
                }
            case "--loopback-loss":
                guard let v = value(a), let n = Int(v), (0...100).contains(n) else { return .exit("roomd: --loopback-loss needs a percentage 0..100", 2) }
                o.loopbackLossPercent = n
            case "--far-end-gain-db":
                guard let v = value(a), let d = Double(v), d.isFinite, d <= 20 else { return .exit("roomd: --far-end-gain-db needs a number of dB <= 20", 2) }
                o.farEndGainDB = d
            case "--duration":
                guard let v = value(a), let d = Double(v), d > 0, d.isFinite else { return .exit("roomd: --duration needs a positive number of seconds", 2) }
                o.duration = d
            case "--stats-interval":
                guard let v = value(a), let d = Double(v), d >= 0, d.isFinite else { return .exit("roomd: --stats-interval needs seconds >= 0", 2) }
                o.statsInterval = d
            case "--opus-frame":
                guard let v = value(a), let n = Int(v), n == 10 || n == 20 else { return .exit("roomd: --opus-frame must be 10 or 20", 2) }
                o.opusFrameMilliseconds = n
            case "--aec-suppression":
                guard let v = value(a), let level = ApplianceConfiguration.aecSuppressionLevels.firstIndex(of: v).map(Int32.init) else {
                    return .exit("roomd: --aec-suppression takes low, moderate or high", 2)
                }
                o.aecSuppression = level
            case "--disable":
                guard let v = value(a), let feature = ProcessingFeature(rawValue: v) else {
                    return .exit("roomd: --disable takes \(ProcessingFeature.names)", 2)
                }
                o.disabled.insert(feature)
            default:
                return .exit("roomd: unknown option \(a)\n\(usage)", 2)
            }
            i += 1
        }
        if o.backend == .janus && !o.servers.isEmpty && o.janusRoom == nil { return .exit("roomd: --backend janus needs --janus-room", 2) }
        if o.janusRoom != nil && o.backend != .janus { return .exit("roomd: --janus-room needs --backend janus", 2) }
        if o.stunServer != nil && o.backend != .janus { return .exit("roomd: --stun-server needs --backend janus", 2) }
        if o.backend == .janus && o.opusFrameMilliseconds == 10 {
            return .exit("roomd: --opus-frame 10 with --backend janus: a Janus AudioBridge mixes one packet per participant every 20 ms and drops the rest (20 is the default there)", 2)
        }
        if !o.servers.isEmpty && o.backend != .janus && o.token == nil && o.tokenFile == nil { return .exit("roomd: --server needs --token or --token-file", 2) }
        if o.token != nil && o.tokenFile != nil { return .exit("roomd: --token and --token-file exclude each other", 2) }
        // A token belongs to a server: never the command line's token with the file's server.
        if o.servers.isEmpty && (o.token != nil || o.tokenFile != nil) { return .exit("roomd: --token needs --server", 2) }
        if !o.servers.isEmpty && o.loopback { return .exit("roomd: --loopback and --server exclude each other", 2) }
        if o.plaintextSignalling && (o.tlsCAFile != nil || o.tlsPins != nil || o.tlsServerName != nil) {
            return .exit("roomd: --plaintext-signalling turns TLS off; it excludes --tls-ca-file, --tls-pin and --tls-server-name", 2)
        }
        return .run(o)
    }
}

/// The processing stages `--disable` can switch off (each one an APM feature of the engine).
enum ProcessingFeature: String, CaseIterable {
    case aec, ns, agc, vad, hpf, beamformer, array

    /// "aec, ns, agc, vad, hpf, beamformer or array", for usage errors.
    static var names: String { ConfigValues.list(allCases.map(\.rawValue)) }

    func switchOff(in p: inout ProcessingSettings) {
        switch self {
        case .aec: p.echoCancel = false
        case .ns: p.noiseSuppress = false
        case .agc: p.gainControl = false
        case .vad: p.voiceDetect = false
        case .hpf: p.highPass = false
        case .beamformer: p.beamform = false
        case .array: p.array = false
        }
    }
}
