import Glibc

/// A wake-up the audio thread (or any thread) can give the event loop without locking,
/// allocating or reference counting: one non-blocking `write` of 8 bytes to an eventfd.
/// It is a plain descriptor number, so copying it costs nothing and touches no shared object.
///
/// Lifetime: the descriptor belongs to the `EventSignalSource` that made it. Stop every thread
/// that signals before closing (or dropping) the source; a signal after that writes to a closed
/// (or reused) descriptor number.
public struct EventSignal: Sendable {
    public let fileDescriptor: Int32

    /// Adds one to the counter. Never blocks: EAGAIN (counter saturated) still leaves the loop
    /// with a pending wake-up, and errors are ignored.
    @inline(__always)
    public func signal() {
        var one: UInt64 = 1
        _ = write(fileDescriptor, &one, 8)
    }
}

/// The loop side of an `EventSignal`: an eventfd registered with the loop. The handler runs on
/// the loop thread with the number of signals since the last call (coalesced, at least 1).
public final class EventSignalSource {
    public let signal: EventSignal
    private let descriptor: WatchedDescriptor

    public init(loop: EventLoop, handler: @escaping (UInt64) -> Void) throws(SystemError) {
        let fd = LinuxAPI.eventfd(0)
        if fd < 0 { throw .errno("eventfd") }
        signal = EventSignal(fileDescriptor: fd)
        descriptor = try WatchedDescriptor(fd, loop: loop, interest: .readable) { _ in
            var count: UInt64 = 0
            if Glibc.read(fd, &count, 8) == 8, count > 0 { handler(count) }
        }
    }

    /// Deregisters and closes the eventfd. Only after the signalling threads stopped.
    public func close() { descriptor.close() }
}
