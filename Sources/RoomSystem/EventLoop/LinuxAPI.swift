import CLinux
import Glibc

/// The Linux calls Swift's Glibc module does not import, through the small CLinux target: its
/// header includes sys/epoll.h, sys/eventfd.h and sys/signalfd.h, so the compiler lays out
/// `epoll_event` (packed on x86_64, not on arm64) and `signalfd_siginfo`; accept4 and
/// SO_PEERCRED go through wrappers compiled with _GNU_SOURCE. Nothing is spelled out by hand.
enum LinuxAPI {
    static func epollCreate1(_ flags: Int32) -> Int32 { epoll_create1(flags) }

    static func epollCtl(_ ep: Int32, _ op: Int32, _ fd: Int32, _ event: UnsafeMutablePointer<epoll_event>?) -> Int32 {
        epoll_ctl(ep, op, fd, event)
    }

    static func epollWait(_ ep: Int32, _ events: UnsafeMutablePointer<epoll_event>, _ capacity: Int32, _ timeoutMs: Int32) -> Int32 {
        epoll_wait(ep, events, capacity, timeoutMs)
    }

    static func eventfd(_ initial: UInt32, _ flags: Int32) -> Int32 { CLinux.eventfd(initial, flags) }

    static func signalfd(_ fd: Int32, _ mask: UnsafePointer<sigset_t>, _ flags: Int32) -> Int32 { CLinux.signalfd(fd, mask, flags) }

    static func accept4(_ fd: Int32, _ address: UnsafeMutablePointer<sockaddr>?, _ length: UnsafeMutablePointer<socklen_t>?,
                        _ flags: Int32) -> Int32 {
        clinux_accept4(fd, address, length, flags)
    }

    static let EPOLLIN = CLinux.EPOLLIN.rawValue
    static let EPOLLOUT = CLinux.EPOLLOUT.rawValue
    static let EPOLLERR = CLinux.EPOLLERR.rawValue
    static let EPOLLHUP = CLinux.EPOLLHUP.rawValue
    static let EPOLL_CTL_ADD = CLinux.EPOLL_CTL_ADD
    static let EPOLL_CTL_DEL = CLinux.EPOLL_CTL_DEL
    static let EPOLL_CTL_MOD = CLinux.EPOLL_CTL_MOD
    // EPOLL_CLOEXEC, EFD_*, SFD_* are O_CLOEXEC / O_NONBLOCK.

    static let signalfdSiginfoSize = MemoryLayout<signalfd_siginfo>.size

    /// pid, uid, gid of a Unix socket's peer, or nil with errno set.
    static func peerCredentials(_ fd: Int32) -> (pid: Int32, uid: UInt32, gid: UInt32)? {
        var pid: pid_t = 0, uid: uid_t = 0, gid: gid_t = 0
        guard clinux_peer_credentials(fd, &pid, &uid, &gid) == 0 else { return nil }
        return (pid, uid, gid)
    }

    static var socketFlags: Int32 { Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue) }

    static func isWouldBlock(_ code: Int32) -> Bool { code == EAGAIN || code == EWOULDBLOCK }
}
