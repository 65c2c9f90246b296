#!/usr/bin/env python3
"""scripts/bench janus-load's load generator and analysis (standard library + the system's libopus).

  janus-load.py run --ws PORT --janus-pid PID --ip ADDR --rooms N --participants M [--streamers S]
                    [--warmup 5] [--duration 20] --speech FILE.wav [--room-base 9000]

Loads a Janus AudioBridge with N rooms of M *plain-RTP participants* (the AudioBridge's
`join` with an `rtp` object: Janus 1.1.2 decodes, mixes and encodes for them exactly as for a
WebRTC PeerConnection, but their packets skip ICE and DTLS-SRTP). All participants run in this
one process, on one thread: one WebSocket to Janus, one Janus session, one handle per
participant, one UDP socket per participant on ADDR (the address of
Janus's media interface: its plain-RTP sockets are bound there, not on loopback). The first S of each room (default:
all) send Opus at 48 kHz mono in 20 ms frames (the appliance's frames on the Janus path),
looping an espeak-ng sentence, each from its own offset; the others join muted (an appliance in
the audience role) and send one packet a second, which Janus drops (without any, Janus 1.1.2
sends a plain-RTP participant no mix). Everyone receives and counts the room's mix.

Over the measured window it reads Janus's CPU (utime + stime of /proc/PID/stat, as % of one
core) and RSS, and its own, and prints JSON lines (`emit` as in scripts/bench_analysis.py).

  janus-load.py idle --janus-pid PID [--duration 20] [--warmup 0] [--webrtc N]
                                 Janus's CPU with no room of ours, or while N appliances talk
  janus-load.py fit FILE.jsonl   the sweep's per-room and per-participant cost (least squares)
"""
import array
import ctypes
import ctypes.util
import base64
import json
import os
import random
import select
import socket
import struct
import sys
import time
import wave

BENCH = "janus-load"
TICK = os.sysconf("SC_CLK_TCK")


def emit(metric, value, unit, **extra):
    line = {"bench": BENCH, "metric": metric, "value": round(value, 3), "unit": unit}
    line.update(extra)
    print(json.dumps(line), flush=True)


# --- Opus (the system's libopus through ctypes) -------------------------------------------

def opus_packets(path, bitrate=32000):
    """The WAV (48 kHz mono 16-bit) as Opus packets of 20 ms."""
    lib = ctypes.CDLL(ctypes.util.find_library("opus") or "libopus.so.0")
    lib.opus_encoder_create.restype = ctypes.c_void_p
    lib.opus_encode.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p, ctypes.c_int32]
    err = ctypes.c_int()
    enc = lib.opus_encoder_create(48000, 1, 2048, ctypes.byref(err))  # OPUS_APPLICATION_VOIP
    if err.value != 0:
        raise SystemExit(f"janus-load: opus_encoder_create failed: {err.value}")
    lib.opus_encoder_ctl(ctypes.c_void_p(enc), 4002, ctypes.c_int(bitrate))  # OPUS_SET_BITRATE
    with wave.open(path) as w:
        if w.getframerate() != 48000 or w.getnchannels() != 1 or w.getsampwidth() != 2:
            raise SystemExit("janus-load: the speech must be 48 kHz mono 16-bit")
        pcm = array.array("h", w.readframes(w.getnframes()))
    pcm.extend([0] * 48000)  # a second of silence between loops, as between sentences
    out = ctypes.create_string_buffer(1500)
    packets = []
    for i in range(0, len(pcm) - 960 + 1, 960):
        frame = (ctypes.c_int16 * 960)(*pcm[i:i + 960])
        n = lib.opus_encode(ctypes.c_void_p(enc), frame, 960, out, 1500)
        if n < 0:
            raise SystemExit(f"janus-load: opus_encode failed: {n}")
        packets.append(out.raw[:n])
    return packets


# --- Janus's WebSocket API (a minimal RFC 6455 client, subprotocol janus-protocol) --------

