import RoomModel
import RoomSystem

/// Where and when a session's next connection attempt goes, and whether the outage has been
/// reported `failed` (docs/room-client.md, "Attempts and failover"): the address index that a
/// failed attempt moves on, the failures in a row that lengthen the back-off, and since when
/// there has been no connection. The session changes its state and sets its timers from the
/// answers; this only counts. A plain value.
struct ReconnectSchedule {
    /// The configured endpoint of the next attempt (modulo their count).
    private(set) var addressIndex = 0
    /// Failed attempts since the outage began (it also picks among a name's addresses).
    private(set) var consecutiveFailures = 0
    private var disconnectedSinceNs: UInt64?
    /// `failed` was reported for this outage (once per outage, not per attempt).
    private(set) var reportedFailed = false
    private var random = SystemRandomNumberGenerator()

    /// New servers (`reconfigure`): the next attempt goes to the first one.
    mutating func restartAddressList() {
        addressIndex = 0
    }

    /// No connection from `now` on (`start`, or a joined connection lost): count afresh. The
    /// address stays, so the first retry goes to the same server.
    mutating func outageBegan(now: UInt64) {
        reportedFailed = false
        consecutiveFailures = 0
        disconnectedSinceNs = now
    }

    /// A `welcome`: the outage is over.
    mutating func joined() {
        consecutiveFailures = 0
        reportedFailed = false
        disconnectedSinceNs = nil
    }

    /// A connection attempt that did not end in `welcome`.
    mutating func countFailedAttempt() {
        consecutiveFailures += 1
        addressIndex += 1  // failover: the next attempt goes to the next address
    }

    /// True when the outage is to be reported `failed` now: after `threshold` failed attempts
    /// in a row, `timeout` without a connection, or a failure retrying cannot fix (`fatal`).
    mutating func reportsFailed(fatal: Bool, now: UInt64, threshold: Int, timeout: Duration) -> Bool {
        let since = disconnectedSinceNs ?? now
        if (!reportedFailed
            && (fatal || consecutiveFailures >= threshold
                || now &- since >= timeout.monotonicNanosecondCount))
            // A certificate problem replaces an earlier reason (the server was down, then came
            // back with the wrong certificate): the installer must see the current one.
            || (reportedFailed && fatal)
        {
            reportedFailed = true
            return true
        }
        return false
    }

    /// The wait before the next attempt: the back-off for the failures so far, the longest
    /// once `failed` was reported (protocol.md: keep trying at the longest back-off).
    mutating func nextDelay(_ backoff: RoomBackoff) -> Duration {
        let r = Double.random(in: 0 ... 1, using: &random)
        return reportedFailed
            ? backoff.slowest(random: r)
            : backoff.delay(afterFailures: consecutiveFailures, random: r)
    }
}
