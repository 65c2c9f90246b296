import Glibc

/// A system call's error number, by name: callers write `error.errno == .accessDenied` instead
/// of comparing raw integers, and the description is the system's own text (strerror).
/// The names are the ones this code branches on; any other number still round-trips.
public struct Errno: Error, Hashable, Sendable, RawRepresentable, CustomStringConvertible {
    public let rawValue: Int32
    public init(rawValue: Int32) { self.rawValue = rawValue }

    /// The calling thread's `errno` now: read it right after the failing call.
    public static var current: Errno { Errno(rawValue: Glibc.errno) }

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
