import Glibc

/// A descriptor handed to the loop for good: watched from `init`, and on `close()` (or when
/// dropped) deregistered first and closed second, exactly once. That order matters: a number
/// closed while still registered can be reused by the next `open` and wake the old handler.
/// The eventfd and signalfd sources and the listeners own their descriptor through this, so
/// the ownership rules are written once.
public final class WatchedDescriptor {
    public let fileDescriptor: Int32
    private let loop: EventLoop
    private var registration: EventLoop.IORegistration?

    /// Takes ownership of `fd`: it is closed here when the loop refuses it, so the caller has
    /// nothing to clean up on a throw. Capture the handler's owner weakly (the loop keeps the
    /// handler until `close()`).
    public init(_ fd: Int32, loop: EventLoop, interest: EventLoop.Interest,
                handler: @escaping (EventLoop.IOEvents) -> Void) throws(SystemError) {
        fileDescriptor = fd
        self.loop = loop
        do {
            registration = try loop.register(fd, interest: interest, handler: handler)
        } catch {
            Glibc.close(fd)
            throw error
        }
    }

    /// Whether `close()` has not run yet.
    public var isOpen: Bool { registration != nil }

    /// Changes what the loop waits for; nothing after `close()`.
    public func modify(interest: EventLoop.Interest) throws(SystemError) {
        guard let registration else { return }
        try loop.modify(registration, interest: interest)
    }

    /// Deregisters, then closes. Safe to call twice and from the descriptor's own handler.
    public func close() {
        guard let registration else { return }
        loop.deregister(registration)
        Glibc.close(fileDescriptor)
        self.registration = nil
    }

    deinit { close() }
}
