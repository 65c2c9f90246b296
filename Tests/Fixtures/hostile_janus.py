#!/usr/bin/env python3
"""A hostile Janus for process tests: speaks just enough of Janus's WebSocket API (subprotocol
janus-protocol) to take an appliance through create, attach and join, and answers the join's offer
with the SDP in the file given. Whatever it receives and sends is logged, one JSON line each.

    hostile_janus.py PORT ANSWER_SDP_FILE LOG_FILE

Standard library only (the suite installs no Python packages). One client at a time; prints
"listening" once the socket is bound.
"""
import base64, hashlib, json, socket, struct, sys

port, answer_file, log_file = int(sys.argv[1]), sys.argv[2], sys.argv[3]
answer = open(answer_file).read()
log = open(log_file, "a", buffering=1)


def frame(text):
    data = text.encode()
    head = bytes([0x81])
    if len(data) < 126:
        head += bytes([len(data)])
    elif len(data) < 65536:
        head += bytes([126]) + struct.pack(">H", len(data))
    else:
        head += bytes([127]) + struct.pack(">Q", len(data))
    return head + data


def read_exact(conn, n):
    out = b""
    while len(out) < n:
        chunk = conn.recv(n - len(out))
        if not chunk:
            raise EOFError
        out += chunk
    return out


def messages(conn):
    while True:
        b0, b1 = read_exact(conn, 2)
        opcode, length = b0 & 0x0F, b1 & 0x7F
        if length == 126:
            length = struct.unpack(">H", read_exact(conn, 2))[0]
        elif length == 127:
            length = struct.unpack(">Q", read_exact(conn, 8))[0]
        mask = read_exact(conn, 4) if b1 & 0x80 else b"\0\0\0\0"
        payload = bytes(c ^ mask[i % 4] for i, c in enumerate(read_exact(conn, length)))
        if opcode == 8:
            return
        if opcode == 9:
            conn.sendall(bytes([0x8A, len(payload)]) + payload)
        elif opcode == 1:
            yield json.loads(payload)


def serve(conn):
    request = b""
    while b"\r\n\r\n" not in request:
        chunk = conn.recv(4096)
        if not chunk:
            return
        request += chunk
    headers = {k.strip().lower(): v.strip() for k, _, v in
               (line.partition(":") for line in request.decode(errors="replace").split("\r\n")[1:] if ":" in line)}
    accept = base64.b64encode(hashlib.sha1((headers.get("sec-websocket-key", "") +
                                            "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").encode()).digest()).decode()
    conn.sendall(("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                  "Sec-WebSocket-Accept: %s\r\nSec-WebSocket-Protocol: janus-protocol\r\n\r\n" % accept).encode())

    def send(message):
        log.write(json.dumps({"sent": message}) + "\n")
        conn.sendall(frame(json.dumps(message)))

    for m in messages(conn):
        log.write(json.dumps({"received": m}) + "\n")
        kind, t = m.get("janus"), m.get("transaction")
        if kind == "create":
            send({"janus": "success", "transaction": t, "data": {"id": 77}})
        elif kind == "attach":
            send({"janus": "success", "session_id": 77, "transaction": t, "data": {"id": 88}})
        elif kind == "message" and (m.get("body") or {}).get("request") == "join":
            send({"janus": "ack", "session_id": 77, "transaction": t})
            send({"janus": "event", "session_id": 77, "sender": 88, "transaction": t,
                  "plugindata": {"plugin": "janus.plugin.audiobridge",
                                 "data": {"audiobridge": "joined", "room": m["body"].get("room"), "id": 555, "participants": []}},
                  "jsep": {"type": "answer", "sdp": answer}})
        elif kind in ("keepalive", "trickle", "message"):
            send({"janus": "ack", "session_id": 77, "transaction": t})
        elif kind in ("detach", "destroy"):
            send({"janus": "success", "session_id": 77, "transaction": t})


server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
server.bind(("127.0.0.1", port))
server.listen(4)
print("listening", flush=True)
while True:
    conn, _ = server.accept()
    try:
        serve(conn)
    except (EOFError, ConnectionError, ValueError):
        pass
    finally:
        conn.close()
