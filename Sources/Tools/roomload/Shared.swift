import Glibc
import RoomSystem
import Synchronization

/// What every worker thread needs to know before it starts: immutable, so it crosses into the
/// thread bodies as it is.
struct ClientSpec: Sendable {
    var room: Int
    var index: Int
    var streamer: Bool
    var token: String
    /// Position among all streamers of the run, for spreading send phases over the 10 ms period.
    var streamerOrdinal: Int
}

struct LoadPlan: Sendable {
    var server: SocketAddress
    var packetIntervalNs: UInt64 = 10_000_000
    var payloadBytes = 60
    /// RFC 6464 level (−dBov) the streamers claim: a loud voice.
    var audioLevel: UInt8 = 15
    var totalStreamers = 1
    var participantsPerRoom = 10
    /// Handshakes in flight per worker at once (the rest wait), so the listen backlog and the
    /// server's accept loop never see a thundering herd.
    var maxConnecting = 32
    /// Signalling over TLS, trusting this CA file (nil: plain signalling).
    var tlsCAFile: String?
}

/// Latency histogram: 10 µs bins up to `binCount × 10 µs`, plus an overflow count.
struct DelayHistogram: Sendable {
    static let binNs: UInt64 = 10_000
    static let binCount = 20_000 // 200 ms
    var bins: [UInt64] = Array(repeating: 0, count: binCount)
    var overflow: UInt64 = 0
    var samples: UInt64 = 0
    var sumNs: UInt64 = 0
    var maxNs: UInt64 = 0

    mutating func merge(_ other: DelayHistogram) {
        for i in 0 ..< Self.binCount { bins[i] &+= other.bins[i] }
        overflow &+= other.overflow
        samples &+= other.samples
        sumNs &+= other.sumNs
        maxNs = max(maxNs, other.maxNs)
    }

    /// Samples longer than `ms` (to the bin: a bin straddling `ms` is not counted).
    func count(overMs ms: Double) -> UInt64 {
        let first = min(Self.binCount, Int((ms * 1e6 / Double(Self.binNs)).rounded(.up)))
        return bins[first...].reduce(overflow, &+)
    }

    /// The upper edge of the bin holding quantile `q` (0…1), in milliseconds; nil without samples.
    /// A quantile falling into the overflow reports the largest delay seen.
    func quantileMs(_ q: Double) -> Double? {
        guard samples > 0 else { return nil }
        let rank = UInt64((Double(samples) * q).rounded(.up))
        var seen: UInt64 = 0
        for i in 0 ..< Self.binCount {
            seen &+= bins[i]
            if seen >= max(rank, 1) { return Double(UInt64(i + 1) * Self.binNs) / 1e6 }
        }
        return Double(maxNs) / 1e6
    }
}

/// One worker's totals, handed to the main thread when it stops.
struct WorkerResult: Sendable {
    var histogram = DelayHistogram()
    /// RTP packets sent in the window, by streamers of this worker.
    var sentInWindow: UInt64 = 0
    /// Forwarded RTP packets the receivers of this worker should have got (sent in the window
    /// by the other streamers of their room, for every bound receiver).
    var expectedInWindow: UInt64 = 0
    /// Forwarded RTP packets (sent in the window) that arrived.
    var receivedInWindow: UInt64 = 0
    /// Sends the kernel refused (socket buffer full) or that failed, whole run.
    var sendFailures: UInt64 = 0
    /// Send ticks skipped because the worker fell more than one period behind.
    var skippedSends: UInt64 = 0
    var streamersOnStage = 0
    /// Receivers that missed at least one packet, and the worst one's loss (%).
    var lossyReceivers = 0
    var worstReceiverLossPct = 0.0
    var streamers = 0
    var clients = 0
    var failures: [String] = []
    /// Clients the server gave SRTP keys, and packets SRTP refused (to protect or to unprotect).
    var srtpClients = 0
    var srtpFailures: UInt64 = 0
    /// Per joined client: TCP connect to `welcome`, ms (TLS handshake included when TLS).
    var joinMs: [Double] = []
}

/// Shared between the main thread and the workers.
enum Shared {
    /// Clients welcomed, bound (binding answered) and, for streamers, on stage.
    static let ready = Atomic<Int>(0)
    /// Clients that failed for good (refused, connection lost).
    static let failed = Atomic<Int>(0)
    /// Measurement window on CLOCK_MONOTONIC, ns; 0 until the main thread sets it.
    static let windowStart = Atomic<UInt64>(0)
    static let windowEnd = Atomic<UInt64>(0)
    /// Set by the main thread: close everything and return.
    static let stop = Atomic<Bool>(false)
    /// The server's media port (from the welcomes), for the socket drop counters.
    static let mediaPort = Atomic<Int>(0)
    static let results = Mutex<[WorkerResult]>([])
    static let firstErrors = Mutex<[String]>([])

    static func noteError(_ text: String) {
        firstErrors.withLock { errors in
            if errors.count < 10 { errors.append(text) }
        }
    }
}
