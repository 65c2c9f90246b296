import Glibc

/// The outcome of asking for real-time scheduling, reported once by the caller.
public enum RealtimeResult: Sendable, Equatable {
    case fifo(priority: Int32)
    case denied(code: Int32, reason: String)
}

public enum Realtime {
    /// Asks SCHED_FIFO for the calling thread. pthread_setschedparam returns the error code
    /// (it does not set errno), so the reason comes from its return value.
    public static func promoteCurrentThread(priority: Int32) -> RealtimeResult {
        var param = sched_param()
        param.sched_priority = priority
        let rc = pthread_setschedparam(pthread_self(), SCHED_FIFO, &param)
        if rc == 0 { return .fifo(priority: priority) }
        return .denied(code: rc, reason: String(cString: strerror(rc)))
    }

    /// Locks current and future pages so the audio loop never takes a page fault on memory
    /// that was swapped or not yet touched. Fails (ENOMEM/EPERM) without the capability.
    public static func lockMemory() -> Bool {
        mlockall(MCL_CURRENT | MCL_FUTURE) == 0
    }
}

/// Owns a joinable pthread whose body is a nonisolated closure: Swift 6 would otherwise infer
/// main-actor isolation for closures written in top-level code and trap when they run here.
public final class NativeThread: @unchecked Sendable {
    private var handle = pthread_t()
    private let body: @Sendable () -> Void

    public init(name: String, body: @escaping @Sendable () -> Void) throws(SystemError) {
        self.body = body
        let unmanaged = Unmanaged.passRetained(self)
        let rc = pthread_create(&handle, nil, { raw in
            let me = Unmanaged<NativeThread>.fromOpaque(raw!).takeRetainedValue()
            me.body()
            return nil
        }, unmanaged.toOpaque())
        if rc != 0 {
            unmanaged.release()
            throw SystemError("pthread_create \(name): \(String(cString: strerror(rc)))")
        }
    }

    public func join() { pthread_join(handle, nil) }
}
