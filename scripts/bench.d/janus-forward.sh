# shellcheck shell=bash
# scripts/bench janus-forward: sourced by scripts/bench (sees BIN, WORK, ROOT, speech).
#
# Janus VideoRoom (forwarding, as roomserver does) against Janus AudioBridge (mixing), both with
# WebRTC peers, at the same room sizes, back to back in one invocation (issue 30 item 4;
# docs/scaling.md, "Forwarding or mixing at Janus"). Janus (scripts/janus-dev with the VideoRoom
# plugin) pinned to CPU 0, or JANUS_FORWARD_CPUS; the generator (scripts/bench.d/janus-forward.py:
# aiortc PeerConnections in one asyncio process) on CPU 1. Per point and backend: Janus's CPU
# over JANUS_FORWARD_DURATION s after JANUS_FORWARD_WARMUP s, what the peers received and its
# level, the generator's CPU; then per point the ratio and the per-unit costs.
#
#   JANUS_FORWARD_POINTS  ROOMSxPARTICIPANTS/STREAMERS ... (default below). The generator is
#                         Python: 250-350 µs of CPU 1 per packet it receives, so it keeps up
#                         to some 3000 packets a second (janus_forward.frames_per_stream_s is 50
#                         when it does); the default stays under that.
# Needs janus (scripts/setup installs it) and aiortc, websockets and numpy from PyPI (installed
# here when missing, as the other benches install theirs).
command -v janus > /dev/null 2>&1 || { echo "bench janus-forward: janus is not installed (apt-get install janus)" >&2; exit 1; }
if ! python3 -c 'import aiortc, websockets, numpy' 2>/dev/null; then
  python3 -m pip install --quiet --disable-pip-version-check aiortc websockets numpy >&2
fi
JANUS_FORWARD_POINTS="${JANUS_FORWARD_POINTS:-1x6/3 2x6/3 3x6/3 1x10/3 2x10/3}"
JANUS_FORWARD_WARMUP="${JANUS_FORWARD_WARMUP:-5}"
JANUS_FORWARD_DURATION="${JANUS_FORWARD_DURATION:-20}"
speech far "$FAR_TEXT" en-us
rm -f "$WORK/janus-forward/ws_port" "$WORK/janus-forward/janus.pid"
JANUS_DEV_VIDEOROOM=1 taskset -c "${JANUS_FORWARD_CPUS:-0}" "$ROOT/scripts/janus-dev" "$WORK/janus-forward" > "$WORK/janus-forward-dev.log" 2>&1 &
JF_DEV=$!
for _ in $(seq 150); do [ -s "$WORK/janus-forward/ws_port" ] && break; sleep 0.1; done
[ -s "$WORK/janus-forward/ws_port" ] || { echo "bench janus-forward: Janus did not start: $(cat "$WORK/janus-forward-dev.log")" >&2; exit 1; }
sleep 2
: > "$WORK/janus-forward.jsonl"
base=30000
for point in $JANUS_FORWARD_POINTS; do
  rooms="${point%%x*}"; rest="${point#*x}"; per_room="${rest%%/*}"
  streamers="$per_room"; [ "$rest" != "$per_room" ] && streamers="${rest#*/}"
  for backend in videoroom audiobridge; do
    taskset -c 1 python3 "$ROOT/scripts/bench.d/janus-forward.py" run --backend "$backend" \
      --ws "$(cat "$WORK/janus-forward/ws_port")" --janus-pid "$(cat "$WORK/janus-forward/janus.pid")" \
      --rooms "$rooms" --participants "$per_room" --streamers "$streamers" --room-base "$base" \
      --warmup "$JANUS_FORWARD_WARMUP" --duration "$JANUS_FORWARD_DURATION" --speech "$WORK/far.wav" \
      | sed "s/^{/{\"janus_cpus\":\"${JANUS_FORWARD_CPUS:-0}\",/" | tee -a "$WORK/janus-forward.jsonl"
    base=$((base + 100))
    sleep 2
  done
done
kill "$JF_DEV"; wait "$JF_DEV" 2>/dev/null || true
python3 "$ROOT/scripts/bench.d/janus-forward.py" compare "$WORK/janus-forward.jsonl"
