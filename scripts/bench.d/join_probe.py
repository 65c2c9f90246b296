"""Times joins on a running roomserver over plain signalling (scripts/bench_server.sh,
JOIN_PROBE): each probe connects, sends `hello` with a token minted by `roomserver mint-token`,
and waits for `welcome`; then leaves. Prints one JSON line with the median and the largest of
the probes (ms). Usage: join_probe.py ROOMSERVER CONFIG PORT COUNT"""
import json
import socket
import struct
import subprocess
import sys
import time

server, config, port, count = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])


def frame(obj):
    body = json.dumps(obj).encode()
    return struct.pack(">I", len(body)) + body


def read_frame(s):
    def exactly(n):
        data = b""
        while len(data) < n:
            chunk = s.recv(n - len(data))
            if not chunk:
                raise EOFError("closed")
            data += chunk
        return data
    (n,) = struct.unpack(">I", exactly(4))
    return json.loads(exactly(n))


times = []
for i in range(count):
    token = subprocess.run([server, "mint-token", "--config", config, "--key", "dev", "--room", "probe",
                            "--user", "probe%d" % i], capture_output=True, text=True, check=True).stdout.strip()
    t0 = time.monotonic()
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(frame({"type": "hello", "protocol": 1, "client": "join_probe", "token": token, "role": "audience"}))
    while True:
        m = read_frame(s)
        if m.get("type") == "welcome":
            break
        if m.get("type") == "error":
            raise SystemExit("join_probe: refused: %s" % m)
    times.append((time.monotonic() - t0) * 1000)
    s.sendall(frame({"type": "leave", "id": 1}))
    s.close()
    time.sleep(0.2)
times.sort()
print(json.dumps({"bench": "server", "metric": "server.join_probe_ms", "value": round(times[len(times) // 2], 3),
                  "max": round(times[-1], 3), "probes": count, "unit": "ms"}))
