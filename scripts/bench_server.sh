#!/usr/bin/env bash
# The server load benchmark (docs/benchmarks.md, "Server load (roomload)"):
#   scripts/bench_server.sh BIN [roomload options...]
# BIN is a build products directory holding roomserver and roomload (built by the caller).
# Starts roomserver on free loopback ports with a configuration derived from
# docs/roomserver.conf.example, runs roomload against it (default 50 rooms × 10 participants,
# 3 streamers per room, 5 s warm-up, 20 s window, 2 client threads), stops the server and cleans up.
# Options after BIN go to roomload and override the defaults (e.g. --rooms 5 --duration 10).
# SRTP=no runs the server with `[media] srtp = no` (plain RTP, for the encryption-cost
# comparison; roomload follows the server: it encrypts when welcome carries SRTP keys).
# Prints roomload's JSON lines on stdout; everything else goes to stderr.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BIN="${1:?usage: scripts/bench_server.sh BIN [roomload options...]}"
shift
for exe in roomserver roomload; do
  [ -x "$BIN/$exe" ] || { echo "bench_server: $BIN/$exe not found (build it first)" >&2; exit 2; }
done

# The few roomload options the server configuration depends on (last one wins, like roomload).
participants=10 streamers=3 warmup=5 duration=20 join_timeout=60
args=("$@")
for ((i = 0; i < ${#args[@]} - 1; i++)); do
  case "${args[i]}" in
    --participants) participants="${args[i+1]}" ;;
    --streamers) streamers="${args[i+1]}" ;;
    --warmup) warmup="${args[i+1]%.*}" ;;
    --duration) duration="${args[i+1]%.*}" ;;
    --join-timeout) join_timeout="${args[i+1]%.*}" ;;
  esac
done

WORK="$(mktemp -d /tmp/roomd-bench-server.XXXXXX)"
SERVER_PID=""
cleanup() {
  [ -z "${IDLE_PID:-}" ] || kill "$IDLE_PID" 2>/dev/null || true
  if [ -n "$SERVER_PID" ] && kill -0 "$SERVER_PID" 2>/dev/null; then
    kill -TERM "$SERVER_PID" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$SERVER_PID" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$SERVER_PID" 2>/dev/null || true
  fi
  rm -rf "$WORK"
}
trap cleanup EXIT

# Two free loopback ports (TCP signalling, UDP media), chosen by the kernel.
read -r TCP_PORT UDP_PORT < <(python3 - <<'EOF'
import socket
t = socket.socket(socket.AF_INET, socket.SOCK_STREAM); t.bind(("127.0.0.1", 0))
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); u.bind(("127.0.0.1", 0))
print(t.getsockname()[1], u.getsockname()[1])
EOF
)

# roomload speaks plain signalling by default (it measures the room service's forwarding, and
# 500 TLS handshakes in its one process can make roomload the bottleneck): the server listens
# plain for it. SERVER_SIGNALLING=tls runs the same load over TLS (a throwaway CA in $WORK/tls),
# for the server's cost of TLS.
# The example configuration with our ports, a quiet log, room for every participant, every
# streamer on stage (open policy) and forwarded (top_n).
speaker_limit=$(( streamers > 6 ? streamers : 6 ))
top_n=$(( streamers > 3 ? (streamers > 16 ? 16 : streamers) : 3 ))
max_participants=$(( participants > 50 ? participants : 50 ))
LISTEN_KEY=plain_listen
[ "${SERVER_SIGNALLING:-plain}" = tls ] && LISTEN_KEY=listen
# SERVER_CONFIG_EXAMPLE=FILE: the server's configuration is derived from FILE instead (an older
# revision's docs/roomserver.conf.example, for an older roomserver: scripts/bench server-ab).
# An example without a [tls] section is from before TLS: its `listen` is the plain listener; one
# without an srtp key is from before SRTP: its server forwards plain RTP only.
EXAMPLE="${SERVER_CONFIG_EXAMPLE:-$ROOT/docs/roomserver.conf.example}"
SERVER_LISTEN_KEY="$LISTEN_KEY"
if ! grep -q '^\[tls\]' "$EXAMPLE"; then
  [ "$LISTEN_KEY" = plain_listen ] || { echo "bench_server: $EXAMPLE has no [tls]: that server cannot listen with TLS" >&2; exit 2; }
  SERVER_LISTEN_KEY=listen
fi
configure() { # configure EXAMPLE LISTEN_KEY > FILE
  sed -E \
    -e "s/^listen *=.*/$2 = 127.0.0.1:$TCP_PORT/" \
    -e "s/^media *=.*/media = 127.0.0.1:$UDP_PORT/" \
    -e "s/^log_level *=.*/log_level = notice/" \
    -e "s/^policy *=.*/policy = open/" \
    -e "s/^speaker_limit *=.*/speaker_limit = $speaker_limit/" \
    -e "s/^top_n *=.*/top_n = $top_n/" \
    -e "s/^max_participants *=.*/max_participants = $max_participants/" \
    "$1"
}
configure "$EXAMPLE" "$SERVER_LISTEN_KEY" > "$WORK/server.conf"
# SERVER_WORKERS=N: the server's event-loop threads (server.workers; unset: its default, one per
# CPU it may run on, so a server pinned to one CPU runs one).
if [ -n "${SERVER_WORKERS:-}" ]; then
  grep -q '^# workers = auto' "$WORK/server.conf" || { echo "bench_server: $EXAMPLE has no workers key" >&2; exit 2; }
  sed -i -E "s/^# workers = auto/workers = $SERVER_WORKERS/" "$WORK/server.conf"
