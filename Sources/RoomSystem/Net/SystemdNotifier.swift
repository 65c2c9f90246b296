import Glibc

/// sd_notify(3) without libsystemd: sends state datagrams ("READY=1", "WATCHDOG=1",
/// "STATUS=…") to the Unix datagram socket named by NOTIFY_SOCKET (a path, or "@name" for an
/// abstract socket). Without NOTIFY_SOCKET (not started by systemd, or not Type=notify) every
/// call is a no-op that returns false. Each call opens, sends and closes its own socket, so
/// the value is `Sendable` and any thread may use it (not the audio thread).
public struct SystemdNotifier: Sendable {
    /// Where datagrams go; nil when disabled.
    public let destination: SocketAddress?
    /// Why NOTIFY_SOCKET was not usable (e.g. a vsock address), nil otherwise.
    public let configurationError: String?

    /// Reads NOTIFY_SOCKET from the environment.
    public init() {
        self.init(socketPath: Environment.get("NOTIFY_SOCKET"))
    }

    /// Uses `socketPath` as NOTIFY_SOCKET's value (tests, or an explicit override).
    public init(socketPath: String?) {
        guard let socketPath, !socketPath.isEmpty else {
            destination = nil
            configurationError = nil
            return
        }
        guard socketPath.hasPrefix("/") || socketPath.hasPrefix("@") else {
            destination = nil
            configurationError = "NOTIFY_SOCKET '\(socketPath)': only absolute paths and @abstract names are supported"
            return
        }
        do {
            destination = try SocketAddress(unixPath: socketPath)
            configurationError = nil
        } catch {
            destination = nil
            configurationError = "NOTIFY_SOCKET: \(error)"
        }
    }

    public var isEnabled: Bool { destination != nil }

    /// Sends one notification (newline-separated assignments). Returns false when disabled.
    @discardableResult
    public func notify(_ state: String) throws(SystemError) -> Bool {
        guard let destination else { return false }
        let fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        if fd < 0 { throw .errno("sd_notify socket") }
        defer { close(fd) }
        var bytes = Array(state.utf8)
        let sent = destination.withSockAddr { address, length in
            bytes.withUnsafeMutableBytes { sendto(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL), address, length) }
        }
        if sent < 0 { throw .errno("sd_notify to \(destination)") }
        return true
    }

    /// READY=1 (with an optional STATUS): startup finished.
    @discardableResult
    public func ready(status: String? = nil) throws(SystemError) -> Bool {
        try notify(status.map { "READY=1\nSTATUS=\($0)" } ?? "READY=1")
    }

    /// WATCHDOG=1: the keep-alive for WatchdogSec.
    @discardableResult
    public func watchdog() throws(SystemError) -> Bool { try notify("WATCHDOG=1") }

    /// STATUS=…: one line shown by `systemctl status`.
    @discardableResult
    public func status(_ text: String) throws(SystemError) -> Bool {
        try notify("STATUS=" + text.replacingNewlines())
    }

    /// STOPPING=1: shutdown began.
    @discardableResult
    public func stopping() throws(SystemError) -> Bool { try notify("STOPPING=1") }

    /// RELOADING=1: configuration reload began; send `ready()` when done.
    @discardableResult
    public func reloading() throws(SystemError) -> Bool { try notify("RELOADING=1") }

    /// How often to send WATCHDOG=1: half of WATCHDOG_USEC (as sd_watchdog_enabled(3)
    /// recommends), or nil when the watchdog is off or meant for another process
    /// (WATCHDOG_PID set and not ours).
    public static func watchdogInterval(
        usec: String? = Environment.get("WATCHDOG_USEC"), pid: String? = Environment.get("WATCHDOG_PID")
    ) -> Duration? {
        guard let usec, let micros = UInt64(usec), micros > 0 else { return nil }
        if let pid, let owner = Int32(pid), owner != getpid() { return nil }
        return .microseconds(Int64(min(micros / 2, UInt64(Int64.max))))
    }
}

private extension String {
    func replacingNewlines() -> String {
        String(map { $0 == "\n" || $0 == "\r" ? " " : $0 })
    }
}
