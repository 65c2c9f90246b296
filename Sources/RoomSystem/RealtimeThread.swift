import CLinux
import Glibc
import Synchronization

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

    /// How roomd locks its memory (docs/systemd.md, "Locked memory").
    public enum MemoryLock: String, Sendable, CaseIterable {
        /// `mlockall(MCL_CURRENT | MCL_ONFAULT)`, plus `MCL_FUTURE` when the process may lock
        /// without limit: pages stay resident once touched (the kernel cannot page out the
        /// audio thread's code, data or stack under memory pressure), and nothing is faulted
        /// in that was not used — the resident set stays what it was.
        case onFault = "onfault"
        /// `mlockall(MCL_CURRENT | MCL_FUTURE)`: every mapping faulted in and locked. Measured:
        /// the resident set grows to the whole address space in use (~49 MB against ~12),
        /// so not the default; kept for measurements.
        case all
        /// No locking.
        case none

        /// The measurement override's variable (one run of roomd): `onfault`, `all` or `none`.
        public static let environmentVariable = "ROOMD_MEMORY_LOCK"
    }

    /// Locks memory as `mode` says. Returns 0, or the errno of mlockall (EPERM/ENOMEM without
    /// CAP_IPC_LOCK and with RLIMIT_MEMLOCK below the address space in use).
    ///
    /// `MCL_FUTURE` only with CAP_IPC_LOCK: without it every later mapping counts its whole size
    /// against RLIMIT_MEMLOCK, and a heap or thread-stack mapping over the limit would fail —
    /// a malloc returning NULL, which Swift turns into a crash. Current mappings are still
    /// locked then, which covers everything the audio thread allocated when the devices opened.
    public static func lockMemory(_ mode: MemoryLock) -> Int32 {
        let onFault: Int32 = 4   // MCL_ONFAULT (Linux 4.4); Glibc's module may not export it
        var flags: Int32
        switch mode {
        case .none: return 0
        case .all: flags = MCL_CURRENT | MCL_FUTURE
        case .onFault: flags = MCL_CURRENT | onFault | (hasCapability(14) ? MCL_FUTURE : 0)  // 14: CAP_IPC_LOCK
        }
        guard mlockall(flags) == 0 else { return errno }
        lockedFlags.store(flags, ordering: .relaxed)
        return 0
    }

    /// The mlockall flags in force (0: not locked), for `trimHeapKeepingLock`.
    private static let lockedFlags = Atomic<Int32>(0)

    /// glibc's malloc_trim(0) when memory may be locked: locked pages cannot be given back
    /// (`MADV_DONTNEED` fails on them), so the lock is lifted for the trim and put back as it
    /// was. For after a burst of allocations that is over (roomd: the self-test's analysis,
    /// whose worker thread's arena otherwise kept ~10 MB resident for good). The lock is off for
    /// the few milliseconds of the trim; nothing is faulted in by putting it back (on fault).
    public static func trimHeapKeepingLock() {
        let flags = lockedFlags.load(ordering: .relaxed)
        if flags != 0 { munlockall() }
        ResidentMemory.trimHeap()
        if flags != 0 && mlockall(flags) != 0 { lockedFlags.store(0, ordering: .relaxed) }
    }

    /// Whether capability `number` is in this process's effective set (/proc/self/status CapEff).
    public static func hasCapability(_ number: Int) -> Bool {
        guard let text = try? Files.readText("/proc/self/status") else { return false }
        for line in text.split(separator: "\n") where line.hasPrefix("CapEff:") {
            guard let hex = line.split(whereSeparator: { $0 == "\t" || $0 == " " }).last,
                  let mask = UInt64(hex, radix: 16) else { return false }
            return number < 64 && mask & (1 << UInt64(number)) != 0
        }
        return false
    }
}

/// Owns a joinable pthread whose body is a nonisolated closure: Swift 6 would otherwise infer
/// main-actor isolation for closures written in top-level code and trap when they run here.
///
/// The thread carries `name` (cut to the kernel's 15 bytes), set by the thread itself before
/// its body runs: `top -H`, `ps -L` and /proc/PID/task/TID/comm then tell roomd's threads apart
/// (they all showed "roomd"), and per-thread page-fault and CPU figures can be read by name.
public final class NativeThread: @unchecked Sendable {
    private var handle = pthread_t()
    private let body: @Sendable () -> Void
    /// NUL-terminated, at most 15 bytes before the NUL (prctl PR_SET_NAME's limit).
    private let cName: [CChar]
    /// Set when the body has returned (the thread is about to end).
    private let finished = Atomic<Bool>(false)

    public init(name: String, body: @escaping @Sendable () -> Void) throws(SystemError) {
        self.body = body
        cName = Self.threadName(name)
        let unmanaged = Unmanaged.passRetained(self)
        let rc = pthread_create(&handle, nil, { raw in
            let me = Unmanaged<NativeThread>.fromOpaque(raw!).takeRetainedValue()
            me.cName.withUnsafeBufferPointer { _ = clinux_set_thread_name($0.baseAddress!) }
            me.body()
            me.finished.store(true, ordering: .releasing)
            return nil
        }, unmanaged.toOpaque())
        if rc != 0 {
            unmanaged.release()
            throw SystemError("pthread_create \(name): \(String(cString: strerror(rc)))")
        }
    }

    public func join() { pthread_join(handle, nil) }

    /// Waits at most `timeout` for the body to return, then joins. Returns false, and leaves
    /// the thread running (detached, so it is reaped if it ever ends), when it did not: a
    /// thread blocked for good inside a driver (a sound card whose clock stopped) must not keep
    /// the process from exiting.
    public func join(timeout: Duration) -> Bool {
        let deadline = monotonicNanoseconds() &+ timeout.monotonicNanosecondCount
        while !finished.load(ordering: .acquiring) {
            if monotonicNanoseconds() >= deadline {
                pthread_detach(handle)
                return false
            }
            sleepMilliseconds(5)
        }
        pthread_join(handle, nil)
        return true
    }

    /// `name` as the kernel keeps a thread name: at most 15 bytes, cut at a character boundary.
    static func threadName(_ name: String) -> [CChar] {
        var bytes: [UInt8] = []
        for scalar in name.unicodeScalars {
            let utf8 = Array(String(scalar).utf8)
            guard bytes.count + utf8.count <= 15, scalar.value != 0 else { break }
            bytes += utf8
        }
        return bytes.map { CChar(bitPattern: $0) } + [0]
    }

    /// How many CPUs this process may run on (its affinity mask: taskset, systemd's
    /// CPUAffinity, a container's cpuset), at least 1.
    public static func usableCPUCount() -> Int { max(1, Int(clinux_usable_cpu_count())) }

    /// The calling thread's name, as /proc/self/task/TID/comm shows it.
    public static func currentName() -> String {
        var buffer = [CChar](repeating: 0, count: 16)
        _ = clinux_thread_name(&buffer)
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}
