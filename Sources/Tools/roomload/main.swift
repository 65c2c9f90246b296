import Glibc
import RoomCrypto
import RoomModel
import RoomProtocol
import RoomServerKit
import RoomSystem

// roomload: the server load benchmark (docs/benchmarks.md, "Server load (roomload)").
// Synthetic clients that speak protocol 1 — hello with a token, welcome, binding datagrams,
// keepalive pings — in one process on a few event-loop threads; streamers send a 10 ms RTP
// packet every 10 ms carrying its send time, receivers histogram the forwarding delay.

/// The command line: parsing and `--help` both come from this table (RoomSystem.CommandLineParser).
let commandOptions = [
    CommandOption("--server", "HOST:PORT", help: "signalling address of the server (media goes to the welcome's udp_port)"),
    CommandOption("--config", "FILE", help: "roomserver configuration: tokens are minted with its [keys]\n(KID from --key-id, else \"dev\", else the first)"),
    CommandOption("--key-id", "KID", help: "mint with this key (with --secret, or from --config)"),
    CommandOption("--secret", "HEX", help: "the key's secret in hex, instead of --config"),
    CommandOption("--app", "APP", help: "the key's application (default roomd-dev)"),
    CommandOption("--rooms", "N", help: "rooms (default 50)"),
    CommandOption("--participants", "N", help: "participants per room (default 10)"),
    CommandOption("--streamers", "N", help: "streamers per room, the first to join (default 3)"),
    CommandOption("--duration", "SECONDS", help: "the measured window (default 20)"),
    CommandOption("--warmup", "SECONDS", help: "before the window (default 5)"),
    CommandOption("--server-pid", "PID", help: "the server's process, for its CPU share over the window"),
    CommandOption("--threads", "N", help: "event-loop threads for the clients (rooms are split between them)"),
    CommandOption("--payload", "BYTES", help: "RTP payload size (default 60)"),
    CommandOption("--level", "DBOV", help: "the RFC 6464 level the streamers claim, 0-127 (default 15)"),
    CommandOption("--join-timeout", "SECONDS", help: "how long every client may take to join (default 60)"),
    CommandOption("--room-prefix", "TEXT", help: "room names are TEXT0, TEXT1, … (default load)"),
    CommandOption("--tls-ca-file", "FILE", help: "signalling over TLS 1.3, trusting FILE (default: plain signalling, for\nthe server's plain_listen)"),
    CommandOption("--help", aliases: ["-h"], help: "print this help and exit"),
]

let usage = """
usage: roomload --server HOST:PORT (--config SERVER.conf [--key-id KID] | --key-id KID --secret HEX [--app APP])
                [--rooms 50] [--participants 10] [--streamers 3] [--duration 20] [--warmup 5]
                [--server-pid PID] [--threads 1] [--payload 60] [--level 15] [--join-timeout 60]
                [--room-prefix load] [--tls-ca-file CA.pem]

Opens rooms × participants synthetic clients against a running roomserver (loopback), each
with its own TCP signalling connection and UDP media socket. The first --streamers of every
room join as streamers (publish grant; the room policy must put them on stage: open policy
and speaker_limit ≥ streamers) and send one RTP packet (Opus-sized payload, RFC 6464 level,
V bit) every 10 ms; everyone records the forwarding delay (receive − send time, both
CLOCK_MONOTONIC) of what the server forwards. After --warmup seconds the window of
--duration seconds is measured. Prints JSON lines (docs/benchmarks.md).

""" + "\n" + CommandLineParser.help(commandOptions, column: 25)

/// Exits with `status` after `roomload: TEXT` on standard error.
func fail(_ text: String, status: Int32) -> Never {
    printError("roomload: \(text)")
    exit(status)
}

/// A usage error, in the shape and with the exit status every program uses.
func usageError(_ text: String) -> Never { CommandLineUsageError(text).exit(program: "roomload") }

struct Arguments {
    var server: String?
    var config: String?
    var keyID: String?
    var secret: String?
    var app = "roomd-dev"
    var rooms = 50
    var participants = 10
    var streamers = 3
    var duration = 20.0
    var warmup = 5.0
    var serverPID: Int?
    var threads = 1
    var payload = 60
    var level = 15
    var joinTimeout = 60.0
    var roomPrefix = "load"
    var tlsCAFile: String?

