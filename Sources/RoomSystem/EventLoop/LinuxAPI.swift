import CLinux
import Glibc

/// The Linux calls Swift's Glibc module does not import, through the small CLinux target. Its
/// header declares only types and functions of its own (no system header: see clinux.h for the
/// clean-build failure that rule prevents); clinux.c includes the Linux headers and checks every
/// constant and layout against it at compile time. Nothing is spelled out by hand here.
enum LinuxAPI {
    typealias ReadyEvent = clinux_event

    static func epollCreate() -> Int32 { clinux_epoll_create() }

    static func epollCtl(_ ep: Int32, _ op: Int32, _ fd: Int32, events: UInt32, token: UInt64) -> Int32 {
        clinux_epoll_ctl(ep, op, fd, events, token)
    }

    static func epollWait(_ ep: Int32, _ events: UnsafeMutablePointer<ReadyEvent>, _ capacity: Int32, _ timeoutMs: Int32) -> Int32 {
        clinux_epoll_wait(ep, events, capacity, timeoutMs)
    }

    /// A non-blocking, close-on-exec eventfd.
    static func eventfd(_ initial: UInt32) -> Int32 { clinux_eventfd(initial) }

    /// A non-blocking, close-on-exec signalfd for `mask`.
    static func signalfd(_ mask: UnsafePointer<sigset_t>) -> Int32 { clinux_signalfd(mask) }

    /// One pending signal's number from a signalfd, 0 when none is pending, -1 on error.
    static func readSignal(_ fd: Int32) -> Int32 { clinux_signalfd_read(fd) }

    /// accept4 with the non-blocking and close-on-exec flags every socket here carries.
    static func accept(_ fd: Int32, _ address: UnsafeMutablePointer<sockaddr>?, _ length: UnsafeMutablePointer<socklen_t>?) -> Int32 {
        clinux_accept(fd, address, length)
    }

    static let EPOLLIN = UInt32(CLINUX_EPOLLIN)
    static let EPOLLOUT = UInt32(CLINUX_EPOLLOUT)
    static let EPOLLERR = UInt32(CLINUX_EPOLLERR)
    static let EPOLLHUP = UInt32(CLINUX_EPOLLHUP)
    static let EPOLL_CTL_ADD = Int32(CLINUX_EPOLL_CTL_ADD)
    static let EPOLL_CTL_DEL = Int32(CLINUX_EPOLL_CTL_DEL)
    static let EPOLL_CTL_MOD = Int32(CLINUX_EPOLL_CTL_MOD)

    /// pid, uid, gid of a Unix socket's peer, or nil with errno set.
    static func peerCredentials(_ fd: Int32) -> (pid: Int32, uid: UInt32, gid: UInt32)? {
        var pid: Int32 = 0, uid: UInt32 = 0, gid: UInt32 = 0
        guard clinux_peer_credentials(fd, &pid, &uid, &gid) == 0 else { return nil }
        return (pid, uid, gid)
    }

    /// The supplementary groups the peer had when it connected, or nil with errno set.
    static func peerGroups(_ fd: Int32) -> [gid_t]? {
        var groups = [UInt32](repeating: 0, count: 256)
        let n = groups.withUnsafeMutableBufferPointer { clinux_peer_groups(fd, $0.baseAddress, Int32($0.count)) }
        guard n >= 0 else { return nil }
        return Array(groups.prefix(Int(n)))
    }

    static func steerReusePortGroup(_ fd: Int32, groups: Int) -> Int32 { clinux_reuseport_steer_by_ssrc(fd, UInt32(groups)) }

    static var socketFlags: Int32 { Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue) }
}