class JanusWS:
    def __init__(self, port):
        self.sock = socket.create_connection(("127.0.0.1", port))
        key = base64.b64encode(os.urandom(16)).decode()
        self.sock.sendall((f"GET / HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\n"
                           f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
                           "Sec-WebSocket-Version: 13\r\nSec-WebSocket-Protocol: janus-protocol\r\n\r\n").encode())
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = self.sock.recv(4096)
            if not chunk:
                raise SystemExit("janus-load: Janus closed the WebSocket during the handshake")
            head += chunk
        head, self.buf = head.split(b"\r\n\r\n", 1)
        if b" 101 " not in head.split(b"\r\n", 1)[0]:
            raise SystemExit(f"janus-load: WebSocket handshake refused: {head[:200]!r}")
        self.sock.setblocking(False)
        self.tx = 0
        self.pending = {}   # transaction -> reply (None until it arrives)
        self.events = []    # asynchronous messages without a transaction we wait for

    def send(self, msg):
        data = json.dumps(msg).encode()
        mask = os.urandom(4)
        n = len(data)
        head = bytes([0x81]) + (bytes([0x80 | n]) if n < 126 else
                                bytes([0x80 | 126]) + struct.pack("!H", n) if n < 65536 else
                                bytes([0x80 | 127]) + struct.pack("!Q", n))
        masked = bytes(b ^ mask[i % 4] for i, b in enumerate(data))
        self.sock.setblocking(True)
        self.sock.sendall(head + mask + masked)
        self.sock.setblocking(False)

    def pump(self):
        """Reads what has arrived; returns the messages."""
        try:
            while True:
                chunk = self.sock.recv(65536)
                if not chunk:
                    raise SystemExit("janus-load: Janus closed the WebSocket")
                self.buf += chunk
        except BlockingIOError:
            pass
        msgs = []
        while len(self.buf) >= 2:
            b0, b1 = self.buf[0], self.buf[1]
            n, off = b1 & 0x7F, 2
            if n == 126:
                if len(self.buf) < 4:
                    break
                n, off = struct.unpack("!H", self.buf[2:4])[0], 4
            elif n == 127:
                if len(self.buf) < 10:
                    break
                n, off = struct.unpack("!Q", self.buf[2:10])[0], 10
            if len(self.buf) < off + n:
                break
            payload, self.buf = self.buf[off:off + n], self.buf[off + n:]
            if b0 & 0x0F in (1, 2):
                msg = json.loads(payload)
                t = msg.get("transaction")
                if t in self.pending and msg.get("janus") != "ack":
                    self.pending[t] = msg
                else:
                    msgs.append(msg)
        self.events.extend(msgs)
        return msgs

    def request(self, msg, wait=True):
        self.tx += 1
        t = f"t{self.tx}"
        msg = dict(msg, transaction=t)
        self.pending[t] = None
        self.send(msg)
        if not wait:
            return t
        return self.wait(t)

    def wait(self, t, timeout=10):
        end = time.monotonic() + timeout
        while self.pending[t] is None:
            if time.monotonic() > end:
                raise SystemExit(f"janus-load: no answer from Janus to {t} within {timeout} s")
            select.select([self.sock], [], [], 0.05)
            self.pump()
        return self.pending.pop(t)


def plugin_data(reply):
    data = reply.get("plugindata", {}).get("data", {})
    if reply.get("janus") == "error" or "error" in data:
        raise SystemExit(f"janus-load: Janus refused: {json.dumps(reply)[:300]}")
    return data


# --- /proc --------------------------------------------------------------------------------

def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK  # utime, stime (fields 14, 15)


def rss_mb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def threads(pid):
    return len(os.listdir(f"/proc/{pid}/task"))


# --- the run ------------------------------------------------------------------------------

