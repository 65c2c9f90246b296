// scripts/bench server-floor's bare forwarder: what the server bench's datagrams cost this host's
// kernel with no server around them (docs/roomserver.md, "What a forwarded packet costs").
//
// One process, two threads, each pinned to its own CPU:
// - the forwarder: one UDP socket on 127.0.0.1; a blocking recv, then one sendmmsg of the packet to
//   the other members of its room. No parsing beyond two bytes, no crypto, no bookkeeping, no
//   epoll: the least a user-space forwarder can ask of the kernel per packet.
// - the load: ROOMS × PARTICIPANTS UDP sockets on 127.0.0.1; the first STREAMERS of each room send
//   a packet of PAYLOAD bytes every INTERVAL ms to the forwarder (phases spread over the interval),
//   every socket drains what it is sent (epoll + recvmmsg), and counts it.
// After WARMUP s it reads each thread's utime + stime (/proc/self/task/TID/stat, the accounting the
// server bench uses) over DURATION s and prints JSON lines.
//
//   udpfloor [--rooms 50] [--participants 10] [--streamers 3] [--interval-ms 10] [--payload 72]
//            [--warmup 5] [--duration 20] [--forward-cpu 0] [--load-cpu 1]
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static int rooms = 50, participants = 10, streamers = 3, interval_ms = 10, payload = 72;
static int warmup = 5, duration = 20, forward_cpu = 0, load_cpu = 1;
static int forward_fd;
static struct sockaddr_in forward_addr;
static struct sockaddr_in *member_addr;  // [room * participants + member]
static atomic_int forward_tid, load_tid;
static atomic_int stop;

static void die(const char *what) {
    fprintf(stderr, "udpfloor: %s: %s\n", what, strerror(errno));
    exit(1);
}

static void pin(int cpu) {
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    if (pthread_setaffinity_np(pthread_self(), sizeof set, &set) != 0) die("pthread_setaffinity_np");
}

static int udp_socket(struct sockaddr_in *bound, int buffer) {
    int fd = socket(AF_INET, SOCK_DGRAM, 0);
    if (fd < 0) die("socket");
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &buffer, sizeof buffer);
    setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &buffer, sizeof buffer);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (bind(fd, (struct sockaddr *)&a, sizeof a) != 0) die("bind");
    socklen_t n = sizeof *bound;
    getsockname(fd, (struct sockaddr *)bound, &n);
    return fd;
}

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

static double thread_cpu_s(int tid) {
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/self/task/%d/stat", tid);
    FILE *f = fopen(path, "r");
    if (!f) die(path);
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    char *p = strrchr(buf, ')');
    unsigned long utime = 0, stime = 0;
    // After ")": state(3) ... utime is field 14, stime 15: the 12th and 13th after the state.
    sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &utime, &stime);
    return (double)(utime + stime) / sysconf(_SC_CLK_TCK);
}

// Bytes 0-1 of a packet: its room; byte 2: the sender's index in the room.
static void *forwarder(void *unused) {
    (void)unused;
    pin(forward_cpu);
    atomic_store(&forward_tid, (int)syscall(SYS_gettid));
    unsigned char packet[2048];
    struct mmsghdr out[64];
    struct iovec iov = {.iov_base = packet};
    while (!atomic_load(&stop)) {
        ssize_t n = recv(forward_fd, packet, sizeof packet, 0);
        if (n < 3) continue;
        iov.iov_len = (size_t)n;
        int room = packet[0] | packet[1] << 8, from = packet[2], k = 0;
        if (room >= rooms) continue;
        for (int m = 0; m < participants && k < 64; m++) {
            if (m == from) continue;
            out[k].msg_hdr = (struct msghdr){.msg_name = &member_addr[room * participants + m],
                                             .msg_namelen = sizeof(struct sockaddr_in), .msg_iov = &iov, .msg_iovlen = 1};
            k++;
        }
        sendmmsg(forward_fd, out, (unsigned)k, 0);
    }
    return NULL;
}

static atomic_long received;

static void *load(void *arg) {
    int *fds = arg;
    pin(load_cpu);
    atomic_store(&load_tid, (int)syscall(SYS_gettid));
    int total = rooms * participants, talkers = rooms * streamers;
    int ep = epoll_create1(0);
    for (int i = 0; i < total; i++) {
        struct epoll_event e = {.events = EPOLLIN, .data.u32 = (uint32_t)i};
        if (epoll_ctl(ep, EPOLL_CTL_ADD, fds[i], &e) != 0) die("epoll_ctl");
    }
    double *next = malloc(sizeof(double) * (size_t)talkers), start = now_s(), period = interval_ms / 1000.0;
    for (int t = 0; t < talkers; t++) next[t] = start + period * t / talkers;
    unsigned char packet[2048] = {0};
    struct mmsghdr in[16];
    struct iovec iovs[16];
    unsigned char bufs[16][2048];
    for (int i = 0; i < 16; i++) {
        iovs[i] = (struct iovec){.iov_base = bufs[i], .iov_len = sizeof bufs[i]};
        in[i].msg_hdr = (struct msghdr){.msg_iov = &iovs[i], .msg_iovlen = 1};
    }
    struct epoll_event events[256];
    while (!atomic_load(&stop)) {
        double now = now_s();
        for (int t = 0; t < talkers; t++) {
            if (next[t] <= now) {
                int room = t / streamers, member = t % streamers;
                packet[0] = (unsigned char)room;
                packet[1] = (unsigned char)(room >> 8);
                packet[2] = (unsigned char)member;
                sendto(fds[room * participants + member], packet, (size_t)payload, 0,
                       (struct sockaddr *)&forward_addr, sizeof forward_addr);
                next[t] += period;
                if (next[t] < now) next[t] = now + period;  // fell behind: no burst to catch up
            }
        }
        // A 1 ms tick: the sends due in it leave together, as from a generator's timer.
        int n = epoll_wait(ep, events, 256, 1);
        for (int i = 0; i < n; i++) {
            int got;
            while ((got = recvmmsg(fds[events[i].data.u32], in, 16, MSG_DONTWAIT, NULL)) > 0) atomic_fetch_add(&received, got);
        }
    }
    free(next);
    return NULL;
}

