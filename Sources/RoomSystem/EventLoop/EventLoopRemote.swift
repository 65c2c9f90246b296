import Glibc
import Synchronization

/// The part of an `EventLoop` that other threads may use: queue a closure to run on the loop
/// thread, wake the loop, ask it to stop. `Sendable` by construction (immutable descriptor,
/// `Mutex`, `Atomic`), no `@unchecked` needed.
///
/// It owns the loop's wake eventfd, so a remote kept by another thread after the loop is gone
/// writes to a still-open descriptor; closures posted then are never run (and are released
/// with the remote). Not for the audio thread: `post` takes a lock and allocates — use
/// `EventSignal` there.
public final class EventLoopRemote: Sendable {
    let wakeFD: Int32
    let stopRequested = Atomic<Bool>(false)
    private let posted = Mutex<[@Sendable () -> Void]>([])
    /// Results of `EventLoop.runOffLoop` work, by job id, waiting for the loop thread.
    private let finished = Mutex<[(id: UInt64, result: any Sendable)]>([])

    init(wakeFD: Int32) { self.wakeFD = wakeFD }

    deinit { close(wakeFD) }

    /// Runs `body` on the loop thread during a later iteration, in posting order. `body` is
    /// `@Sendable` because it crosses threads; it is never main-actor isolated.
    public func post(_ body: @escaping @Sendable () -> Void) {
        posted.withLock { $0.append(body) }
        wake()
    }

    /// Makes a blocked `epoll_wait` return. Never blocks: the eventfd is non-blocking and a
    /// saturated counter (EAGAIN) still reads as readable.
    public func wake() {
        var one: UInt64 = 1
        _ = write(wakeFD, &one, 8)
    }

    /// Makes the loop's `run()` return after its current iteration.
    public func stop() {
        stopRequested.store(true, ordering: .relaxed)
        wake()
    }

    /// A worker thread's result for `EventLoop.runOffLoop` job `id`: the loop thread runs the
    /// job's completion with it during a later iteration.
    func finish(_ id: UInt64, result: any Sendable) {
        finished.withLock { $0.append((id, result)) }
        wake()
    }

    func takeFinished() -> [(id: UInt64, result: any Sendable)] {
        finished.withLock { queue in
            var taken: [(id: UInt64, result: any Sendable)] = []
            swap(&taken, &queue)
            return taken
        }
    }

    func takePosted() -> [@Sendable () -> Void] {
        posted.withLock { queue in
            var taken: [@Sendable () -> Void] = []
            swap(&taken, &queue)
            return taken
        }
    }
}
