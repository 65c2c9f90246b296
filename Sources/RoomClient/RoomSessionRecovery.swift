import RoomModel
import RoomSystem

/// Recovery: a failed attempt (failover to the next address, `failed` when the outage lasts),
/// the back-off before the next one, and a joined connection lost. The counting is
/// `ReconnectSchedule`'s; the state changes and timers are here.
extension RoomSession {
    /// A connection attempt that did not end in `welcome`.
    func attemptFailed(_ reason: String, fatal: Bool = false) {
        teardownConnection()
        reconnect.countFailedAttempt()
        Log.warning("room: connection attempt failed: \(reason)")
        if reconnect.reportsFailed(
            fatal: fatal, now: monotonicNanoseconds(),
            threshold: configuration.failureThreshold, timeout: configuration.failureTimeout)
        {
            setState(.failed(reason: reason))
        }
        scheduleRetry()
    }

    private func scheduleRetry() {
        phase = .waiting
        let delay = reconnect.nextDelay(configuration.backoff)
        cancelTimer(&retryTimer)
        retryTimer = loop.schedule(after: delay) { [weak self] in self?.attempt() }
    }

    /// A joined connection ended without a removal: recover.
    func connectionLost(_ reason: String) {
        if phase == .leaving {
            finish(.left)
            return
        }
        guard phase == .joined else {
            attemptFailed(reason)
            return
        }
        Log.warning("room: connection to \(serverAddress.map { "\($0)" } ?? "?") lost: \(reason)")
        teardownConnection()
        statistics.reconnects += 1
        reconnect.outageBegan(now: monotonicNanoseconds())
        // The first retry goes to the same server: it keeps our participant (and stage) for
        // its grace period. Failures from then on rotate through the list.
        setState(.reconnecting)
        scheduleRetry()
    }
}
