import RoomAudio
import RoomBase
import RoomBuildInfo
import RoomCaptureChain
import RoomSettings
import RoomSystem

/// roomd's command line. Errors name the option, so a typo in a unit file is obvious in the journal.
public struct Options {
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

    /// The command line: parsing and `--help` both come from this table (RoomSystem.CommandLineParser).
    static let options: [CommandOption] = [
        CommandOption("--config", "PATH", help: "configuration file (default $ROOMD_CONFIG; none without either; the\nsystemd unit passes /etc/roomd/roomd.conf). SIGHUP or\n`roomctl reload` re-read it."),
        CommandOption("--board", "PATH", help: "board directory or its board.conf (default board/sim)"),
        CommandOption("--server", "ADDR[,ADDR]", help: "join a room on roomserver at ADDR (host:port, a host name or a\nnumeric address; a list is tried in turn for failover)"),
        CommandOption("--backend", "KIND", help: "roomserver (default) or janus: --server is then a Janus\nWebSocket transport (wss unless --plaintext-signalling)"),
        CommandOption("--janus-room", "N", help: "the Janus AudioBridge room to join (with --backend janus)"),
        CommandOption("--display-name", "NAME", help: "the name people in a Janus room see (default: the host name)"),
        CommandOption("--stun-server", "ADDR", help: "a STUN server (host:port): also offer Janus this appliance's\naddress outside its NAT"),
        CommandOption("--token-file", "PATH", help: "the room token (from the room service, or roomserver mint-token),\nread from PATH: on the command line it is in every process list"),
        CommandOption("--token", "TOKEN", help: "the token itself, for tests and benches only (visible in ps)"),
        CommandOption("--tls-ca-file", "PATH", help: "trust the server's certificate when it chains to a CA in PATH (PEM)"),
        CommandOption("--tls-pin", "PIN[,PIN]", help: "accept only these server keys (sha256/..., see roomserver(8));\nwith --tls-ca-file both must hold, alone it replaces the CA"),
        CommandOption("--tls-server-name", "NAME", help: "the name the server's certificate must carry (default: the\nhost of --server)"),
        CommandOption("--plaintext-signalling", help: "no TLS: tokens and media keys cross the network in clear\n(development only; the server needs a plain_listen)"),
        CommandOption("--role", "ROLE", help: "streamer (speak; needs the publish grant) or audience (listen),\ndefault streamer"),
        CommandOption("--loopback", help: "play the cleaned, Opus-coded capture on the speaker"),
        CommandOption("--loopback-loss", "PCT", help: "drop PCT % of loopback packets (FEC and concealment at work)"),
        CommandOption("--plain-media", help: "development only: accept a server that sends media unencrypted\n(no SRTP keys in welcome); default: no media with such a server"),
        CommandOption("--far-end", "FILE.wav", help: "play FILE as a far-end talker (mono or first channel, board rate)"),
        CommandOption("--far-end-once", help: "play the far-end file once instead of looping it"),
        CommandOption("--far-end-gain-db", "DB", help: "scale the far-end talker (default 0)"),
        CommandOption("--record", "FILE.wav", help: "write the cleaned capture (what a room would hear) to FILE"),
        CommandOption("--duration", "SECONDS", help: "stop after SECONDS (default: until SIGINT/SIGTERM)"),
        CommandOption("--stats-interval", "S", help: "print a status line every S seconds (default 1; 0 = never)"),
        CommandOption("--json", help: "status lines as JSON objects"),
        CommandOption("--opus-frame", "MS", help: "Opus frame length, 10 or 20 (default 10; 20 with --backend janus)"),
        CommandOption("--disable", "FEATURE", help: "switch off aec, ns, agc, vad, hpf, beamformer or array (repeatable)"),
        CommandOption("--aec-suppression", "L", help: "echo suppression: low, moderate or high (default moderate)"),
        CommandOption("--control-socket", "PATH", help: "the control API socket for roomctl (default $ROOMD_CONTROL_SOCKET,\nelse /run/roomd/control.sock when /run/roomd exists; \"none\" = off)"),
        CommandOption("--control-group", "GROUP", help: "members of GROUP may change the appliance through the socket\n(besides root and roomd's own user); the socket belongs to it"),
        CommandOption("--state-dir", "DIR", help: "keep run-time settings (volume, profile, mute, log level) in\nDIR/settings.conf, the array's mic corrections in DIR/mic-corrections.conf (default $STATE_DIRECTORY from systemd; \"none\" = off)"),
        CommandOption("--profile", "NAME", help: "audio profile: speech or music (default speech)"),
        CommandOption("--log-level", "LEVEL", help: "error, warning, notice, info or debug (default info)"),
        CommandOption("--version", help: "print the version and exit"),
        CommandOption("--help", aliases: ["-h"], help: "print this help and exit"),
    ]

