import Glibc
import RoomBase

/// The daemon's event loop: one epoll instance, a timer heap and an eventfd for cross-thread
/// wake-ups. See docs/event-loop.md.
///
/// Threading contract: an `EventLoop` belongs to the thread that created it. Register, modify,
/// schedule, cancel, `run`, `runOnce` and `stop` only from that thread; every callback (I/O,
/// timer, posted closure) runs on it. The type is deliberately *not* `Sendable`, so the
/// compiler refuses to hand it (or the non-`Sendable` callbacks it stores) to another thread.
/// Other threads reach the loop only through `remote` (`post`, `wake`, `stop`), which is
/// `Sendable`; the audio thread uses an `EventSignal` instead, which never locks or allocates.
///
/// Readiness is level-triggered: a handler that leaves data unread is called again on the next
/// iteration. That lets handlers bound the work they do per wake-up (fairness between many
/// connections; a flooding peer cannot starve the others) without the lost-wake-up bugs of
/// edge-triggered mode, at the price of one `epoll_ctl` when write interest changes.
public final class EventLoop {
    /// What a registration wants to hear about.
    public struct Interest: OptionSet, Sendable, Hashable {
        public let rawValue: UInt8
        public init(rawValue: UInt8) { self.rawValue = rawValue }
        public static let readable = Interest(rawValue: 1)
        public static let writable = Interest(rawValue: 2)
    }

    /// What happened on a file descriptor. `hangup` (EPOLLHUP: both directions closed) and
    /// `error` are reported whatever the interest, as epoll does — and, level-triggered, on
    /// every iteration: deregister (or close) a descriptor that hung up.
    public struct IOEvents: OptionSet, Sendable, Hashable {
        public let rawValue: UInt8
        public init(rawValue: UInt8) { self.rawValue = rawValue }
        public static let readable = IOEvents(rawValue: 1)
        public static let writable = IOEvents(rawValue: 2)
        public static let hangup = IOEvents(rawValue: 4)
        public static let error = IOEvents(rawValue: 8)
    }

    /// A file descriptor's registration. Tokens are never reused, so an event still queued for
    /// a descriptor that was closed (and whose number was reused) in the same iteration is
    /// dropped instead of reaching the new owner.
    public struct IORegistration: Hashable, Sendable {
        public let fileDescriptor: Int32
        let token: UInt64
    }

    public struct TimerID: Hashable, Sendable {
        let raw: UInt64
    }

    private struct Registration {
        let fd: Int32
        var interest: Interest
        let handler: (IOEvents) -> Void
    }

    /// A heap entry's item is the timer id; its seq tells a live entry from a stale one.
    private typealias TimerEntry = DeadlineHeap<UInt64>.Entry

    private struct TimerState {
        var deadline: UInt64
        var seq: UInt64
        let interval: UInt64 // 0: one-shot
        let body: () -> Void
    }

    /// The cross-thread side: `post`, `wake`, `stop`. Keep a copy on other threads.
    public let remote: EventLoopRemote

    /// 17 KiB for use within one callback, never across two (RoomTLS moves ciphertext through
    /// it: a TLS record is at most 16 KiB and its overhead). One per loop, so connections on
    /// different threads never share it, and a connection moved to another loop uses the new
    /// loop's.
    public let scratch = UnsafeMutableRawBufferPointer.allocate(byteCount: 17 * 1024, alignment: 16)

    private let epollFD: Int32
    private let eventBuffer: UnsafeMutablePointer<LinuxAPI.ReadyEvent>
    private let eventCapacity: Int
    private var registrations: [UInt64: Registration] = [:]
    private var nextToken: UInt64 = 1 // token 0 is the wake eventfd
    private var heap = DeadlineHeap<UInt64>()
    private var timers: [UInt64: TimerState] = [:]
    private var nextTimerID: UInt64 = 1
    private var nextSeq: UInt64 = 0
    /// `runOffLoop` jobs under way: their worker thread and the completion to run here.
    private var offLoopJobs: [UInt64: (thread: NativeThread?, completion: (any Sendable) -> Void)] = [:]
    private var nextOffLoopID: UInt64 = 1

    /// - Parameter maxEventsPerWait: how many ready descriptors one `epoll_wait` returns; more
    ///   are returned by the next iteration.
    public init(maxEventsPerWait: Int = 256) throws(SystemError) {
        let ep = LinuxAPI.epollCreate()
        if ep < 0 { throw .errno("epoll_create1") }
        let wake = LinuxAPI.eventfd(0)
        if wake < 0 { let e = errno; Glibc.close(ep); throw .errno("eventfd", e) }
        epollFD = ep
        remote = EventLoopRemote(wakeFD: wake)
        eventCapacity = max(1, maxEventsPerWait)
        eventBuffer = .allocate(capacity: eventCapacity)
        if Self.control(ep, LinuxAPI.EPOLL_CTL_ADD, wake, LinuxAPI.EPOLLIN, token: 0) != 0 {
            let e = errno
            Glibc.close(ep)
            eventBuffer.deallocate()
            throw .errno("epoll_ctl add eventfd", e)
        }
    }

