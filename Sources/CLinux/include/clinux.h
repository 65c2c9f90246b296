// The Linux interfaces RoomSystem needs that Swift's Glibc module does not import (epoll,
// eventfd, signalfd, accept4, SO_PEERCRED), behind functions and types of this header's own.
//
// Rule: this header includes no system header. A system header included here is parsed into
// the CLinux Clang module as well as into Glibc, and which module then owns a declaration such
// as SOCK_STREAM depends on build order: a release (whole-module) build of RoomSystem once
// failed on every fresh clone with "cannot find 'SOCK_STREAM' in scope" in files that import
// only Glibc, while an incremental debug build passed. The system headers are included in
// clinux.c only, where the compiler checks each constant and layout against this header
// (epoll_event is packed on x86_64 and not on arm64; the caller never sees it).
#ifndef CLINUX_H
#define CLINUX_H

/// One ready descriptor from clinux_epoll_wait: the epoll event mask and the caller's token.
struct clinux_event {
    unsigned int events;
    unsigned long long token;
};

enum {
    CLINUX_EPOLLIN = 0x001,
    CLINUX_EPOLLOUT = 0x004,
    CLINUX_EPOLLERR = 0x008,
    CLINUX_EPOLLHUP = 0x010,
    CLINUX_EPOLL_CTL_ADD = 1,
    CLINUX_EPOLL_CTL_DEL = 2,
    CLINUX_EPOLL_CTL_MOD = 3,
};

/// epoll_create1(EPOLL_CLOEXEC).
int clinux_epoll_create(void);

/// epoll_ctl with `events` and `token` (returned as clinux_event.token).
int clinux_epoll_ctl(int epoll_fd, int operation, int fd, unsigned int events, unsigned long long token);

/// epoll_wait into `events` (capacity entries). Returns the count, or -1 with errno set.
int clinux_epoll_wait(int epoll_fd, struct clinux_event *events, int capacity, int timeout_ms);

/// eventfd(initial, EFD_NONBLOCK | EFD_CLOEXEC).
int clinux_eventfd(unsigned int initial);

/// A non-blocking, close-on-exec CLOCK_MONOTONIC timerfd that expires every `period_ns`
/// (first expiry one period from now), or -1 with errno set.
int clinux_timerfd_periodic(long long period_ns);

/// A non-blocking, close-on-exec signalfd for `signal_set`, a pointer to a sigset_t the caller
/// filled with sigemptyset/sigaddset (Glibc's type: opaque here).
int clinux_signalfd(const void *signal_set);

/// Reads one signal from a signalfd: its number, 0 when none is pending, -1 with errno set.
int clinux_signalfd_read(int fd);

/// accept4(fd, address, length, SOCK_NONBLOCK | SOCK_CLOEXEC). `address` is a struct sockaddr
/// of `*length` bytes (Glibc's type: opaque here).
int clinux_accept(int fd, void *address, unsigned int *length);

/// The credentials of a Unix socket's peer (SO_PEERCRED). Returns 0, or -1 with errno set.
int clinux_peer_credentials(int fd, int *pid, unsigned int *uid, unsigned int *gid);

/// The supplementary groups a Unix socket's peer had when it connected (SO_PEERGROUPS, Linux
/// 4.13), at most `capacity` into `groups`. Returns how many, or -1 with errno set (ERANGE: more
/// than `capacity`).
int clinux_peer_groups(int fd, unsigned int *groups, int capacity);

/// Names the calling thread (prctl PR_SET_NAME; the kernel keeps 15 bytes). Returns 0, or -1
/// with errno set. prctl is variadic, so Swift cannot call it directly.
int clinux_set_thread_name(const char *name);

/// Keeps the process's memory out of core dumps and away from other users' debuggers:
/// RLIMIT_CORE 0 and prctl PR_SET_DUMPABLE 0 (which also makes /proc/PID root's). Returns 0, or
/// -1 with errno set (the first call that failed).
int clinux_keep_memory_private(void);

/// The calling thread's name into `buffer` (at least 16 bytes, NUL-terminated). Returns 0, or -1.
int clinux_thread_name(char *buffer);

/// Keeps the calling thread on CPU `cpu` (sched_setaffinity; CPU_SET is a macro Swift cannot
/// use). Returns 0, or -1 with errno set. The test suite's stall witness pins a thread per CPU.
int clinux_pin_thread_to_cpu(int cpu);

/// glibc's malloc_trim(0): gives the free pages inside the heap back to the kernel. A direct
/// call, not a dlsym lookup: looking a symbol up walks every loaded library's hash table, and
/// done after start-up's pages were given back it mapped 64 KB of each library again (~0.7 MB).
int clinux_malloc_trim(void);

/// One datagram for clinux_sendmmsg: `length` bytes at `bytes` to the socket address at
/// `address` (`address_length` bytes; Glibc's struct sockaddr, opaque here).
struct clinux_datagram {
    const void *bytes;
    unsigned long length;
    const void *address;
    unsigned int address_length;
};

/// The most datagrams one clinux_sendmmsg call passes to the kernel.
enum { CLINUX_SENDMMSG_MAX = 64 };

/// sendmmsg(fd, ..., 0) of the first min(count, CLINUX_SENDMMSG_MAX) datagrams: one system call
/// for them all. Returns how many were sent (the kernel stops at the first that fails), or -1
/// with errno set when the first one failed.
int clinux_sendmmsg(int fd, const struct clinux_datagram *datagrams, unsigned int count);

/// How many CPUs this thread may run on (sched_getaffinity): what taskset, systemd's
/// CPUAffinity or a container's cpuset leave, not the machine's count. -1 with errno set.
int clinux_usable_cpu_count(void);

/// Steers datagrams among the sockets of `fd`'s SO_REUSEPORT group (SO_ATTACH_REUSEPORT_CBPF):
/// the socket that joined the group n-th gets the datagrams whose RTP SSRC (byte 8) or, for a
/// roomserver binding datagram ('R' first, participant id at byte 4), whose number modulo
/// `groups` is n; a datagram too short for the load goes to the first. Returns 0, or -1 with
/// errno set.
int clinux_reuseport_steer_by_ssrc(int fd, unsigned int groups);

#endif
