import Glibc
import RoomSystem

/// Which way a datagram travels: `up` client → server, `down` server → client.
enum Direction: Int, CaseIterable {
    case up = 0, down = 1
    var name: String { self == .up ? "up" : "down" }
}

/// What `roomproxy` does to the datagrams of one direction. Percentages are 0 … 100.
struct Impairment: Equatable {
    var lossPct = 0.0
    var baseDelayMs = 0.0
    var jitterMs = 0.0
    var reorderPct = 0.0
    var duplicatePct = 0.0

    static let none = Impairment()
    var isNone: Bool { self == .none }
    /// True when datagrams are never held (no delay and no reordering): they go out at once.
    var isImmediate: Bool { baseDelayMs == 0 && jitterMs == 0 && reorderPct == 0 }
}

struct ProxyOptions {
    var listenHost = "127.0.0.2"
    var server: SocketAddress?
    var mediaPort: UInt16?
    var impairment = Impairment()
    var directions: Set<Direction> = [.up, .down]
    var seed: UInt64?
    var statsInterval: Double = 0
    var maxHoldMs = 50.0
    var flowIdleSeconds = 30.0
    var logLevel = LogLevel.notice

    func impairment(_ d: Direction) -> Impairment { directions.contains(d) ? impairment : .none }

    static let usage = """
    usage: roomproxy --server HOST:PORT --media-port PORT [options]

    A relay between roomd and roomserver that injects network impairment into the media.
    Listens on LISTEN with the server's own port numbers: TCP on PORT (signalling, relayed
    byte for byte) and UDP on the media port (relayed per client with impairment). Point
    roomd at LISTEN:PORT instead of the server; its media follows, since a client sends media
    to its signalling host and the udp_port of the welcome.

      --listen HOST          address to listen on (default 127.0.0.2; all of 127/8 is loopback)
      --server HOST:PORT     roomserver's signalling address (numeric)
      --media-port PORT      roomserver's UDP media port (on the server's host)
      --loss PCT             drop each datagram with probability PCT % (default 0)
      --jitter-ms MS         add a uniform random 0 … 2×MS ms to each datagram's delay, i.e.
                             ±MS around the mean (default 0); reorders when delays differ
      --delay-ms MS          fixed base delay added to every datagram (default 0)
      --reorder PCT          hold a datagram with probability PCT % and send it after the
                             next one of its flow and direction (an adjacent swap; default 0)
      --duplicate PCT        send a datagram twice with probability PCT %; the copy gets its
                             own delay (default 0)
      --direction D          up (client → server), down (server → client) or both (default)
      --seed N               seed of the random decisions (default: from the clock; printed)
      --stats SECONDS        print the counters as a JSON line every SECONDS (default: only
                             on SIGINT/SIGTERM)
      --max-hold-ms MS       longest a --reorder hold waits for a next datagram (default 50)
      --log-level LEVEL      error, warning, notice, info or debug (default notice)
      --help                 print this help and exit
    """

    enum Parsed { case run(ProxyOptions), exit(String, Int32) }

    static func parse(_ args: [String]) -> Parsed {
        var o = ProxyOptions()
        var i = 0
        func value() -> String? {
            i += 1
            return i < args.count ? args[i] : nil
        }
        func percent(_ name: String) -> Double? {
            guard let v = value(), let d = Double(v), d >= 0, d <= 100 else { return nil }
            return d
        }
        func milliseconds() -> Double? {
            guard let v = value(), let d = Double(v), d >= 0, d <= 10_000 else { return nil }
            return d
        }
        while i < args.count {
            let a = args[i]
            switch a {
            case "--help", "-h":
                return .exit(usage, 0)
            case "--listen":
                guard let v = value(), (try? SocketAddress(ip: v, port: 0)) != nil else {
                    return .exit("roomproxy: --listen needs a numeric IP address", 2)
                }
                o.listenHost = v
            case "--server":
                guard let v = value() else { return .exit("roomproxy: --server needs HOST:PORT", 2) }
                do {
                    o.server = try SocketAddress(parsing: v)
                } catch {
                    return .exit("roomproxy: --server: \(error)", 2)
                }
            case "--media-port":
                guard let v = value(), let p = UInt16(v), p > 0 else { return .exit("roomproxy: --media-port needs a port 1-65535", 2) }
                o.mediaPort = p
            case "--loss":
                guard let d = percent(a) else { return .exit("roomproxy: --loss needs a percentage 0-100", 2) }
                o.impairment.lossPct = d
            case "--reorder":
                guard let d = percent(a) else { return .exit("roomproxy: --reorder needs a percentage 0-100", 2) }
                o.impairment.reorderPct = d
            case "--duplicate":
                guard let d = percent(a) else { return .exit("roomproxy: --duplicate needs a percentage 0-100", 2) }
                o.impairment.duplicatePct = d
            case "--jitter-ms":
                guard let d = milliseconds() else { return .exit("roomproxy: --jitter-ms needs 0-10000 ms", 2) }
                o.impairment.jitterMs = d
            case "--delay-ms":
                guard let d = milliseconds() else { return .exit("roomproxy: --delay-ms needs 0-10000 ms", 2) }
                o.impairment.baseDelayMs = d
            case "--max-hold-ms":
                guard let d = milliseconds(), d > 0 else { return .exit("roomproxy: --max-hold-ms needs 1-10000 ms", 2) }
                o.maxHoldMs = d
            case "--direction":
                switch value() {
                case "up": o.directions = [.up]
                case "down": o.directions = [.down]
                case "both": o.directions = [.up, .down]
                default: return .exit("roomproxy: --direction is up, down or both", 2)
                }
            case "--seed":
                guard let v = value(), let s = UInt64(v) else { return .exit("roomproxy: --seed needs a non-negative integer", 2) }
                o.seed = s
            case "--stats":
                guard let v = value(), let d = Double(v), d > 0, d.isFinite else { return .exit("roomproxy: --stats needs seconds > 0", 2) }
                o.statsInterval = d
            case "--log-level":
                guard let v = value(), let l = LogLevel(name: v) else { return .exit("roomproxy: --log-level is error, warning, notice, info or debug", 2) }
                o.logLevel = l
            default:
                return .exit("roomproxy: unknown argument '\(a)'\n\n\(usage)", 2)
            }
            i += 1
        }
        guard o.server != nil else { return .exit("roomproxy: --server HOST:PORT is required\n\n\(usage)", 2) }
        guard o.mediaPort != nil else { return .exit("roomproxy: --media-port PORT is required\n\n\(usage)", 2) }
        return .run(o)
    }
}
