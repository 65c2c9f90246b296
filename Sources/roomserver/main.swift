import Glibc
import RoomBuildInfo
import RoomCore
import RoomProtocol
import RoomServerKit
import RoomSystem
import RoomTLS

// Wiring only: options, configuration, the loop on the main thread, signals.

let usage = """
usage: roomserver --config FILE [--log-level LEVEL]
       roomserver --print-spki-pin CERT.pem
       roomserver mint-token --config FILE --key KID --room ROOM --user USER [--name NAME]
                  [--publish] [--moderate] [--ttl SECONDS] [--not-before SECONDS]

Runs the voice-room service (signalling over TLS 1.3, RTP forwarding over UDP) described by
the configuration file (docs/roomserver.md). SIGINT or SIGTERM closes every room with reason
room_closed and exits 0. SIGHUP reads the configuration file again (keys, token leeway and
room settings apply without closing a room; the TLS certificate and key are read again for
new connections; an invalid file changes nothing).

  --config FILE          configuration file (see docs/roomserver.conf.example)
  --log-level LEVEL      override server.log_level: error, warning, notice, info or debug
  --print-spki-pin CERT  print the SPKI pin of the first certificate in CERT (PEM), the
                         value for roomd.conf's room.tls_pin, and exit
  --version              print the version and exit
  --help                 print this help and exit

mint-token prints a development token signed with key KID of the configuration:
  --key KID              the signing key's id in the configuration's [keys]
  --room ROOM            the room the token admits to
  --user USER            the participant's user id
  --name NAME            display name (default: USER)
  --publish              grant publish (may go on stage)
  --moderate             grant moderate
  --ttl SECONDS          lifetime (default 3600)
  --not-before SECONDS   valid from now + SECONDS (default 0)
"""

func fail(_ text: String, status: Int32 = 64) -> Never {
    printError("roomserver: \(text)")
    exit(status)
}

func loadConfiguration(_ path: String?) -> RoomServerConfiguration {
    guard let path else { fail("--config FILE is required\n\(usage)") }
    do {
        return try RoomServerConfiguration.load(path: path)
    } catch {
        fail("\(error)", status: 78)
    }
}

struct Options {
    var minting = false
    var configPath: String?
    var logLevel: String?
    var keyID: String?, room: String?, user: String?, name: String?
    var publish = false, moderate = false
    var ttl = 3600, notBefore = 0

    static func parse(_ all: [String]) -> Options {
        var o = Options()
        var arguments = all
        o.minting = arguments.first == "mint-token"
        if o.minting { arguments.removeFirst() }
        var index = 0
        func value(_ option: String) -> String {
            index += 1
            guard index < arguments.count else { fail("\(option) needs a value") }
            return arguments[index]
        }
        func number(_ option: String) -> Int {
            let text = value(option)
            guard let n = Int(text) else { fail("\(option): \"\(text)\" is not a whole number") }
            return n
        }
        while index < arguments.count {
            let argument = arguments[index]
            switch argument {
            case "--help", "-h": printLine(usage); exit(0)
            case "--version": printLine(versionLine(program: "roomserver", details: ["protocol \(roomProtocolVersion)"])); exit(0)
            case "--config": o.configPath = value(argument)
            case "--log-level" where !o.minting: o.logLevel = value(argument)
            case "--key" where o.minting: o.keyID = value(argument)
            case "--room" where o.minting: o.room = value(argument)
            case "--user" where o.minting: o.user = value(argument)
            case "--name" where o.minting: o.name = value(argument)
            case "--publish" where o.minting: o.publish = true
            case "--moderate" where o.minting: o.moderate = true
            case "--ttl" where o.minting: o.ttl = number(argument)
            case "--not-before" where o.minting: o.notBefore = number(argument)
            default: fail("unknown option \"\(argument)\"\n\(usage)")
            }
            index += 1
        }
        return o
    }
}

// An installer's helper, before anything else: no configuration needed.
if CommandLine.arguments.count >= 2 && CommandLine.arguments[1] == "--print-spki-pin" {
    guard CommandLine.arguments.count == 3 else { fail("--print-spki-pin needs one certificate file (PEM)") }
    do {
        printLine(try TLSCertificates.spkiPin(ofFile: CommandLine.arguments[2]))
        exit(0)
    } catch {
        fail("--print-spki-pin: \(error)", status: 66)
    }
}

let options = Options.parse(Array(CommandLine.arguments.dropFirst()))
let configPath = options.configPath
let configuration = loadConfiguration(configPath)