fi
# roomload reads its signing key from a configuration in today's format (the keys are the same).
configure "$ROOT/docs/roomserver.conf.example" "$LISTEN_KEY" > "$WORK/load.conf"
case "${SRTP:-yes}" in
  yes) ;;
  no) if grep -q "^srtp *=" "$WORK/server.conf"; then
        sed -i -E "s/^srtp *=.*/srtp = no/" "$WORK/server.conf" "$WORK/load.conf"
      elif [ "$EXAMPLE" = "$ROOT/docs/roomserver.conf.example" ]; then
        echo "bench_server: no srtp key in the example configuration" >&2; exit 2
      fi ;;
  *) echo "bench_server: SRTP must be yes or no, not '$SRTP'" >&2; exit 2 ;;
esac

if [ "$LISTEN_KEY" = listen ]; then
  mkdir -p "$WORK/tls"
  "$ROOT/scripts/make-dev-certs" "$WORK/tls" > /dev/null
fi

# 2 descriptors per participant on each side.
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true

# SERVER_TASKSET / LOAD_TASKSET: CPU lists (taskset -c) for the server and the generator, so the
# generator's work stays off the server's core (scripts/bench server-sweep sets them).
SERVER_PIN=(); LOAD_PIN=()
[ -z "${SERVER_TASKSET:-}" ] || SERVER_PIN=(taskset -c "$SERVER_TASKSET")
[ -z "${LOAD_TASKSET:-}" ] || LOAD_PIN=(taskset -c "$LOAD_TASKSET")
"${SERVER_PIN[@]}" "$BIN/roomserver" --config "$WORK/server.conf" 2> "$WORK/server.log" &
SERVER_PID=$!
for _ in $(seq 100); do
  grep -q "running" "$WORK/server.log" 2>/dev/null && break
  kill -0 "$SERVER_PID" 2>/dev/null || { cat "$WORK/server.log" >&2; echo "bench_server: roomserver exited" >&2; exit 1; }
  sleep 0.05
done
grep -q "running" "$WORK/server.log" || { cat "$WORK/server.log" >&2; echo "bench_server: roomserver did not start" >&2; exit 1; }

# IDLE_CONNECTIONS=N: N connections that never say hello, from 40 loopback addresses (so the
# per-address cap is not what stops them), held open for the whole run and renewed as the
# server closes them at its hello deadline: what a scan or a flood leaves on a server while
# calls go on. Every JSON line then carries "idle_connections": N.
IDLE_PID=""
if [ "${IDLE_CONNECTIONS:-0}" -gt 0 ]; then
  python3 "$ROOT/scripts/bench.d/idle_connections.py" "$TCP_PORT" "$IDLE_CONNECTIONS" > "$WORK/idle.out" 2> "$WORK/idle.err" &
  IDLE_PID=$!
  for _ in $(seq 400); do grep -q "^open" "$WORK/idle.out" 2>/dev/null && break; sleep 0.05; done
  grep -q "^open" "$WORK/idle.out" || { cat "$WORK/idle.err" >&2; echo "bench_server: the idle connections did not open" >&2; exit 1; }
fi

TLS_OPTS=()
if [ "$LISTEN_KEY" = listen ]; then TLS_OPTS=(--tls-ca-file "$WORK/tls/ca.pem"); fi
status=0
timeout --signal=TERM --kill-after=5 $(( join_timeout + warmup + duration + 30 )) \
  "${LOAD_PIN[@]}" "$BIN/roomload" --server "127.0.0.1:$TCP_PORT" --config "$WORK/load.conf" --server-pid "$SERVER_PID" "${TLS_OPTS[@]}" \
  --rooms 50 --participants 10 --streamers 3 --warmup 5 --duration 20 --threads 2 "$@" > "$WORK/roomload.jsonl" 2> >(tee "$WORK/roomload.err" >&2) &
LOAD_PID=$!
# JOIN_PROBE=N (plain signalling only): N single joins, one after another, timed from connect
# to welcome while roomload's call runs (started after its warm-up): what an appliance joining
# a busy server waits, without roomload's own crowd of joins in the figure.
if [ "${JOIN_PROBE:-0}" -gt 0 ]; then
  [ "$LISTEN_KEY" = plain_listen ] || { echo "bench_server: JOIN_PROBE needs SERVER_SIGNALLING=plain" >&2; exit 2; }
  for _ in $(seq 600); do grep -q "joined in" "$WORK/roomload.err" 2>/dev/null && break; sleep 0.1; done
  sleep "$warmup"
  python3 "$ROOT/scripts/bench.d/join_probe.py" "$BIN/roomserver" "$WORK/server.conf" "$TCP_PORT" "$JOIN_PROBE" >> "$WORK/probe.jsonl" \
    || echo "bench_server: the join probe failed" >&2
fi
wait "$LOAD_PID" || status=$?
[ ! -f "$WORK/probe.jsonl" ] || cat "$WORK/probe.jsonl" >> "$WORK/roomload.jsonl"
[ -z "$IDLE_PID" ] || kill "$IDLE_PID" 2>/dev/null || true
python3 -c '
import json, sys
idle = int(sys.argv[1])
for line in open(sys.argv[2]):
    try:
        r = json.loads(line)
    except ValueError:
        print(line, end="")
        continue
    if idle:
        r["idle_connections"] = idle
    print(json.dumps(r))
' "${IDLE_CONNECTIONS:-0}" "$WORK/roomload.jsonl"

kill -TERM "$SERVER_PID" 2>/dev/null || true
wait "$SERVER_PID" 2>/dev/null || true
SERVER_PID=""
grep -E "^<[0-5]>" "$WORK/server.log" | grep -v -E "running|signal" | sed 's/^/roomserver: /' >&2 || true
exit "$status"