    static let usage = """
    usage: roomd [options]

    Runs the conference-room appliance: the audio engine on the board described by --board
    (microphones cleaned by echo cancellation, noise suppression, gain control, Opus-coded),
    the room on roomserver, the control socket for roomctl, the buttons and LEDs.
    Settings come from the command line, then the run-time settings (roomctl), then the
    configuration file, then the defaults (docs/config.md).

    """ + "\n" + CommandLineParser.help(options, column: 25)

    public enum Parsed { case run(Options), exit(String, Int32) }

    public static func parse(_ args: [String]) -> Parsed {
        do throws(CommandLineUsageError) {
            let parsed = try CommandLineParser.parse(args, options: options)
            if parsed.contains("--help") { return .exit(usage, 0) }
            if parsed.contains("--version") { return .exit(versionLine(program: "roomd"), 0) }
            return .run(try settings(parsed))
        } catch {
            return .exit(error.text(program: "roomd"), CommandLineUsageError.exitCode)
        }
    }

    /// The parsed options as settings. Errors name the option, so a typo in a unit file is
    /// obvious in the journal.
    private static func settings(_ parsed: ParsedCommandLine) throws(CommandLineUsageError) -> Options {
        var o = Options()
        typealias Refusal = CommandLineUsageError
        for (a, value) in parsed.options {
            let v = value ?? ""
            switch a {
            case "--loopback": o.loopback = true
            case "--plain-media": o.plainMedia = true
            case "--json": o.json = true
            case "--far-end-once": o.farEndOnce = true
            case "--plaintext-signalling": o.plaintextSignalling = true
            case "--tls-ca-file", "--tls-pin", "--tls-server-name":
                guard !v.isEmpty else { throw Refusal("\(a) needs a value") }
                switch a {
                case "--tls-ca-file": o.tlsCAFile = Files.absolute(v)
                case "--tls-pin":
                    let pins = ApplianceConfiguration.serverList(v)
                    if let problem = pins.lazy.compactMap(SPKIPin.problem).first { throw Refusal("--tls-pin: \(problem)") }
                    o.tlsPins = pins
                default:
                    guard ApplianceConfiguration.isHostPort(v + ":1") else { throw Refusal("--tls-server-name: \"\(v)\" is not a host name or numeric address") }
                    o.tlsServerName = v
                }
            case "--server":
                guard !v.isEmpty else { throw Refusal("--server needs host:port[,host:port...]") }
                o.servers = ApplianceConfiguration.serverList(v)
                // The configuration file's rule (room.server): a port of 0 or a name retried
                // forever before, where the file refused them at once.
                if let bad = o.servers.first(where: { !ApplianceConfiguration.isHostPort($0) }) {
                    throw Refusal("--server \(bad): not host:port (a host name, numeric IPv4 a.b.c.d or [IPv6], port 1-65535)")
                }
            case "--backend":
                guard let kind = RoomBackendKind(rawValue: v) else { throw Refusal("--backend takes roomserver or janus") }
                o.backend = kind
            case "--janus-room":
                guard let n = UInt64(v), n > 0 else { throw Refusal("--janus-room needs a room number (1 or more)") }
                o.janusRoom = n
            case "--stun-server":
                guard ApplianceConfiguration.isHostPort(v) else { throw Refusal("--stun-server needs host:port") }
                o.stunServer = v
            case "--display-name":
                guard (1 ... 64).contains(v.count), !v.contains(where: { $0.isNewline || $0 == "\"" }) else {
                    throw Refusal("--display-name needs 1-64 characters, no quotes or line breaks")
                }
                o.displayName = v
            case "--token", "--token-file":
                guard !v.isEmpty else { throw Refusal("\(a) needs a value") }
                if a == "--token" { o.token = v } else { o.tokenFile = v }
            case "--role":
                guard ApplianceConfiguration.roles.contains(v) else { throw Refusal("--role takes streamer or audience") }
                o.role = v
            case "--control-socket":
                guard !v.isEmpty else { throw Refusal("--control-socket needs a path (or none)") }
                // An abstract socket ("@name") has no file, so no owner, group or mode: any local
                // user could drive the appliance through it.
                guard !v.hasPrefix("@") else {
                    throw Refusal("--control-socket \(v): abstract sockets have no permissions (anyone on the machine could use it); give a path")
                }
                o.controlSocket = v
            case "--config", "--control-group", "--state-dir":
                guard !v.isEmpty else { throw Refusal("\(a) needs a value") }
                switch a {
                case "--config": o.config = v
                case "--control-group": o.controlGroup = v
                default: o.stateDirectory = v
                }
            case "--profile":
                guard let p = AudioProfile(rawValue: v) else { throw Refusal("--profile takes speech or music") }
                o.profile = p
            case "--board": o.board = v
            case "--far-end": o.farEnd = v
            case "--record": o.record = v
            case "--log-level":
                // The same set as log.level in the file (LogLevelNames), checked here with the
                // other options so a typo is exit 2 at once, naming the option.
                guard LogLevelNames.all.contains(v) else { throw Refusal(LogLevelNames.refusal("--log-level", v)) }
                o.logLevel = v
            case "--loopback-loss":
                guard let n = Int(v), (0...100).contains(n) else { throw Refusal("--loopback-loss needs a percentage 0..100") }
                o.loopbackLossPercent = n
            case "--far-end-gain-db":
                guard let d = Double(v), d.isFinite, d <= 20 else { throw Refusal("--far-end-gain-db needs a number of dB <= 20") }
                o.farEndGainDB = d
            case "--duration":
                guard let d = Double(v), d > 0, d.isFinite else { throw Refusal("--duration needs a positive number of seconds") }
                o.duration = d
            case "--stats-interval":
                guard let d = Double(v), d >= 0, d.isFinite else { throw Refusal("--stats-interval needs seconds >= 0") }
                o.statsInterval = d
            case "--opus-frame":
                guard let n = Int(v), n == 10 || n == 20 else { throw Refusal("--opus-frame must be 10 or 20") }
                o.opusFrameMilliseconds = n
            case "--aec-suppression":
                guard let level = ApplianceConfiguration.aecSuppressionLevels.firstIndex(of: v).map(Int32.init) else {
                    throw Refusal("--aec-suppression takes low, moderate or high")
                }
                o.aecSuppression = level
            case "--disable":
                guard let feature = ProcessingFeature(rawValue: v) else { throw Refusal("--disable takes \(ProcessingFeature.names)") }
                o.disabled.insert(feature)
            default:
                break   // --help and --version are answered by parse
            }
        }
        if o.backend == .janus && !o.servers.isEmpty && o.janusRoom == nil { throw Refusal("--backend janus needs --janus-room") }
        if o.janusRoom != nil && o.backend != .janus { throw Refusal("--janus-room needs --backend janus") }
        if o.stunServer != nil && o.backend != .janus { throw Refusal("--stun-server needs --backend janus") }
        if o.backend == .janus && o.opusFrameMilliseconds == 10 {
            throw Refusal("--opus-frame 10 with --backend janus: a Janus AudioBridge mixes one packet per participant every 20 ms and drops the rest (20 is the default there)")
        }
        if !o.servers.isEmpty && o.backend != .janus && o.token == nil && o.tokenFile == nil { throw Refusal("--server needs --token or --token-file") }
        if o.token != nil && o.tokenFile != nil { throw Refusal("--token and --token-file exclude each other") }
        // A token belongs to a server: never the command line's token with the file's server.
        if o.servers.isEmpty && (o.token != nil || o.tokenFile != nil) { throw Refusal("--token needs --server") }
        if !o.servers.isEmpty && o.loopback { throw Refusal("--loopback and --server exclude each other") }
        if o.plaintextSignalling && (o.tlsCAFile != nil || o.tlsPins != nil || o.tlsServerName != nil) {
            throw Refusal("--plaintext-signalling turns TLS off; it excludes --tls-ca-file, --tls-pin and --tls-server-name")
        }
        return o
    }
}

/// The processing stages `--disable` can switch off (each one an APM feature of the engine).
enum ProcessingFeature: String, CaseIterable {
    case aec, ns, agc, vad, hpf, beamformer, array

    /// "aec, ns, agc, vad, hpf, beamformer or array", for usage errors.
    static var names: String { choiceList(allCases.map(\.rawValue)) }

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