def run(args):
    rooms, per_room = int(args["--rooms"]), int(args["--participants"])
    streamers = int(args.get("--streamers", per_room))
    warmup, duration = float(args.get("--warmup", 5)), float(args.get("--duration", 20))
    jpid = int(args["--janus-pid"])
    base = int(args.get("--room-base", 9000))
    local_ip = args["--ip"]  # Janus binds plain RTP to its media interface (192.0.2.2 here), not loopback
    packets = opus_packets(args["--speech"])
    ws = JanusWS(int(args["--ws"]))
    session = ws.request({"janus": "create"})["data"]["id"]
    janus_rss_before = rss_mb(jpid)

    def attach():
        r = ws.request({"janus": "attach", "session_id": session, "plugin": "janus.plugin.audiobridge"})
        return r["data"]["id"]

    control = attach()
    room_ids = [base + r for r in range(rooms)]
    for rid in room_ids:
        # The deployment's room (docs/janus.md: sampling_rate 48000), with plain-RTP participants.
        plugin_data(ws.request({"janus": "message", "session_id": session, "handle_id": control,
                                "body": {"request": "create", "room": rid, "sampling_rate": 48000,
                                         "allow_rtp_participants": True, "permanent": False}}))
    peers = []  # dicts: sock, handle, dest, sending, packet index, seq, ts, ssrc, next send time
    for rid in room_ids:
        for p in range(per_room):
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            s.bind((local_ip, 0))
            s.setblocking(False)
            handle = attach()
            sending = p < streamers
            t = ws.request({"janus": "message", "session_id": session, "handle_id": handle,
                            "body": {"request": "join", "room": rid, "display": f"load-{rid}-{p}",
                                     "muted": not sending,
                                     "rtp": {"ip": local_ip, "port": s.getsockname()[1], "payload_type": 111}}}, wait=False)
            peers.append({"sock": s, "handle": handle, "t": t, "sending": sending, "room": rid})
    for peer in peers:
        reply = ws.wait(peer["t"])
        if reply.get("janus") == "ack":  # the asynchronous join: ack first, the event later
            ws.pending[peer["t"]] = None
            reply = ws.wait(peer["t"])
        data = plugin_data(reply)
        rtp = data.get("rtp")
        if data.get("audiobridge") != "joined" or not rtp:
            raise SystemExit(f"janus-load: join without plain RTP details: {json.dumps(reply)[:300]}")
        if os.environ.get("JANUS_LOAD_DEBUG"):
            print(json.dumps(reply), file=sys.stderr)
        peer["dest"] = (rtp.get("ip") or local_ip, int(rtp["port"]))
        peer["pt"] = int(rtp.get("payload_type", 111))
    n = len(peers)
    now = time.monotonic()
    for i, peer in enumerate(peers):
        peer.update(index=random.randrange(len(packets)), seq=random.randrange(65536),
                    ts=random.randrange(1 << 32), ssrc=random.randrange(1, 1 << 32),
                    next=now + 0.020 * i / max(n, 1), received=0, sent=0, bytes=0)
    by_fd = {peer["sock"].fileno(): peer for peer in peers}
    socks = [peer["sock"] for peer in peers] + [ws.sock]
    start = time.monotonic()
    window_start = start + warmup
    end = window_start + duration
    marks = None
    last_keepalive = start
    sample_next = window_start + 1
    samples = []
    while True:
        now = time.monotonic()
        if marks is None and now >= window_start:
            marks = (now, cpu_seconds(jpid), cpu_seconds("self"),
                     sum(p["received"] for p in peers), sum(p["sent"] for p in peers), sum(p["bytes"] for p in peers))
            prev = (now, marks[1])
        if marks is not None and now >= sample_next:
            c = cpu_seconds(jpid)
            samples.append(100 * (c - prev[1]) / (now - prev[0]))
            prev = (now, c)
            sample_next += 1
        if now >= end:
            break
        if now - last_keepalive > 20:
            ws.request({"janus": "keepalive", "session_id": session}, wait=False)
            last_keepalive = now
        for peer in peers:
            while peer["next"] <= now:
                pkt = struct.pack("!BBHII", 0x80, peer["pt"], peer["seq"], peer["ts"], peer["ssrc"]) + packets[peer["index"]]
                try:
                    peer["sock"].sendto(pkt, peer["dest"])
                    peer["sent"] += 1
                except OSError:
                    pass
                peer["index"] = (peer["index"] + 1) % len(packets)
                peer["seq"] = (peer["seq"] + 1) & 0xFFFF
                peer["ts"] = (peer["ts"] + 960) & 0xFFFFFFFF
                # A muted participant sends one packet a second: Janus 1.1.2 sends a plain-RTP
                # participant the mix only once a packet has come from it (with none it got
                # nothing: checked), and drops a muted one's packets before decoding them.
                peer["next"] += 0.020 if peer["sending"] else 1.0
        nxt = min([p["next"] for p in peers] + [end, sample_next])
        readable, _, _ = select.select(socks, [], [], max(0.0, nxt - time.monotonic()))
        for s in readable:
            if s is ws.sock:
                ws.pump()
                ws.events.clear()
                continue
            peer = by_fd[s.fileno()]
            try:
                while True:
                    peer["bytes"] += len(s.recv(2048)) - 12
                    peer["received"] += 1
            except BlockingIOError:
                pass
    t1 = time.monotonic()
    jcpu, scpu = cpu_seconds(jpid), cpu_seconds("self")
    received = sum(p["received"] for p in peers) - marks[3]
    sent = sum(p["sent"] for p in peers) - marks[4]
    mix_bytes = sum(p["bytes"] for p in peers) - marks[5]
    window = t1 - marks[0]
    point = {"rooms": rooms, "participants": rooms * per_room, "per_room": per_room,
             "streamers_per_room": streamers, "window_s": round(window, 1)}
    jpct = 100 * (jcpu - marks[1]) / window
    samples.sort()
    emit("janus.cpu_pct", jpct, "% of one core", **point,
         p10=round(samples[len(samples) // 10], 2) if samples else None,
         p90=round(samples[(9 * len(samples)) // 10], 2) if samples else None,
         janus_threads=threads(jpid))
    emit("janus.rss_mb", rss_mb(jpid), "MB", **point, before_join=round(janus_rss_before, 2))
    emit("janus.generator_cpu_pct", 100 * (scpu - marks[2]) / window, "% of one core", **point)
    # Every participant should get the mix (50 packets a second), every sender's packets sent.
    emit("janus.mix_received_per_participant_s", received / window / max(n, 1), "packets/s", **point)
    # The mix's mean RTP payload: a few bytes would be Opus coding silence (the mix not carrying
    # the talkers); speech at Janus's default bitrate is tens of bytes.
    emit("janus.mix_payload_bytes", mix_bytes / max(received, 1), "bytes", **point)
    emit("janus.sent_per_participant_s", sent / window / max(n, 1), "packets/s", **point)
    for rid in room_ids:
        plugin_data(ws.request({"janus": "message", "session_id": session, "handle_id": control,
                                "body": {"request": "destroy", "room": rid}}))
    ws.request({"janus": "destroy", "session_id": session})
    for peer in peers:
        peer["sock"].close()


def idle(args):
    """Janus's CPU over a window without our generator: with no room of ours (the baseline), or,
    with --webrtc N, while N roomd appliances (WebRTC: ICE, DTLS-SRTP) talk in one room."""
    jpid, duration = int(args["--janus-pid"]), float(args.get("--duration", 20))
    webrtc = int(args.get("--webrtc", 0))
    time.sleep(float(args.get("--warmup", 0)))
    t0, c0 = time.monotonic(), cpu_seconds(jpid)
    time.sleep(duration)
    point = {"rooms": 1 if webrtc else 0, "participants": webrtc, "per_room": webrtc,
             "streamers_per_room": webrtc, "window_s": duration}
    name = "janus.cpu_pct_webrtc" if webrtc else "janus.cpu_pct"
    emit(name, 100 * (cpu_seconds(jpid) - c0) / (time.monotonic() - t0), "% of one core", **point,
         janus_threads=threads(jpid))
    emit("janus.rss_mb_webrtc" if webrtc else "janus.rss_mb", rss_mb(jpid), "MB", **point)


def solve(A, b):
    """A x = b by Gaussian elimination with partial pivoting (standard library only)."""
    n = len(b)
    M = [row[:] + [v] for row, v in zip(A, b)]
    for c in range(n):
        r = max(range(c, n), key=lambda k: abs(M[k][c]))
        if abs(M[r][c]) < 1e-9:
            raise SystemExit("janus-load fit: the sweep's points do not separate rooms, talkers and listeners")
        M[c], M[r] = M[r], M[c]
        for k in range(n):
            if k != c:
                f = M[k][c] / M[c][c]
                M[k] = [x - f * y for x, y in zip(M[k], M[c])]
    return [M[k][n] / M[k][k] for k in range(n)]


def fit(path):
    """Janus's CPU = idle + a·rooms + b·talking participants + c·muted participants, least
    squares over the sweep's points (the idle point included)."""
    rows = [json.loads(l) for l in open(path) if l.startswith("{")]
    pts = [p for p in rows if p.get("metric") == "janus.cpu_pct"]
    key = lambda p: (p["rooms"], p["per_room"], p["streamers_per_room"])
    gen = {key(p): p["value"] for p in rows if p.get("metric") == "janus.generator_cpu_pct"}
    mix = {key(p): p["value"] for p in rows if p.get("metric") == "janus.mix_received_per_participant_s"}
    # A point where Janus fell behind (its mix under 49 packets/s a participant) is saturated:
    # reported, but kept out of the fit.
    used = [p for p in pts if p["participants"] == 0 or mix.get(key(p), 0) >= 49]
    X = [(1.0, p["rooms"], p["rooms"] * p["streamers_per_room"],
          p["rooms"] * (p["per_room"] - p["streamers_per_room"])) for p in used]
    y = [p["value"] for p in used]
    listeners = any(x[3] for x in X)
    if not listeners:
        X = [x[:3] for x in X]
    k = len(X[0]) if X else 0
    if len(X) < k + 1:
        raise SystemExit(f"janus-load fit: {len(X)} unsaturated points, too few for {k} unknowns")
    A = [[sum(x[i] * x[j] for x in X) for j in range(k)] for i in range(k)]
    b = [sum(x[i] * v for x, v in zip(X, y)) for i in range(k)]
    coef = solve(A, b)
    resid = max(abs(v - sum(c * xi for c, xi in zip(coef, x))) for x, v in zip(X, y))
    extra = {"points": len(X), "saturated_points_left_out": len(pts) - len(used), "max_residual": round(resid, 2)}
    emit("janus.cpu_pct_idle_fit", coef[0], "% of one core", **extra)
    emit("janus.cpu_pct_per_room", coef[1], "% of one core", **extra)
    emit("janus.cpu_pct_per_participant", coef[2], "% of one core", talking=True, **extra)
    if listeners:
        emit("janus.cpu_pct_per_muted_participant", coef[3], "% of one core", talking=False, **extra)
    # The appliances over WebRTC against plain-RTP participants in a room of the same size.
    for w in (r for r in rows if r.get("metric") == "janus.cpu_pct_webrtc"):
        plain = next((p for p in pts if (p["rooms"], p["per_room"], p["streamers_per_room"]) == (1, w["per_room"], w["per_room"])), None)
        if plain:
            emit("janus.webrtc_extra_pct_per_participant", (w["value"] - plain["value"]) / w["participants"], "% of one core",
                 participants=w["participants"], janus_cpu_pct_webrtc=w["value"], janus_cpu_pct_plain_rtp=plain["value"])
    for p in pts:
        if p["participants"]:
            emit("janus.cpu_pct_per_participant_at_point", p["value"] / p["participants"], "% of one core",
                 rooms=p["rooms"], participants=p["participants"], streamers_per_room=p["streamers_per_room"],
                 janus_cpu_pct=p["value"], generator_cpu_pct=gen.get(key(p)),
                 mix_packets_s=mix.get(key(p)))


if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] not in ("run", "idle", "fit"):
        raise SystemExit(__doc__)
    if sys.argv[1] == "fit":
        fit(sys.argv[2])
    else:
        rest = sys.argv[2:]
        opts = dict(zip(rest[::2], rest[1::2]))
        (run if sys.argv[1] == "run" else idle)(opts)