    static func parse(_ arguments: [String]) -> Arguments {
        var a = Arguments()
        let parsed: ParsedCommandLine
        do throws(CommandLineUsageError) {
            parsed = try CommandLineParser.parse(arguments, options: commandOptions)
        } catch {
            usageError(error.message)
        }
        for (option, value) in parsed.options {
            let text = value ?? ""
            func int(_ range: ClosedRange<Int>) -> Int {
                guard let n = Int(text), range.contains(n) else { usageError("\(option): \"\(text)\" is not a whole number in \(range)") }
                return n
            }
            func seconds() -> Double {
                guard let s = Double(text), s >= 0, s < 86_400 else { usageError("\(option): \"\(text)\" is not a number of seconds") }
                return s
            }
            switch option {
            case "--help": printLine(usage); exit(0)
            case "--server": a.server = text
            case "--config": a.config = text
            case "--key-id": a.keyID = text
            case "--secret": a.secret = text
            case "--app": a.app = text
            case "--rooms": a.rooms = int(1 ... 10_000)
            case "--participants": a.participants = int(1 ... 10_000)
            case "--streamers": a.streamers = int(0 ... 10_000)
            case "--duration": a.duration = seconds()
            case "--warmup": a.warmup = seconds()
            case "--server-pid": a.serverPID = int(1 ... Int(Int32.max))
            case "--threads": a.threads = int(1 ... 64)
            case "--payload": a.payload = int(LoadPayload.minimumSize ... 1000)
            case "--level": a.level = int(0 ... 127)
            case "--join-timeout": a.joinTimeout = seconds()
            case "--room-prefix": a.roomPrefix = text
            case "--tls-ca-file": a.tlsCAFile = text
            default: break
            }
        }
        guard a.server != nil else { usageError("--server HOST:PORT is required") }
        guard a.config != nil || (a.keyID != nil && a.secret != nil) else {
            usageError("--config FILE or --key-id KID --secret HEX is required")
        }
        guard a.streamers <= a.participants else { usageError("--streamers exceeds --participants") }
        guard a.duration > 0 else { usageError("--duration must be positive") }
        return a
    }
}

// MARK: - Keys

struct SigningKey {
    var keyID: String
    var app: String
    var secret: SecretBytes
}

/// The signing key from a roomserver configuration's `[keys]`, read by roomserver's own parser.
func loadKey(config path: String, keyID wanted: String?) -> SigningKey {
    let configuration: RoomServerConfiguration
    do { configuration = try RoomServerConfiguration.load(path: path) } catch { fail("\(error)", status: 66) }
    let id = wanted ?? (configuration.keys["dev"] != nil ? "dev" : configuration.keys.keys.sorted().first)
    guard let id, let key = configuration.keys[id] else { usageError("\(path): no key \"\(wanted ?? "")\" in [keys]") }
    return SigningKey(keyID: key.keyID, app: key.appID, secret: key.secret)
}

// MARK: - CPU accounting

/// utime + stime of a process, in clock ticks (/proc/PID/stat fields 14 and 15).
func processTicks(_ pid: Int) -> UInt64? {
    guard let text = try? Files.readText("/proc/\(pid)/stat"), let close = text.lastIndex(of: ")") else { return nil }
    let fields = text[text.index(after: close)...].split(separator: " ")
    // After "pid (comm)": state is field 3, so utime (14) and stime (15) are at 11 and 12.
    guard fields.count > 12, let u = UInt64(fields[11]), let s = UInt64(fields[12]) else { return nil }
    return u + s
}

/// (busy, total) jiffies of the whole machine, from the first line of /proc/stat.
func hostTicks() -> (busy: UInt64, total: UInt64)? {
    guard let text = try? Files.readText("/proc/stat"), let line = text.split(separator: "\n").first else { return nil }
    let values = line.split(separator: " ").dropFirst().compactMap { UInt64($0) }
    guard values.count >= 5 else { return nil }
    let total = values.prefix(8).reduce(0, +)
    return (total - values[3] - values[4], total)
}

