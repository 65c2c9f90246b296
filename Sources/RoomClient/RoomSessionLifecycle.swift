import RoomModel
import RoomSystem

/// The membership's life cycle as the daemon drives it: `start`, `stop`, `leave`, and `finish`,
/// which ends the membership whatever the reason (a leave, a stop, a removal, an expired token).
extension RoomSession {
    /// Starts joining (from `idle`, or again after `disconnected`).
    public func start() {
        switch phase {
        case .idle, .stopped: break
        default: return
        }
        reconnect.outageBegan(now: monotonicNanoseconds())
        setState(joinedBefore ? .reconnecting : .connecting)
        attempt()
    }

    /// Closes everything at once without telling the server (it sees the connection drop and
    /// keeps the participant for its grace period). State becomes `disconnected(.stopped)`.
    public func stop() {
        guard phase != .stopped && phase != .idle else { return }
        finish(.stopped)
    }

    /// Leaves the room: `leave`, then close after the server's `ok` (or `leaveTimeout`).
    /// No reconnect afterwards. State becomes `disconnected(.left)`.
    public func leave(completion: RoomRequestCompletion? = nil) {
        switch phase {
        case .joined:
            guard sendRequest(.leave, completion: nil) != nil else {
                finish(.left)
                completion?(.success(()))
                return
            }
            phase = .leaving
            if let completion { leaveCompletions.append(completion) }
            leaveTimer = loop.schedule(after: configuration.leaveTimeout) { [weak self] in
                self?.leaveTimer = nil
                self?.finish(.left)
            }
        case .leaving:
            if let completion { leaveCompletions.append(completion) }
        case .idle, .stopped:
            completion?(.success(()))
        default:
            finish(.left)
            completion?(.success(()))
        }
    }

    /// Ends the membership, whatever the reason; a leave under way is answered (it is over,
    /// even if a kick or a stop ended it first).
    func finish(_ reason: RoomDisconnectReason) {
        teardownConnection()
        cancelTimer(&retryTimer)
        cancelTimer(&leaveTimer)
        phase = .stopped
        setState(.disconnected(reason))
        let waiting = leaveCompletions
        leaveCompletions = []
        for completion in waiting { completion(.success(())) }
    }
}
