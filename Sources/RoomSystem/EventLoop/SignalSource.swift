import Glibc

/// The signal numbers the programs act on, by name, for `SignalSource` and its handlers.
public enum SignalNumber {
    /// SIGINT: Ctrl-C; stop.
    public static let interrupt: Int32 = SIGINT
    /// SIGTERM: systemd's stop; stop.
    public static let terminate: Int32 = SIGTERM
    /// SIGHUP: `systemctl reload`; read the configuration again.
    public static let hangUp: Int32 = SIGHUP
}

/// A thread's signal mask, saved so it can be put back (tests block a signal and restore).
public struct SignalMask: Sendable {
    private var set = sigset_t()

    /// Blocks `signals` in the calling thread and returns the mask it had before.
    /// Threads created afterwards inherit the blocked set.
    public static func block(_ signals: [Int32]) -> SignalMask {
        var add = sigset_t()
        sigemptyset(&add)
        for s in signals { sigaddset(&add, s) }
        var previous = SignalMask()
        pthread_sigmask(SIG_BLOCK, &add, &previous.set)
        return previous
    }

    /// Makes this the calling thread's mask again.
    public func restore() {
        var copy = set
        pthread_sigmask(SIG_SETMASK, &copy, nil)
    }
}

/// Delivers signals as loop events through a signalfd: no asynchronous handler, no global
/// state. The signals must be blocked in *every* thread, or the kernel delivers them to a
/// thread that does not block them (default action: terminate) instead of queueing them for
/// the signalfd. So create the source (which blocks them in the calling thread) on the main
/// thread before starting other threads — they inherit the mask.
///
/// The signalfd sees signals pending for the process and for the thread that reads it (the
/// loop thread); a thread-directed signal to another thread stays pending there.
public final class SignalSource {
    /// SIGINT, SIGTERM, SIGHUP: stop, stop, reload.
    public static let daemonSignals: [Int32] = [SIGINT, SIGTERM, SIGHUP]

    private let descriptor: WatchedDescriptor
    public var fileDescriptor: Int32 { descriptor.fileDescriptor }

    /// - Parameters:
    ///   - block: block `signals` in the calling thread first (see above). Pass false when the
    ///     caller manages the mask itself.
    ///   - handler: runs on the loop thread with each signal number, in arrival order (standard
    ///     signals of the same number pending together arrive once).
    public init(
        signals: [Int32], loop: EventLoop, block: Bool = true, handler: @escaping (Int32) -> Void
    ) throws(SystemError) {
        if block { _ = SignalMask.block(signals) }
        var set = sigset_t()
        sigemptyset(&set)
        for s in signals { sigaddset(&set, s) }
        let fd = LinuxAPI.signalfd(&set)
        if fd < 0 { throw .errno("signalfd") }
        descriptor = try WatchedDescriptor(fd, loop: loop, interest: .readable) { _ in
            while true {
                let signal = LinuxAPI.readSignal(fd)
                if signal <= 0 { return } // drained
                handler(signal)
            }
        }
    }

    /// Deregisters and closes the signalfd; the signals stay blocked (restore the mask
    /// yourself if they should act again).
    public func close() { descriptor.close() }
}