/// Datagrams the kernel dropped at full receive buffers (/proc/net/udp{,6} "drops"): on the
/// server's media socket, and on the clients' sockets (connected to that port).
func udpDrops(mediaPort: Int) -> (server: UInt64, clients: UInt64) {
    var server: UInt64 = 0, clients: UInt64 = 0
    for file in ["/proc/net/udp", "/proc/net/udp6"] {
        guard let text = try? Files.readText(file) else { continue }
        for line in text.split(separator: "\n").dropFirst() {
            let f = line.split(separator: " ")
            guard f.count > 12, let drops = UInt64(f[f.count - 1]) else { continue }
            func port(_ a: Substring) -> Int? { a.split(separator: ":").last.flatMap { Int($0, radix: 16) } }
            if port(f[1]) == mediaPort { server += drops } else if port(f[2]) == mediaPort { clients += drops }
        }
    }
    return (server, clients)
}

struct CPUSample {
    var time: UInt64
    var serverTicks: UInt64?
    var ownNs: UInt64
    var host: (busy: UInt64, total: UInt64)?
    var drops: (server: UInt64, clients: UInt64)

    static func take(serverPID: Int?) -> CPUSample {
        CPUSample(time: monotonicNanoseconds(), serverTicks: serverPID.flatMap(processTicks),
                  ownNs: ProcessStats.cpuNanoseconds(), host: hostTicks(),
                  drops: udpDrops(mediaPort: Shared.mediaPort.load(ordering: .relaxed)))
    }
}

func sleepUntil(_ deadline: UInt64) {
    while true {
        let now = monotonicNanoseconds()
        if now >= deadline { return }
        let ms = Int((deadline - now + 999_999) / 1_000_000)
        sleepMilliseconds(min(ms, 100))
    }
}

/// A JSON number with at most 3 decimals.
func number(_ x: Double) -> String {
    guard x.isFinite else { return "null" }
    let r = (x * 1000).rounded() / 1000
    return r == r.rounded() && abs(r) < 1e15 ? String(Int64(r)) : "\(r)"
}

// MARK: - Run

let args = Arguments.parse(Array(CommandLine.arguments.dropFirst()))
let serverAddress: SocketAddress
do { serverAddress = try SocketAddress(parsing: args.server!) } catch { usageError("--server: \(error)") }
guard serverAddress.family == .ipv4 || serverAddress.family == .ipv6 else { usageError("--server: not an IP address") }

let key: SigningKey
if let config = args.config {
    key = loadKey(config: config, keyID: args.keyID)
} else {
    guard let secret = RoomServerConfiguration.decodeHex(args.secret!) else { usageError("--secret: not hex") }
    key = SigningKey(keyID: args.keyID!, app: args.app, secret: SecretBytes(secret))
}

let totalClients = args.rooms * args.participants
// Two descriptors per client (TCP + UDP) and a few for the loops.
let needed = 2 * totalClients + 64
let descriptors = FileDescriptorLimit.raiseToHard()   // the same raise roomserver makes at start
if descriptors.soft < needed { fail("needs \(needed) file descriptors, the hard limit is \(descriptors.hard)", status: 71) }

// Tokens for everyone, minted up front (not timed).
let now = RoomTokenVerifier.systemClock()
var specsByThread: [[ClientSpec]] = Array(repeating: [], count: args.threads)
var streamerOrdinal = 0
for room in 0 ..< args.rooms {
    let roomName = "\(args.roomPrefix)-\(room)"
    for index in 0 ..< args.participants {
        let streamer = index < args.streamers
        let user = "\(roomName)-p\(index)"
        let claims = RoomTokenClaims(
            app: key.app, room: roomName, sub: user, name: user, grants: RoomGrants(publish: streamer, moderate: false),
            exp: now + 3600 + Int(args.warmup + args.duration), nbf: now - 60, iat: now)
        let token = RoomToken.mint(claims: claims, keyID: key.keyID, secret: key.secret)
        // Whole rooms per thread: a room's loss accounting stays inside one worker.
        specsByThread[room % args.threads].append(
            ClientSpec(room: room, index: index, streamer: streamer, token: token, streamerOrdinal: streamer ? streamerOrdinal : 0))
        if streamer { streamerOrdinal += 1 }
    }
}

var plan = LoadPlan(server: serverAddress)
plan.payloadBytes = args.payload
plan.audioLevel = UInt8(args.level)
plan.totalStreamers = max(streamerOrdinal, 1)
plan.participantsPerRoom = args.participants
plan.tlsCAFile = args.tlsCAFile
let finalPlan = plan

