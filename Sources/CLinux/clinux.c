// The system side of clinux.h: the only place the Linux headers are included (see there why).
#define _GNU_SOURCE
#include "clinux.h"
#include <errno.h>
#include <malloc.h>
#include <sched.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <linux/filter.h>
#include <time.h>
#include <unistd.h>

_Static_assert((int)CLINUX_EPOLLIN == (int)EPOLLIN, "EPOLLIN");
_Static_assert((int)CLINUX_EPOLLOUT == (int)EPOLLOUT, "EPOLLOUT");
_Static_assert((int)CLINUX_EPOLLERR == (int)EPOLLERR, "EPOLLERR");
_Static_assert((int)CLINUX_EPOLLHUP == (int)EPOLLHUP, "EPOLLHUP");
_Static_assert((int)CLINUX_EPOLL_CTL_ADD == (int)EPOLL_CTL_ADD, "EPOLL_CTL_ADD");
_Static_assert((int)CLINUX_EPOLL_CTL_DEL == (int)EPOLL_CTL_DEL, "EPOLL_CTL_DEL");
_Static_assert((int)CLINUX_EPOLL_CTL_MOD == (int)EPOLL_CTL_MOD, "EPOLL_CTL_MOD");
// clinux_epoll_wait widens the kernel's entries in place, last first: that needs ours to be
// at least as large.
_Static_assert(sizeof(struct clinux_event) >= sizeof(struct epoll_event), "clinux_event size");
_Static_assert(sizeof(unsigned int) == sizeof(socklen_t), "socklen_t");
_Static_assert(sizeof(unsigned int) == sizeof(uid_t) && sizeof(unsigned int) == sizeof(gid_t), "uid_t");
_Static_assert(sizeof(int) == sizeof(pid_t), "pid_t");

int clinux_epoll_create(void) { return epoll_create1(EPOLL_CLOEXEC); }

int clinux_epoll_ctl(int epoll_fd, int operation, int fd, unsigned int events, unsigned long long token) {
    struct epoll_event event;
    memset(&event, 0, sizeof event);
    event.events = events;
    event.data.u64 = token;
    return epoll_ctl(epoll_fd, operation, fd, &event);
}

int clinux_epoll_wait(int epoll_fd, struct clinux_event *events, int capacity, int timeout_ms) {
    struct epoll_event *kernel = (struct epoll_event *)(void *)events;
    int n = epoll_wait(epoll_fd, kernel, capacity, timeout_ms);
    for (int i = n - 1; i >= 0; i--) {
        struct epoll_event entry;
        memcpy(&entry, &kernel[i], sizeof entry);
        events[i].events = entry.events;
        events[i].token = entry.data.u64;
    }
    return n;
}

int clinux_eventfd(unsigned int initial) { return eventfd(initial, EFD_NONBLOCK | EFD_CLOEXEC); }

int clinux_timerfd_periodic(long long period_ns) {
    int fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    if (fd < 0) return -1;
    struct timespec period = {(time_t)(period_ns / 1000000000LL), (long)(period_ns % 1000000000LL)};
    struct itimerspec spec = {period, period};
    if (timerfd_settime(fd, 0, &spec, NULL) != 0) { int e = errno; close(fd); errno = e; return -1; }
    return fd;
}

int clinux_signalfd(const void *signal_set) {
    return signalfd(-1, (const sigset_t *)signal_set, SFD_NONBLOCK | SFD_CLOEXEC);
}

int clinux_signalfd_read(int fd) {
    struct signalfd_siginfo info;
    ssize_t n = read(fd, &info, sizeof info);
    if (n == (ssize_t)sizeof info) return (int)info.ssi_signo;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return 0;
    if (n >= 0) { errno = EIO; }
    return -1;
}

int clinux_accept(int fd, void *address, unsigned int *length) {
    return accept4(fd, (struct sockaddr *)address, (socklen_t *)length, SOCK_NONBLOCK | SOCK_CLOEXEC);
}

int clinux_peer_credentials(int fd, int *pid, unsigned int *uid, unsigned int *gid) {
    struct ucred cred;
    socklen_t length = sizeof cred;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &length) != 0) return -1;
    *pid = cred.pid;
    *uid = cred.uid;
    *gid = cred.gid;
    return 0;
}

int clinux_peer_groups(int fd, unsigned int *groups, int capacity)
{
#ifndef SO_PEERGROUPS
#define SO_PEERGROUPS 59
#endif
    socklen_t length = (socklen_t)(capacity * (int)sizeof(unsigned int));
    if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups, &length) != 0) return -1;
    return (int)(length / sizeof(unsigned int));
}

int clinux_set_thread_name(const char *name) { return prctl(PR_SET_NAME, (unsigned long)name, 0, 0, 0); }

int clinux_keep_memory_private(void)
{
    struct rlimit none = {0, 0};
    if (setrlimit(RLIMIT_CORE, &none) != 0) return -1;
    return prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
}

int clinux_thread_name(char *buffer)
{
    buffer[15] = '\0';
    return prctl(PR_GET_NAME, (unsigned long)buffer, 0, 0, 0);
}

int clinux_malloc_trim(void)
{
    return malloc_trim(0);
}

int clinux_pin_thread_to_cpu(int cpu) {
    if (cpu < 0 || cpu >= CPU_SETSIZE) { errno = EINVAL; return -1; }
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    return sched_setaffinity(0, sizeof set, &set);
}

int clinux_sendmmsg(int fd, const struct clinux_datagram *datagrams, unsigned int count) {
    struct mmsghdr messages[CLINUX_SENDMMSG_MAX];
    struct iovec vectors[CLINUX_SENDMMSG_MAX];
    if (count > CLINUX_SENDMMSG_MAX) count = CLINUX_SENDMMSG_MAX;
    for (unsigned int i = 0; i < count; i++) {
        vectors[i].iov_base = (void *)datagrams[i].bytes;
        vectors[i].iov_len = datagrams[i].length;
        memset(&messages[i], 0, sizeof messages[i]);
        messages[i].msg_hdr.msg_name = (void *)datagrams[i].address;
        messages[i].msg_hdr.msg_namelen = datagrams[i].address_length;
        messages[i].msg_hdr.msg_iov = &vectors[i];
        messages[i].msg_hdr.msg_iovlen = 1;
    }
    return sendmmsg(fd, messages, count, 0);
}

int clinux_usable_cpu_count(void) {
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) != 0) return -1;
    return CPU_COUNT(&set);
}

int clinux_reuseport_steer_by_ssrc(int fd, unsigned int groups) {
    if (groups < 1) { errno = EINVAL; return -1; }
    // The reuseport program sees the UDP payload from its first byte. A binding datagram
    // ('R' first) names its participant at byte 4, RTP its SSRC at byte 8: the group is that
    // number modulo `groups`. A load past the end ends the program with 0 (group 0).
    struct sock_filter program[] = {
        BPF_STMT(BPF_LD | BPF_B | BPF_ABS, 0),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, 0x52, 0, 2),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, 4),
        BPF_JUMP(BPF_JMP | BPF_JA, 1, 0, 0),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, 8),
        BPF_STMT(BPF_ALU | BPF_MOD | BPF_K, groups),
        BPF_STMT(BPF_RET | BPF_A, 0),
    };
    struct sock_fprog fprog = { .len = sizeof program / sizeof program[0], .filter = program };
    return setsockopt(fd, SOL_SOCKET, SO_ATTACH_REUSEPORT_CBPF, &fprog, sizeof fprog);
}
