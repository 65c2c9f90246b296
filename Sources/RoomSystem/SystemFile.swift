import Glibc

/// An open file, pipe or device, closed exactly once (by `close()` or when the last reference
/// goes): for the code that streams a file instead of reading or writing it whole (`Files`),
/// the WAV files roomd records and plays, the LED ring's spidev, the simulated board's FIFOs.
///
/// Errors are `SystemError`s whose text is `label` and errno's text ("take.wav.partial: No
/// space left on device"), with the `Errno` kept; calls interrupted by a signal are retried.
/// Not thread-safe: one owner uses it.
public final class SystemFile {
    public enum Access: Sendable { case read, write, readWrite }

    public struct Options: OptionSet, Sendable {
        public let rawValue: Int32
        public init(rawValue: Int32) { self.rawValue = rawValue }
        /// Create the file (with `permissions`, less the umask) or empty it if it exists.
        public static let createTruncating = Options(rawValue: O_CREAT | O_TRUNC)
        /// Reads and writes that would wait fail with `Errno.wouldBlock` instead.
        public static let nonBlocking = Options(rawValue: O_NONBLOCK)
        /// Open only a directory (for `sync()` of the entries it holds); anything else fails.
        public static let directory = Options(rawValue: O_DIRECTORY)
    }

    /// The path opened (empty for a pipe).
    public let path: String
    /// What this file's errors name: the path unless the opener said otherwise.
    public let label: String
    /// The descriptor, for an `EventLoop` to watch; -1 once closed.
    public private(set) var descriptor: Int32
    public var isOpen: Bool { descriptor >= 0 }

    /// Opens `path` (close-on-exec). `label` names it in errors, the path by default.
    public init(path: String, access: Access, options: Options = [], permissions: FileMode = 0o644,
                label: String? = nil) throws(SystemError) {
        self.path = path
        self.label = label ?? path
        let accessFlags = switch access {
        case .read: O_RDONLY
        case .write: O_WRONLY
        case .readWrite: O_RDWR
        }
        let flags = accessFlags | options.rawValue | O_CLOEXEC
        descriptor = retryingEINTR { open(path, flags, permissions) }
        if descriptor < 0 { throw .errno(self.label) }
    }

    private init(descriptor: Int32, label: String) {
        path = ""
        self.label = label
        self.descriptor = descriptor
    }

    /// A pipe whose two ends are non-blocking and close-on-exec; `label` names it in errors.
    public static func pipe(label: String) throws(SystemError) -> (read: SystemFile, write: SystemFile) {
        var fds: [Int32] = [0, 0]
        if Glibc.pipe(&fds) != 0 { throw .errno(label) }
        for fd in fds {
            _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
            _ = fcntl(fd, F_SETFD, FD_CLOEXEC)
        }
        return (SystemFile(descriptor: fds[0], label: label), SystemFile(descriptor: fds[1], label: label))
    }

    deinit { close() }

    /// Closes the descriptor; later calls do nothing (and I/O fails with `badDescriptor`).
    public func close() {
        guard descriptor >= 0 else { return }
        _ = Glibc.close(descriptor)
        descriptor = -1
    }

    /// The file's size in bytes (fstat).
    public func size() throws(SystemError) -> Int {
        var st = stat()
        if fstat(descriptor, &st) != 0 { throw .errno(label) }
        return Int(st.st_size)
    }

    /// Reads from the current position to the end. Refuses a directory, and anything larger
    /// than `limit`, so a wrong path (a device, a huge file) gives an error instead of
    /// exhausting memory.
    public func readToEnd(limit: Int) throws(SystemError) -> [UInt8] {
        var st = stat()
        if fstat(descriptor, &st) != 0 { throw .errno(label) }
        if (st.st_mode & S_IFMT) == S_IFDIR { throw SystemError("\(label): is a directory") }
        var out: [UInt8] = []
        var chunk = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = chunk.withUnsafeMutableBytes { read(into: $0) }
            if n < 0 { throw .errno(label) }
            if n == 0 { return out }
            out.append(contentsOf: chunk[0..<n])
            if out.count > limit { throw SystemError("\(label): larger than \(limit) bytes") }
        }
    }

    /// One read(2) at the current position: the count (0 at end of file), or -1 with
    /// `Errno.current` set (`wouldBlock` when non-blocking and nothing waits).
    public func read(into buffer: UnsafeMutableRawBufferPointer) -> Int {
        retryingEINTR { Glibc.read(descriptor, buffer.baseAddress, buffer.count) }
    }

    /// One pread(2) at `offset` (the position does not move): the count (0 past the end), or
    /// -1 with `Errno.current` set.
    public func read(into buffer: UnsafeMutableRawBufferPointer, at offset: Int) -> Int {
        retryingEINTR { pread(descriptor, buffer.baseAddress, buffer.count, off_t(offset)) }
    }

    /// One write(2) at the current position: the count written, or -1 with `Errno.current`
    /// set. For a device that takes a whole message or nothing (spidev); files want `writeAll`.
    public func write(_ bytes: UnsafeRawBufferPointer) -> Int {
        retryingEINTR { Glibc.write(descriptor, bytes.baseAddress, bytes.count) }
    }

    /// Writes all of `bytes` at the current position (as many write(2)s as it takes).
    public func writeAll(_ bytes: [UInt8]) throws(SystemError) {
        var offset = 0
        while offset < bytes.count {
            let n = bytes.withUnsafeBytes { write(UnsafeRawBufferPointer(rebasing: $0[offset...])) }
            if n < 0 { throw .errno(label) }
            offset += n
        }
    }

    /// Writes all of `bytes` at `offset` (pwrite: the position does not move), e.g. the sizes
    /// into a header written first.
    public func writeAll(_ bytes: [UInt8], at offset: Int) throws(SystemError) {
        var done = 0
        while done < bytes.count {
            let n = retryingEINTR {
                bytes.withUnsafeBytes { pwrite(descriptor, $0.baseAddress! + done, $0.count - done, off_t(offset + done)) }
            }
            if n < 0 { throw .errno(label) }
            done += n
        }
    }

    /// fsync: what was written is on the disk when this returns.
    public func sync() throws(SystemError) {
        if retryingEINTR({ fsync(descriptor) }) != 0 { throw .errno(label) }
    }
}