printError("roomload: \(totalClients) clients (\(args.rooms) rooms × \(args.participants), \(args.streamers) streamers each) on \(args.threads) thread(s) → \(serverAddress)")
let joinStart = monotonicNanoseconds()
var threads: [NativeThread] = []
for (n, specs) in specsByThread.enumerated() where !specs.isEmpty {
    do {
        threads.append(try NativeThread(name: "roomload-\(n)") {
            let result: WorkerResult
            do {
                let worker = try LoadWorker(plan: finalPlan, specs: specs)
                result = worker.run()
            } catch {
                var r = WorkerResult()
                r.failures = ["worker \(n): \(error)"]
                Shared.failed.add(specs.count, ordering: .relaxed)
                result = r
            }
            Shared.results.withLock { $0.append(result) }
        })
    } catch {
        fail("\(error)", status: 71)
    }
}

func stopWorkers(_ threads: [NativeThread]) {
    Shared.stop.store(true, ordering: .relaxed)
    for t in threads { t.join() }
}

// Wait for every client to be welcomed, bound and (streamers) on stage.
let joinDeadline = joinStart + UInt64(args.joinTimeout * 1e9)
while Shared.ready.load(ordering: .relaxed) + Shared.failed.load(ordering: .relaxed) < totalClients
    && monotonicNanoseconds() < joinDeadline {
    sleepMilliseconds(20)
}
let ready = Shared.ready.load(ordering: .relaxed)
let joinMs = Double(monotonicNanoseconds() - joinStart) / 1e6
if ready < totalClients {
    let errors = Shared.firstErrors.withLock { $0 }
    stopWorkers(threads)
    printError("roomload: only \(ready) of \(totalClients) clients joined within \(args.joinTimeout) s (\(Shared.failed.load(ordering: .relaxed)) failed)")
    for e in errors { printError("roomload:   \(e)") }
    exit(1)
}
printError("roomload: all \(totalClients) joined in \(Int(joinMs)) ms; warm-up \(args.warmup) s, window \(args.duration) s")

let windowStart = monotonicNanoseconds() + UInt64(args.warmup * 1e9)
let windowEnd = windowStart + UInt64(args.duration * 1e9)
Shared.windowEnd.store(windowEnd, ordering: .relaxed)
Shared.windowStart.store(windowStart, ordering: .releasing)

sleepUntil(windowStart)
let before = CPUSample.take(serverPID: args.serverPID)
sleepUntil(windowEnd)
let after = CPUSample.take(serverPID: args.serverPID)
// In-flight packets of the window's last moments still count: give them time to arrive.
sleepMilliseconds(500)
stopWorkers(threads)

// MARK: - Report

var histogram = DelayHistogram()
var sent: UInt64 = 0, expected: UInt64 = 0, received: UInt64 = 0, sendFailures: UInt64 = 0, skipped: UInt64 = 0
var onStage = 0, streamers = 0, lossyReceivers = 0, worstLoss = 0.0
var failures: [String] = []
var srtpClients = 0, srtpFailures: UInt64 = 0
var clientJoinMs: [Double] = []
for r in Shared.results.withLock({ $0 }) {
    clientJoinMs += r.joinMs
    srtpClients += r.srtpClients
    srtpFailures += r.srtpFailures
    histogram.merge(r.histogram)
    sent += r.sentInWindow
    expected += r.expectedInWindow
    received += r.receivedInWindow
    sendFailures += r.sendFailures
    skipped += r.skippedSends
    onStage += r.streamersOnStage
    lossyReceivers += r.lossyReceivers
    worstLoss = max(worstLoss, r.worstReceiverLossPct)
    streamers += r.streamers
    failures += r.failures
}
let lateFailures = Shared.failed.load(ordering: .relaxed)
if lateFailures > 0 {
    printError("roomload: \(lateFailures) clients failed during the run:")
    for e in Shared.firstErrors.withLock({ $0 }) { printError("roomload:   \(e)") }
}

