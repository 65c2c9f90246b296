# shellcheck shell=bash
# scripts/bench server-floor: sourced by scripts/bench (sees BIN, WORK, ROOT).
#
# The floor under `server.cpu_pct_500p` on this host: the server bench's datagrams (50 rooms × 10,
# 3 streamers each sending every 10 ms: 15 000 packets in and 135 000 out a second, loopback)
# forwarded by scripts/bench.d/udpfloor.c — one recv and one sendmmsg per packet, no server
# around them — beside roomserver itself (one worker, plain, as `scripts/bench server-sweep`
# pins it: server on CPU 0, the load on CPU 1), alternated SERVER_FLOOR_PAIRS times (default 3)
# in one invocation. What the bare forwarder spends is what this host's kernel asks per
# datagram; no server code can go below it (docs/roomserver.md, "What a forwarded packet costs").
command -v cc > /dev/null 2>&1 || { echo "bench server-floor: needs a C compiler (cc)" >&2; exit 1; }
cc -O2 -Wall -o "$WORK/udpfloor" "$ROOT/scripts/bench.d/udpfloor.c" -lpthread
[ "$(nproc)" -ge 2 ] || { echo "bench server-floor: needs two CPUs (the forwarder and the load on their own)" >&2; exit 1; }
: > "$WORK/server-floor.jsonl"
for pair in $(seq "${SERVER_FLOOR_PAIRS:-3}"); do
  "$WORK/udpfloor" --rooms 50 --participants 10 --streamers 3 --interval-ms 10 --payload 72 \
    --warmup 5 --duration 20 --forward-cpu 0 --load-cpu 1 | sed "s/^{/{\"pair\":$pair,/" | tee -a "$WORK/server-floor.jsonl"
  sleep 2
  SERVER_TASKSET="0" LOAD_TASKSET="1" SERVER_WORKERS=1 SRTP=no SERVER_SIGNALLING=plain \
    "$ROOT/scripts/bench_server.sh" "$BIN" --rooms 50 | sed "s/^{/{\"pair\":$pair,/" | tee -a "$WORK/server-floor.jsonl"
  sleep 2
done
python3 "$ROOT/scripts/bench.d/server-floor.py" "$WORK/server-floor.jsonl"
