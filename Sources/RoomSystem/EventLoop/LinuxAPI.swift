import Glibc

/// Linux calls that Swift's Glibc module does not import: its module map leaves out
/// sys/epoll.h, sys/eventfd.h and sys/signalfd.h, and `accept4`/`struct ucred` need
/// _GNU_SOURCE. RoomSystem has no C target of its own, so the functions are looked up once
/// with dlsym (a `@convention(c)` pointer has the exact C ABI, unlike `@_silgen_name`) and the
/// few constants and layouts are spelled out here. They are the Linux UAPI values, identical
/// on x86_64 and arm64 (the two targets we build for); `epoll_event` is the only layout that
/// differs (packed on x86).
enum LinuxAPI {
    typealias EpollCreate1 = @convention(c) (Int32) -> Int32
    typealias EpollCtl = @convention(c) (Int32, Int32, Int32, UnsafeMutableRawPointer?) -> Int32
    typealias EpollWait = @convention(c) (Int32, UnsafeMutableRawPointer?, Int32, Int32) -> Int32
    typealias EventFD = @convention(c) (UInt32, Int32) -> Int32
    typealias SignalFD = @convention(c) (Int32, UnsafePointer<sigset_t>?, Int32) -> Int32
    typealias Accept4 = @convention(c) (Int32, UnsafeMutablePointer<sockaddr>?, UnsafeMutablePointer<socklen_t>?, Int32) -> Int32

    // C function pointers are immutable and thread-safe to call; the lookup runs once.
    nonisolated(unsafe) static let epollCreate1: EpollCreate1 = resolve("epoll_create1")
    nonisolated(unsafe) static let epollCtl: EpollCtl = resolve("epoll_ctl")
    nonisolated(unsafe) static let epollWait: EpollWait = resolve("epoll_wait")
    nonisolated(unsafe) static let eventfd: EventFD = resolve("eventfd")
    nonisolated(unsafe) static let signalfd: SignalFD = resolve("signalfd")
    nonisolated(unsafe) static let accept4: Accept4 = resolve("accept4")

    private static func resolve<T>(_ name: String) -> T {
        // A nil handle is RTLD_DEFAULT: glibc is always loaded.
        guard let symbol = dlsym(nil, name) else { fatalError("glibc has no \(name)") }
        return unsafeBitCast(symbol, to: T.self)
    }

    // <sys/epoll.h>
    static let EPOLLIN: UInt32 = 0x001
    static let EPOLLOUT: UInt32 = 0x004
    static let EPOLLERR: UInt32 = 0x008
    static let EPOLLHUP: UInt32 = 0x010
    static let EPOLL_CTL_ADD: Int32 = 1
    static let EPOLL_CTL_DEL: Int32 = 2
    static let EPOLL_CTL_MOD: Int32 = 3
    // EPOLL_CLOEXEC, EFD_*, SFD_* are defined as O_CLOEXEC / O_NONBLOCK.

    /// `struct epoll_event { uint32_t events; epoll_data_t data; }` — packed (12 bytes, data at
    /// offset 4) on x86, naturally aligned (16 bytes, data at offset 8) elsewhere.
    #if arch(x86_64) || arch(i386)
    static let epollEventSize = 12
    static let epollDataOffset = 4
    #else
    static let epollEventSize = 16
    static let epollDataOffset = 8
    #endif

    /// `struct signalfd_siginfo` is 128 bytes; `ssi_signo` (uint32) comes first.
    static let signalfdSiginfoSize = 128

    /// `struct ucred { pid_t pid; uid_t uid; gid_t gid; }`
    struct UCred { var pid: Int32 = 0; var uid: UInt32 = 0; var gid: UInt32 = 0 }

    static var socketFlags: Int32 { Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue) }

    static func isWouldBlock(_ code: Int32) -> Bool { code == EAGAIN || code == EWOULDBLOCK }
}