int main(int argc, char **argv) {
    for (int i = 1; i + 1 < argc; i += 2) {
        int v = atoi(argv[i + 1]);
        if (!strcmp(argv[i], "--rooms")) rooms = v;
        else if (!strcmp(argv[i], "--participants")) participants = v;
        else if (!strcmp(argv[i], "--streamers")) streamers = v;
        else if (!strcmp(argv[i], "--interval-ms")) interval_ms = v;
        else if (!strcmp(argv[i], "--payload")) payload = v;
        else if (!strcmp(argv[i], "--warmup")) warmup = v;
        else if (!strcmp(argv[i], "--duration")) duration = v;
        else if (!strcmp(argv[i], "--forward-cpu")) forward_cpu = v;
        else if (!strcmp(argv[i], "--load-cpu")) load_cpu = v;
        else { fprintf(stderr, "udpfloor: unknown option %s\n", argv[i]); return 2; }
    }
    if (rooms < 1 || rooms > 65535 || participants < 2 || participants > 65 || streamers < 1 || streamers > participants ||
        interval_ms < 1 || payload < 3 || payload > 1400 || duration < 1) {
        fprintf(stderr, "udpfloor: an option is out of range\n");
        return 2;
    }
    int total = rooms * participants;
    int *fds = malloc(sizeof(int) * (size_t)total);
    member_addr = malloc(sizeof(struct sockaddr_in) * (size_t)total);
    forward_fd = udp_socket(&forward_addr, 4 << 20);
    for (int i = 0; i < total; i++) fds[i] = udp_socket(&member_addr[i], 256 << 10);
    pthread_t f, l;
    pthread_create(&f, NULL, forwarder, NULL);
    pthread_create(&l, NULL, load, fds);
    while (!atomic_load(&forward_tid) || !atomic_load(&load_tid)) usleep(1000);
    sleep((unsigned)warmup);
    double t0 = now_s(), f0 = thread_cpu_s(forward_tid), l0 = thread_cpu_s(load_tid);
    long r0 = atomic_load(&received);
    sleep((unsigned)duration);
    double t1 = now_s(), f1 = thread_cpu_s(forward_tid), l1 = thread_cpu_s(load_tid);
    long r1 = atomic_load(&received);
    double window = t1 - t0, expected = (double)rooms * streamers * (participants - 1) * (1000.0 / interval_ms) * window;
    double forwarded = (double)(r1 - r0);
    printf("{\"bench\":\"server-floor\",\"metric\":\"floor.cpu_pct_%dp\",\"value\":%.2f,\"unit\":\"%% of one core\",\"window_s\":%.1f,\"forwarded_per_s\":%.0f}\n",
           total, 100 * (f1 - f0) / window, window, forwarded / window);
    printf("{\"bench\":\"server-floor\",\"metric\":\"floor.us_per_forward\",\"value\":%.3f,\"unit\":\"us\"}\n",
           1e6 * (f1 - f0) / (forwarded > 0 ? forwarded : 1));
    // The window's edges cut a tick's packets either way: a few hundredths of a per cent either side
    // of 0 is no loss; the counts are printed beside it.
    double loss = expected > 0 ? 100 * (1 - forwarded / expected) : 0;
    printf("{\"bench\":\"server-floor\",\"metric\":\"floor.forward_loss_pct\",\"value\":%.3f,\"unit\":\"%%\",\"expected\":%.0f,\"received\":%.0f}\n",
           loss > 0 ? loss : 0, expected, forwarded);
    printf("{\"bench\":\"server-floor\",\"metric\":\"floor.load_cpu_pct\",\"value\":%.2f,\"unit\":\"%% of one core\"}\n",
           100 * (l1 - l0) / window);
    fflush(stdout);
    atomic_store(&stop, 1);
    // The forwarder may sit in recv: one packet wakes it.
    sendto(fds[0], "\0\0\0", 3, 0, (struct sockaddr *)&forward_addr, sizeof forward_addr);
    pthread_join(f, NULL);
    pthread_join(l, NULL);
    return 0;
}