    deinit {
        Glibc.close(epollFD)
        eventBuffer.deallocate()
        scratch.deallocate()
    }

    // MARK: File descriptors

    /// Watches `fd`. The loop does not own the descriptor: deregister it before closing it.
    /// The handler is kept until `deregister`; capture owners weakly to avoid a cycle.
    public func register(
        _ fd: Int32, interest: Interest, handler: @escaping (IOEvents) -> Void
    ) throws(SystemError) -> IORegistration {
        let token = nextToken
        nextToken += 1
        if Self.control(epollFD, LinuxAPI.EPOLL_CTL_ADD, fd, Self.epollMask(interest), token: token) != 0 {
            throw .errno("epoll_ctl add fd \(fd)")
        }
        registrations[token] = Registration(fd: fd, interest: interest, handler: handler)
        return IORegistration(fileDescriptor: fd, token: token)
    }

    /// Changes what a registration waits for (no system call when unchanged).
    public func modify(_ registration: IORegistration, interest: Interest) throws(SystemError) {
        guard var entry = registrations[registration.token] else { return }
        if entry.interest == interest { return }
        if Self.control(epollFD, LinuxAPI.EPOLL_CTL_MOD, entry.fd, Self.epollMask(interest),
                        token: registration.token) != 0 {
            throw .errno("epoll_ctl modify fd \(entry.fd)")
        }
        entry.interest = interest
        registrations[registration.token] = entry
    }

    /// Stops watching; safe to call twice, and from inside any handler.
    public func deregister(_ registration: IORegistration) {
        guard let entry = registrations.removeValue(forKey: registration.token) else { return }
        // Fails harmlessly (EBADF/ENOENT) when the descriptor is already closed.
        _ = Self.control(epollFD, LinuxAPI.EPOLL_CTL_DEL, entry.fd, 0, token: registration.token)
    }

    public var registrationCount: Int { registrations.count }

    // MARK: Timers

    /// Runs `body` on the loop thread after `delay` (never early; the wait has millisecond
    /// granularity, rounded up), then every `repeating` if given. A repeating timer that falls
    /// behind skips the missed ticks rather than firing in a burst. Timers due at the same
    /// time fire in the order they were scheduled. A zero delay runs `body` on the next
    /// iteration, never re-entrantly.
    @discardableResult
    public func schedule(
        after delay: Duration, repeating interval: Duration? = nil, _ body: @escaping () -> Void
    ) -> TimerID {
        let id = nextTimerID
        nextTimerID += 1
        let seq = nextSeq
        nextSeq += 1
        let every = interval.map { max(1, $0.monotonicNanosecondCount) } ?? 0
        let deadline = monotonicNanoseconds() &+ delay.monotonicNanosecondCount
        timers[id] = TimerState(deadline: deadline, seq: seq, interval: every, body: body)
        heap.push(TimerEntry(deadline: deadline, seq: seq, item: id))
        return TimerID(raw: id)
    }

    /// Cancels a timer; a no-op when it already fired (one-shot) or was cancelled. A repeating
    /// timer may cancel itself from its own body.
    public func cancel(_ timer: TimerID) {
        guard timers.removeValue(forKey: timer.raw) != nil else { return }
        // Cancelled entries stay in the heap until they surface; rebuild when they dominate
        // (e.g. keep-alive timers re-armed on every packet).
        if heap.count > 64 && heap.count > 2 * timers.count {
            heap.replaceAll(with: timers.map { TimerEntry(deadline: $0.value.deadline, seq: $0.value.seq, item: $0.key) })
        }
    }

    public var timerCount: Int { timers.count }

    // MARK: Work off the loop

    /// Runs `work` on a thread of its own and then `completion` with its result on the loop
    /// thread, during a later iteration. For computations long enough to delay what the loop
    /// serves (roomd's self-test analysis: ~0.2 s in release on x86-64, more on ARM, while
    /// signalling, media receive, buttons and the control socket would wait). `work` is
    /// `@Sendable` and gets only what it is given: it must not touch loop-confined objects;
    /// `completion` may (it runs here, like a timer body). The worker inherits the calling
    /// thread's signal mask and scheduling (normal priority: it never competes with the audio
    /// thread's SCHED_FIFO) and is joined when its completion runs.
    ///
    /// If the loop goes away first the completion never runs (as with `post`). Throws when the
    /// thread cannot be created; nothing is then pending.
    public func runOffLoop<Result: Sendable>(
        name: String, _ work: @escaping @Sendable () -> Result, completion: @escaping (Result) -> Void
    ) throws(SystemError) {
        let id = nextOffLoopID
        nextOffLoopID += 1
        offLoopJobs[id] = (nil, { value in
            // Only the worker of job `id` delivers to it, always a `Result`.
            if let result = value as? Result { completion(result) }
        })
        let remote = self.remote
        do {
            let thread = try NativeThread(name: name) { remote.finish(id, result: work()) }
            // The worker may already have finished: its result waits for this thread anyway.
            offLoopJobs[id]?.thread = thread
        } catch {
            offLoopJobs[id] = nil
            throw error
        }
    }

