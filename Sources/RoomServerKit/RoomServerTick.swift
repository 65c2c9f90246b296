import RoomProtocol
import RoomSystem

// The timers' work: the hello deadline (connections that never joined, closed a bounded number per
// round) and the room tick (silent connections, expired reconnect graces, each room's tick, empty
// rooms closed after the grace).

extension RoomServer {
    /// Closes connections that did not say hello in time: oldest first, only those past the
    /// deadline, at most `helloTimeoutsPerRound` every 50 ms. 4000 connections that came
    /// together were all closed in one tick before, an error frame and a close each: ~90 ms in
    /// which no media was forwarded (the server bench's p99 forward delay 96 ms against 0.5).
    func closeSilentConnections() {
        let now = nowMs()
        var timedOut = 0
        var helloTimeoutFrame: [UInt8] = []
        while timedOut < Self.helloTimeoutsPerRound, let s = oldestWaiting(),
              now - s.acceptedMs > configuration.limits.helloTimeoutMs {
            statistics.helloTimeouts += 1
            timedOut += 1
            // One line per 10 s at most: thousands of silent connections must not become
            // thousands of log lines (refusals at accept are limited the same way).
            if now - lastHelloTimeoutLogMs > 10_000 {
                lastHelloTimeoutLogMs = now
                Log.info("roomserver: \(s.connection.peerAddress): no hello within \(configuration.limits.helloTimeoutMs) ms; closing (\(statistics.helloTimeouts) so far; the next are counted, not logged, for 10 s)")
            }
            // The same refusal for all of them, encoded once per round.
            if helloTimeoutFrame.isEmpty {
                helloTimeoutFrame = (try? FrameEncoder(maxFrameSize: options.maxFrameSize).encode(SignalMessage(
                    .error(.init(code: .notJoined, message: "no hello within \(configuration.limits.helloTimeoutMs) ms"))))) ?? []
            }
            refuseAndClose(s, encodedError: helloTimeoutFrame)
        }
    }

    func tick() {
        let now = nowMs()
        for s in Array(sessions.values) where !s.closing && now - s.lastHeardMs > options.keepaliveTimeoutMs {
            statistics.keepaliveTimeouts += 1
            Log.info("roomserver: \(s.connection.peerAddress): silent for \(options.keepaliveTimeoutMs) ms; closing")
            closeSession(s, flush: false, grace: true)
        }
        reapSessions()
        expireGrace(now: now)
        drainLost()
        for key in rooms.keys.sorted() {
            guard let state = rooms[key] else { continue }
            let effects = state.room.tick(now: now)
            if !effects.isEmpty { execute(effects, in: state) }
            drainLost()
            if state.room.isEmpty {
                let since = state.emptySinceMs ?? now
                state.emptySinceMs = since
                if now - since > state.room.config.reconnectGraceMs {
                    keepStatistics(of: state)
                    rooms[key] = nil
                    Log.info("roomserver: room \(key) closed (empty)")
                }
            }
        }
    }
}