let window = Double(after.time - before.time) / 1e9
// Whether the server encrypted media (it sends SRTP keys in welcome, or none: `media.srtp = no`).
let srtpState = srtpClients == 0 ? "off" : srtpClients == totalClients ? "on" : "mixed"
let context = "\"srtp\":\"\(srtpState)\",\"rooms\":\(args.rooms),\"participants\":\(totalClients),\"streamers_per_room\":\(args.streamers)"
func emit(_ metric: String, _ value: Double?, _ unit: String, _ extra: String = "") {
    guard let value else { return }
    printLine("{\"bench\":\"server\",\"metric\":\"\(metric)\",\"value\":\(number(value)),\"unit\":\"\(unit)\",\(context)\(extra)}")
}

// How long joining took (connect to welcome), all clients connecting at once, a few at a time
// per worker: what an appliance reconnecting after a server restart waits.
clientJoinMs.sort()
if !clientJoinMs.isEmpty {
    emit("server.join_ms_p50", clientJoinMs[clientJoinMs.count / 2], "ms", ",\"joins\":\(clientJoinMs.count)")
    emit("server.join_ms_max", clientJoinMs.last!, "ms", ",\"joins\":\(clientJoinMs.count)")
}

let clockTicks = Double(sysconf(Int32(_SC_CLK_TCK)))
if let a = before.serverTicks, let b = after.serverTicks {
    let pct = Double(b - a) / clockTicks / window * 100
    emit("server.cpu_pct_\(totalClients)p", pct, "%", ",\"window_s\":\(number(window))")
} else if args.serverPID != nil {
    printError("roomload: could not read /proc/\(args.serverPID!)/stat; no server CPU figure")
}
let p50 = histogram.quantileMs(0.50)
let p99 = histogram.quantileMs(0.99)
let p999 = histogram.quantileMs(0.999)
let mean = histogram.samples > 0 ? Double(histogram.sumNs) / Double(histogram.samples) / 1e6 : nil
emit("server.p99_forward_ms", p99, "ms",
     ",\"samples\":\(histogram.samples),\"p999_ms\":\(p999.map(number) ?? "null"),\"max_ms\":\(number(Double(histogram.maxNs) / 1e6)),\"mean_ms\":\(mean.map(number) ?? "null")")
emit("server.p50_forward_ms", p50, "ms")
// What a listener's jitter buffer would play late: roomd's buffer waits ~20 ms on a clean
// network (docs/jitter-buffer.md), so a packet the server held longer than that is late.
emit("server.late_forward_20ms", Double(histogram.count(overMs: 20)), "packets",
     ",\"samples\":\(histogram.samples),\"measure\":\"forwarded packets delayed by the server more than 20 ms\"")
let loss = expected > 0 ? Double(expected - min(received, expected)) / Double(expected) * 100 : nil
emit("server.forward_loss_pct", loss, "%",
     ",\"expected\":\(expected),\"received\":\(received),\"sent\":\(sent),\"server_socket_drops\":\(after.drops.server - before.drops.server),\"client_socket_drops\":\(after.drops.clients - before.drops.clients)")
emit("server.packets_forwarded_per_s", Double(received) / Double(args.duration), "pkt/s",
     ",\"measure\":\"forwarded datagrams delivered to the synthetic clients\",\"sent_per_s\":\(number(Double(sent) / Double(args.duration)))")
var hostBusy = "null"
if let a = before.host, let b = after.host, b.total > a.total {
    hostBusy = number(Double(b.busy - a.busy) / Double(b.total - a.total) * 100 * Double(sysconf(Int32(_SC_NPROCESSORS_ONLN))))
}
emit("roomload.cpu_pct", Double(after.ownNs - before.ownNs) / 1e9 / window * 100, "%",
     ",\"threads\":\(args.threads),\"host_busy_pct\":\(hostBusy),\"cores\":\(sysconf(Int32(_SC_NPROCESSORS_ONLN))),\"skipped_sends\":\(skipped),\"send_failures\":\(sendFailures)")
if srtpFailures > 0 { printError("roomload: SRTP refused \(srtpFailures) packets") }
printError("roomload: media SRTP \(srtpState); \(onStage)/\(streamers) streamers on stage; join \(Int(joinMs)) ms; \(histogram.overflow) samples over 200 ms; \(lossyReceivers) receivers missed packets (worst \(number(worstLoss)) %)")
exit(lateFailures > 0 ? 1 : 0)
