// The Linux interfaces RoomSystem needs that Swift's Glibc module does not import: its module
// map leaves out sys/epoll.h, sys/eventfd.h and sys/signalfd.h, so they are included here and
// the compiler checks every layout (epoll_event is packed on x86_64, not on arm64).
// accept4 and struct ucred need _GNU_SOURCE, which a header that shares system headers with
// the Glibc module cannot set: they are wrapped in clinux.c, compiled with it.
#ifndef CLINUX_H
#define CLINUX_H
#include <sys/types.h>
#include <sys/socket.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/signalfd.h>

/// accept4(2) with the given SOCK_* flags.
int clinux_accept4(int fd, struct sockaddr *address, socklen_t *length, int flags);

/// The credentials of a Unix socket's peer (SO_PEERCRED). Returns 0, or -1 with errno set.
int clinux_peer_credentials(int fd, pid_t *pid, uid_t *uid, gid_t *gid);

#endif
