import Glibc
import RoomBase
import RoomBuildInfo
import RoomCrypto
import RoomModel
import RoomProtocol
import RoomServerKit
import RoomSystem
import RoomTLS

// Wiring only: options, configuration, the loop on the main thread, signals.

/// The server's command line; `mintOptions` is `roomserver mint-token`'s. Parsing and `--help`
/// both come from these tables (RoomSystem.CommandLineParser).
let configOption = CommandOption("--config", "FILE", help: "configuration file (see docs/roomserver.conf.example)")
let helpOption = CommandOption("--help", aliases: ["-h"], help: "print this help and exit")
let serverOptions = [
    configOption,
    CommandOption("--log-level", "LEVEL", help: "override server.log_level: error, warning, notice, info or debug"),
    CommandOption("--print-spki-pin", "CERT", help: "print the SPKI pin of the first certificate in CERT (PEM), the\nvalue for roomd.conf's room.tls_pin, and exit"),
    CommandOption("--version", help: "print the version and exit"),
    helpOption,
]
let mintOnlyOptions = [
    CommandOption("--key", "KID", help: "the signing key's id in the configuration's [keys] (HS256), or in\n[public_keys] with --signing-key (EdDSA)"),
    CommandOption("--signing-key", "FILE", help: "sign with this Ed25519 private key (PEM; openssl genpkey -algorithm\ned25519), whose public key is [public_keys] KID: the token then\ncarries the room's [placement] row (backend, server), which\nappliances follow when their room.placement_key verifies it"),
    CommandOption("--room", "ROOM", help: "the room the token admits to"),
    CommandOption("--user", "USER", help: "the participant's user id"),
    CommandOption("--name", "NAME", help: "display name (default: USER)"),
    CommandOption("--publish", help: "grant publish (may go on stage)"),
    CommandOption("--moderate", help: "grant moderate"),
    CommandOption("--ttl", "SECONDS", help: "lifetime (default 3600)"),
    CommandOption("--not-before", "SECONDS", help: "valid from now + SECONDS (default 0)"),
]
let mintOptions = [configOption, helpOption] + mintOnlyOptions

let usage = """
usage: roomserver --config FILE [--log-level LEVEL]
       roomserver --print-spki-pin CERT.pem
       roomserver mint-token --config FILE --key KID [--signing-key FILE] --room ROOM --user USER
                  [--name NAME] [--publish] [--moderate] [--ttl SECONDS] [--not-before SECONDS]

Runs the voice-room service (signalling over TLS 1.3, RTP forwarding over UDP) described by
the configuration file (docs/roomserver.md). SIGINT or SIGTERM closes every room with reason
room_closed and exits 0. SIGHUP reads the configuration file again (keys, token leeway and
room settings apply without closing a room; the TLS certificate and key are read again for
new connections; an invalid file changes nothing).

""" + "\n" + CommandLineParser.help(serverOptions, column: 25) + """


mint-token prints a token signed with key KID of the configuration. A room listed in the
configuration's [placement] gets its row as the token's backend and server claims (placement
in the token, docs/scaling.md); such a token must be signed with --signing-key, since
appliances hold only the public key:

""" + CommandLineParser.help(mintOnlyOptions, column: 25)

/// Exits with `status` after `roomserver: TEXT` on standard error.
func fail(_ text: String, status: Int32) -> Never {
    printError("roomserver: \(text)")
    exit(status)
}

/// A usage error: the one shape and exit status of every program (CommandLineUsageError).
func usageError(_ message: String) -> Never { CommandLineUsageError(message).exit(program: "roomserver") }