if options.minting {
    guard let keyID = options.keyID else { fail("mint-token: --key KID is required") }
    guard let key = configuration.keys[keyID] else {
        fail("mint-token: no key \"\(keyID)\" in \(configPath ?? "") (have: \(configuration.keys.keys.sorted().joined(separator: ", ")))")
    }
    guard let room = options.room, !room.isEmpty else { fail("mint-token: --room ROOM is required") }
    guard let user = options.user, !user.isEmpty else { fail("mint-token: --user USER is required") }
    guard options.ttl > 0 else { fail("mint-token: --ttl must be positive") }
    let now = RoomTokenVerifier.systemClock()
    let claims = RoomTokenClaims(
        app: key.appID, room: room, sub: user, name: options.name ?? user,
        grants: RoomGrants(publish: options.publish, moderate: options.moderate),
        exp: now + options.notBefore + options.ttl, nbf: now + options.notBefore, iat: now)
    printLine(RoomToken.mint(claims: claims, keyID: keyID, secret: key.secret))
    exit(0)
}

if let logLevelOverride = options.logLevel {
    guard let level = LogLevel(name: logLevelOverride) else { fail(LogLevelNames.refusal("--log-level", logLevelOverride)) }
    Log.level = level
} else {
    Log.level = configuration.logLevel
}
if configuration.keys.isEmpty { Log.warning("roomserver: no [keys] configured; every token will be refused") }
// The signing keys and every participant's media keys are in this process's memory.
if let problem = PrivateMemory.keep() { Log.warning("roomserver: cannot keep keys out of core dumps: \(problem)") }

/// SIGHUP: the configuration file again. Everything is checked first (`load` validates the
/// whole file); an error leaves the server exactly as it was and says so with file, line and
/// key. Not in top-level code's closure, so nothing here is main-actor isolated.
func reloadConfiguration(_ server: RoomServer, path: String, logLevelOverridden: Bool) {
    _ = try? SystemdNotifier().notify("RELOADING=1")
    defer { _ = try? SystemdNotifier().notify("READY=1") }
    let next: RoomServerConfiguration
    do {
        next = try RoomServerConfiguration.load(path: path)
    } catch {
        Log.error("roomserver: SIGHUP: configuration not reloaded, nothing changed: \(error)")
        return
    }
    let report = server.reload(next)
    var applied = report.applied
    if !logLevelOverridden { Log.level = next.logLevel } else { applied.removeAll { $0 == "server.log_level" } }
    var parts: [String] = []
    if !applied.isEmpty { parts.append("applied " + applied.joined(separator: ", ")) }
    if !report.restartNeeded.isEmpty { parts.append("restart needed for " + report.restartNeeded.joined(separator: ", ")) }
    for refusal in report.refused { Log.error("roomserver: SIGHUP: \(refusal)") }
    Log.notice("roomserver: SIGHUP: configuration \(path) reloaded: \(parts.isEmpty ? "no change" : parts.joined(separator: "; "))")
    if next.keys.isEmpty { Log.warning("roomserver: no [keys] configured; every token will be refused") }
}

let loop: EventLoop
let server: RoomServer
let signals: SignalSource
do {
    loop = try EventLoop()
    server = RoomServer(configuration: configuration, loop: loop)
    try server.start()
    let path = configPath ?? ""
    let logLevelOverridden = options.logLevel != nil
    // SIGHUP used to end the process (its default action) without closing the rooms.
    signals = try SignalSource(signals: [SIGINT, SIGTERM, SIGHUP], loop: loop) { signal in
        if signal == SIGHUP {
            reloadConfiguration(server, path: path, logLevelOverridden: logLevelOverridden)
            return
        }
        Log.notice("roomserver: signal \(signal): closing rooms")
        _ = try? SystemdNotifier().stopping()
        server.shutdown { loop.stop() }
    }
} catch {
    Log.error("roomserver: \(error)")
    exit(71)
}
Log.notice("roomserver \(roomdVersion) running (protocol \(roomProtocolVersion), \(configuration.keys.count) keys, policy \(configuration.room.policy.rawValue))")
_ = try? SystemdNotifier().ready(status: "serving")
do {
    try loop.run()
} catch {
    Log.error("roomserver: event loop: \(error)")
    exit(71)
}
let stats = server.statistics
Log.notice("roomserver: stopped; \(stats.joins) joins, \(stats.packetsForwarded) packets forwarded, \(stats.dropped.total) datagrams dropped"
           + " (\(stats.dropped.srtpAuthentication) failed SRTP authentication, \(stats.dropped.srtpReplay) SRTP replays, \(stats.dropped.badBinding + stats.dropped.bindingReplay) bad or replayed bindings)")
for (app, tenant) in server.tenantStatistics.sorted(by: { $0.key < $1.key }) {
    Log.notice("roomserver: application \(app): \(tenant.joins) joins, \(tenant.roomsOpened) rooms, \(tenant.packetsForwarded) packets forwarded")
}
withExtendedLifetime(signals) {}
exit(0)
