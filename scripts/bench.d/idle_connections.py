"""Holds N TCP connections to a roomserver that never say hello (scripts/bench_server.sh,
IDLE_CONNECTIONS): from 40 loopback source addresses, each reopened when the server closes it
at its hello deadline. Prints "open N" once they are all open, then runs until killed."""
import select
import socket
import sys

port, n = int(sys.argv[1]), int(sys.argv[2])


def open_one(i):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.bind(("127.0.1.%d" % (i % 40 + 1), 0))
    s.connect(("127.0.0.1", port))
    return s


conns = [open_one(i) for i in range(n)]
print("open", len(conns), flush=True)
index = {s.fileno(): i for i, s in enumerate(conns)}
poller = select.poll()
for s in conns:
    poller.register(s, select.POLLIN)
while True:
    for fd, _ in poller.poll(500):
        i = index.pop(fd)
        poller.unregister(fd)
        conns[i].close()
        try:
            conns[i] = open_one(i)
        except OSError:
            continue
        index[conns[i].fileno()] = i
        poller.register(conns[i], select.POLLIN)