func loadConfiguration(_ path: String?) -> RoomServerConfiguration {
    guard let path else { usageError("--config FILE is required") }
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
    var spkiPinOf: String?
    var keyID: String?, room: String?, user: String?, name: String?, signingKeyFile: String?
    var publish = false, moderate = false
    var ttl = 3600, notBefore = 0

    static func parse(_ all: [String]) -> Options {
        var o = Options()
        var arguments = all
        o.minting = arguments.first == "mint-token"
        if o.minting { arguments.removeFirst() }
        let parsed: ParsedCommandLine
        do throws(CommandLineUsageError) {
            parsed = try CommandLineParser.parse(arguments, options: o.minting ? mintOptions : serverOptions)
        } catch {
            usageError(error.message)
        }
        func number(_ option: String, _ text: String) -> Int {
            guard let n = Int(text) else { usageError("\(option): \"\(text)\" is not a whole number") }
            return n
        }
        for (name, value) in parsed.options {
            let v = value ?? ""
            switch name {
            case "--help": printLine(usage); exit(0)
            case "--version": printLine(versionLine(program: "roomserver", details: ["protocol \(roomProtocolVersion)"])); exit(0)
            case "--config": o.configPath = v
            case "--log-level": o.logLevel = v
            case "--print-spki-pin": o.spkiPinOf = v
            case "--key": o.keyID = v
            case "--signing-key": o.signingKeyFile = v
            case "--room": o.room = v
            case "--user": o.user = v
            case "--name": o.name = v
            case "--publish": o.publish = true
            case "--moderate": o.moderate = true
            case "--ttl": o.ttl = number(name, v)
            case "--not-before": o.notBefore = number(name, v)
            default: break
            }
        }
        return o
    }
}

let options = Options.parse(Array(CommandLine.arguments.dropFirst()))

// An installer's helper: no configuration needed.
if let certificate = options.spkiPinOf {
    do {
        printLine(try TLSCertificates.spkiPin(ofFile: certificate))
        exit(0)
    } catch {
        fail("--print-spki-pin: \(error)", status: 66)
    }
}
let configPath = options.configPath
let configuration = loadConfiguration(configPath)

/// The Ed25519 key of `--signing-key FILE`, checked to be the private half of `[public_keys]`
/// `keyID`, so every server and appliance holding that public key accepts what it signs.
func loadSigningKey(_ file: String, keyID: String) -> (Ed25519PrivateKey, appID: String) {
    guard let entry = configuration.publicKeys[keyID] else {
        usageError("mint-token: --signing-key needs --key to name its public key in [public_keys] of \(configPath ?? "") (have: \(configuration.publicKeys.keys.sorted().joined(separator: ", ")))")
    }
    let key: Ed25519PrivateKey
    do { key = try Ed25519PrivateKey(pem: try Files.readText(file)) } catch { fail("mint-token: --signing-key \(file): \(error)", status: 66) }
    guard key.publicKey == entry.key else {
        usageError("mint-token: --signing-key \(file) is not the private key of [public_keys] \(keyID)")
    }
    return (key, entry.appID)
}

if options.minting {
    guard let keyID = options.keyID else { usageError("mint-token: --key KID is required") }
    guard let room = options.room, !room.isEmpty else { usageError("mint-token: --room ROOM is required") }
    guard let user = options.user, !user.isEmpty else { usageError("mint-token: --user USER is required") }
    guard options.ttl > 0 else { usageError("mint-token: --ttl must be positive") }
    let placement = configuration.placement[room]
    let now = RoomTokenVerifier.systemClock()
    func claims(app: String) -> RoomTokenClaims {
        RoomTokenClaims(
            app: app, room: room, sub: user, name: options.name ?? user,
            grants: RoomGrants(publish: options.publish, moderate: options.moderate),
            exp: now + options.notBefore + options.ttl, nbf: now + options.notBefore, iat: now,
            backend: placement?.backend.rawValue, server: placement?.server)
    }
    if let file = options.signingKeyFile {
        let (signingKey, app) = loadSigningKey(file, keyID: keyID)
        printLine(RoomToken.mint(claims: claims(app: app), keyID: keyID, signingKey: signingKey))
        exit(0)
    }
    guard let key = configuration.keys[keyID] else {
        usageError("mint-token: no key \"\(keyID)\" in [keys] of \(configPath ?? "") (have: \(configuration.keys.keys.sorted().joined(separator: ", ")))")
    }
    // An HS256 token cannot carry placement: appliances, holding no secret, could not check it.
    if placement != nil {
        usageError("mint-token: room \"\(room)\" is in [placement]: its tokens carry where it is, so sign them with --signing-key (EdDSA), which appliances can check")
    }
    printLine(RoomToken.mint(claims: claims(app: key.appID), keyID: keyID, secret: key.secret))
    exit(0)
}

if let logLevelOverride = options.logLevel {
    guard let level = LogLevel(name: logLevelOverride) else { usageError(LogLevelNames.refusal("--log-level", logLevelOverride)) }
    Log.level = level
} else {
    Log.level = configuration.logLevel
}
if configuration.keys.isEmpty && configuration.publicKeys.isEmpty { Log.warning("roomserver: no [keys] or [public_keys] configured; every token will be refused") }
// The signing keys and every participant's media keys are in this process's memory.
if let problem = PrivateMemory.keep() { Log.warning("roomserver: cannot keep keys out of core dumps: \(problem)") }