    /// How many `runOffLoop` jobs have not delivered their result yet.
    public var offLoopJobCount: Int { offLoopJobs.count }

    // MARK: Running

    /// Runs until `stop()` (from the loop thread) or `remote.stop()` (from any thread).
    public func run() throws(SystemError) {
        defer { remote.stopRequested.store(false, ordering: .relaxed) }
        while !remote.stopRequested.load(ordering: .relaxed) {
            _ = try runOnce(timeout: nil)
        }
    }

    /// Makes `run()` return after the current iteration (or the next `run()` return at once).
    public func stop() { remote.stop() }

    /// Waits once for I/O (at most `timeout`; nil waits until something happens or a timer is
    /// due), dispatches it, then fires due timers. Returns how many callbacks ran.
    @discardableResult
    public func runOnce(timeout: Duration? = nil) throws(SystemError) -> Int {
        var waitMs: Int64 = timeout.map { Self.milliseconds(roundingUp: $0.monotonicNanosecondCount) } ?? -1
        if let next = heap.first?.deadline {
            let now = monotonicNanoseconds()
            let untilTimer = next <= now ? 0 : Self.milliseconds(roundingUp: next - now)
            waitMs = waitMs < 0 ? untilTimer : min(waitMs, untilTimer)
        }
        let n = LinuxAPI.epollWait(epollFD, eventBuffer, Int32(eventCapacity), Int32(min(waitMs, Int64(Int32.max))))
        var handled = 0
        if n < 0 {
            if errno != EINTR { throw .errno("epoll_wait") }
        } else {
            for i in 0..<Int(n) {
                let mask = eventBuffer[i].events
                let token = eventBuffer[i].token
                if token == 0 {
                    handled += drainPosted()
                    continue
                }
                // Looked up per event: an earlier handler may have deregistered this one.
                guard let entry = registrations[token] else { continue }
                var events = IOEvents()
                if mask & LinuxAPI.EPOLLIN != 0, entry.interest.contains(.readable) { events.insert(.readable) }
                if mask & LinuxAPI.EPOLLOUT != 0, entry.interest.contains(.writable) { events.insert(.writable) }
                if mask & LinuxAPI.EPOLLHUP != 0 { events.insert(.hangup) }
                if mask & LinuxAPI.EPOLLERR != 0 { events.insert(.error) }
                if events.isEmpty { continue }
                entry.handler(events)
                handled += 1
            }
        }
        handled += fireDueTimers()
        return handled
    }

    // MARK: Internals

    private func drainPosted() -> Int {
        var counter: UInt64 = 0
        _ = Glibc.read(remote.wakeFD, &counter, 8)
        let jobs = remote.takePosted()
        for job in jobs { job() }
        let results = remote.takeFinished()
        for (id, result) in results {
            guard let job = offLoopJobs.removeValue(forKey: id) else { continue }
            job.thread?.join()   // it has finished its work; this only reaps it
            job.completion(result)
        }
        return jobs.count + results.count
    }

    private func fireDueTimers() -> Int {
        guard let first = heap.first else { return 0 }
        let now = monotonicNanoseconds()
        if first.deadline > now { return 0 }
        // Timers scheduled by the bodies below wait for the next iteration, so a zero-delay
        // timer that re-arms itself cannot spin here forever.
        let seqLimit = nextSeq
        var postponed: [TimerEntry] = []
        var fired = 0
        while let top = heap.popDue(now: now) {
            guard var state = timers[top.item], state.seq == top.seq else { continue } // cancelled or stale
            if top.seq >= seqLimit { postponed.append(top); continue }
            if state.interval > 0 {
                var next = state.deadline &+ state.interval
                if next <= now { next = now &+ state.interval }
                state.deadline = next
                state.seq = nextSeq
                nextSeq += 1
                timers[top.item] = state
                heap.push(TimerEntry(deadline: next, seq: state.seq, item: top.item))
            } else {
                timers.removeValue(forKey: top.item)
            }
            state.body()
            fired += 1
        }
        for entry in postponed { heap.push(entry) }
        return fired
    }

    private static func epollMask(_ interest: Interest) -> UInt32 {
        // No EPOLLRDHUP: a peer's half-close shows up as readable + end of stream, and an
        // always-asserted RDHUP would make a level-triggered loop spin on a registration that
        // is only waiting to write.
        var mask: UInt32 = 0
        if interest.contains(.readable) { mask |= LinuxAPI.EPOLLIN }
        if interest.contains(.writable) { mask |= LinuxAPI.EPOLLOUT }
        return mask
    }

    private static func control(_ ep: Int32, _ op: Int32, _ fd: Int32, _ mask: UInt32, token: UInt64) -> Int32 {
        LinuxAPI.epollCtl(ep, op, fd, events: mask, token: token)
    }

    private static func milliseconds(roundingUp ns: UInt64) -> Int64 {
        Int64(min(ns / 1_000_000 + (ns % 1_000_000 == 0 ? 0 : 1), UInt64(Int32.max)))
    }
}
