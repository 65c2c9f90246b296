import Glibc

/// A system call's error number, by name: callers write `error.errno == .accessDenied` instead
/// of comparing raw integers, and the description is the system's own text (strerror).
/// The names are the ones this code branches on; any other number still round-trips.
public struct Errno: Error, Hashable, Sendable, RawRepresentable, CustomStringConvertible {
    public let rawValue: Int32
    public init(rawValue: Int32) { self.rawValue = rawValue }

    /// The calling thread's `errno` now: read it right after the failing call.
    public static var current: Errno { Errno(rawValue: Glibc.errno) }

    /// Sets the calling thread's `errno` to 0, before a call that can fail without setting it
    /// (libgpiod's chip lookup returns NULL and leaves it alone when no chip matches), so that
    /// `current` afterwards tells "failed with a reason" (non-zero) from "found nothing" (0).
    public static func clearCurrent() { Glibc.errno = 0 }

    public static let notPermitted = Errno(rawValue: EPERM)
    public static let noSuchFile = Errno(rawValue: ENOENT)
    public static let interrupted = Errno(rawValue: EINTR)
    public static let badDescriptor = Errno(rawValue: EBADF)
    public static let wouldBlock = Errno(rawValue: EAGAIN)
    public static let noMemory = Errno(rawValue: ENOMEM)
    public static let accessDenied = Errno(rawValue: EACCES)
    public static let fileExists = Errno(rawValue: EEXIST)
    public static let invalidArgument = Errno(rawValue: EINVAL)
    public static let tooManyOpenFiles = Errno(rawValue: EMFILE)
    public static let brokenPipe = Errno(rawValue: EPIPE)
    public static let addressInUse = Errno(rawValue: EADDRINUSE)
    public static let noBufferSpace = Errno(rawValue: ENOBUFS)
    public static let connectionRefused = Errno(rawValue: ECONNREFUSED)
    public static let connectionReset = Errno(rawValue: ECONNRESET)
    public static let inProgress = Errno(rawValue: EINPROGRESS)
    public static let timedOut = Errno(rawValue: ETIMEDOUT)
    // The numbers ALSA returns negated (`-EPIPE`): RoomALSA names and classifies them.
    public static let ioError = Errno(rawValue: EIO)
    public static let noSuchDevice = Errno(rawValue: ENODEV)
    public static let noSuchDeviceOrAddress = Errno(rawValue: ENXIO)
    /// ESTRPIPE ("streams pipe error"): ALSA's "the device was suspended".
    public static let streamsPipeError = Errno(rawValue: ESTRPIPE)
    /// EBADFD ("file descriptor in bad state", not EBADF): ALSA's "no PCM open".
    public static let badDescriptorState = Errno(rawValue: EBADFD)

    /// EAGAIN and EWOULDBLOCK (the same number on Linux, two names in POSIX).
    public var isWouldBlock: Bool { rawValue == EAGAIN || rawValue == EWOULDBLOCK }

    public var description: String { String(cString: strerror(rawValue)) }
}

/// The one place a system call interrupted by a signal is retried: `call` returns -1 (or any
/// negative count) with errno set on failure (read, write, send, recv, open, …); EINTR means
/// "try again". Every such loop in the code goes through here.
@inline(__always)
public func retryingEINTR<T: BinaryInteger>(_ call: () -> T) -> T {
    while true {
        let r = call()
        if r >= 0 || Glibc.errno != EINTR { return r }
    }
}