/// SIGHUP: the configuration file again. Everything is checked first (`load` validates the
/// whole file); an error leaves the server exactly as it was and says so with file, line and
/// key. Every worker takes it; the outcome is logged once. Not in top-level code's closure, so
/// nothing here is main-actor isolated.
func reloadConfiguration(_ workers: RoomServerWorkers, path: String, logLevelOverridden: Bool) {
    _ = try? SystemdNotifier().notify("RELOADING=1")
    let next: RoomServerConfiguration
    do {
        next = try RoomServerConfiguration.load(path: path)
    } catch {
        Log.error("roomserver: SIGHUP: configuration not reloaded, nothing changed: \(error)")
        _ = try? SystemdNotifier().notify("READY=1")
        return
    }
    workers.reload(next) { report in
        var applied = report.applied
        if !logLevelOverridden { Log.level = next.logLevel } else { applied.removeAll { $0 == "server.log_level" } }
        var parts: [String] = []
        if !applied.isEmpty { parts.append("applied " + applied.joined(separator: ", ")) }
        if !report.restartNeeded.isEmpty { parts.append("restart needed for " + report.restartNeeded.joined(separator: ", ")) }
        for refusal in report.refused { Log.error("roomserver: SIGHUP: \(refusal)") }
        Log.notice("roomserver: SIGHUP: configuration \(path) reloaded: \(parts.isEmpty ? "no change" : parts.joined(separator: "; "))")
        if next.keys.isEmpty && next.publicKeys.isEmpty { Log.warning("roomserver: no [keys] or [public_keys] configured; every token will be refused") }
        _ = try? SystemdNotifier().notify("READY=1")
    }
}

/// The workers, once started: the signal handler is set up before them (their threads must
/// inherit the blocked signal mask), so it finds them here.
final class Running: @unchecked Sendable {
    var workers: RoomServerWorkers?
}

let workerCount = configuration.workers ?? min(NativeThread.usableCPUCount(), RoomServerWorkers.most)
let running = Running()
let loop: EventLoop
let workers: RoomServerWorkers
let signals: SignalSource
do {
    loop = try EventLoop()
    let path = configPath ?? ""
    let logLevelOverridden = options.logLevel != nil
    // SIGHUP used to end the process (its default action) without closing the rooms.
    signals = try SignalSource(signals: [SIGINT, SIGTERM, SIGHUP], loop: loop) { signal in
        guard let workers = running.workers else { return }
        if signal == SIGHUP {
            reloadConfiguration(workers, path: path, logLevelOverridden: logLevelOverridden)
            return
        }
        Log.notice("roomserver: signal \(signal): closing rooms")
        _ = try? SystemdNotifier().stopping()
        workers.shutdown()
        loop.stop()
    }
    workers = try RoomServerWorkers(configuration: configuration, count: workerCount)
    running.workers = workers
} catch {
    Log.error("roomserver: \(error)")
    exit(ExitStatus.osError)
}
Log.notice("roomserver \(roomdVersion) running (protocol \(roomProtocolVersion), \(configuration.keys.count) keys, policy \(configuration.room.policy.rawValue), \(workerCount) worker\(workerCount == 1 ? "" : "s"))")
_ = try? SystemdNotifier().ready(status: "serving")
do {
    try loop.run()
} catch {
    Log.error("roomserver: event loop: \(error)")
    exit(ExitStatus.osError)
}
workers.wait()
let (stats, tenants) = workers.totals()
Log.notice("roomserver: stopped; \(stats.joins) joins, \(stats.packetsForwarded) packets forwarded, \(stats.dropped.total) datagrams dropped"
           + " (\(stats.dropped.srtpAuthentication) failed SRTP authentication, \(stats.dropped.srtpReplay) SRTP replays, \(stats.dropped.badBinding + stats.dropped.bindingReplay) bad or replayed bindings)")
for (app, tenant) in tenants.sorted(by: { $0.key < $1.key }) {
    Log.notice("roomserver: application \(app): \(tenant.joins) joins, \(tenant.roomsOpened) rooms, \(tenant.packetsForwarded) packets forwarded")
}
withExtendedLifetime(signals) {}
exit(0)
