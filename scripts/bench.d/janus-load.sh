# shellcheck shell=bash
# scripts/bench janus-load: sourced by scripts/bench (sees BIN, WORK, ROOT, speech).
#
# A Janus AudioBridge's CPU per room and per participant on this machine (issue 30 item 4;
# docs/scaling.md, "Janus AudioBridge capacity"). Debian's janus 1.1.2 as scripts/janus-dev
# runs it, pinned to CPU 0; the load generator (scripts/bench.d/janus-load.py: plain-RTP
# AudioBridge participants, all in one Python process) pinned to CPU 1. For each point of the
# sweep it creates the rooms (sampling_rate 48000, allow_rtp_participants), joins the
# participants, lets them talk for JANUS_LOAD_WARMUP s, then measures Janus's CPU (% of one core,
# /proc/PID/stat) and RSS over JANUS_LOAD_DURATION s, with the generator's own CPU beside it;
# then destroys the rooms. First Janus idle for the same window. Then the fit over the sweep:
# janus.cpu_pct_per_room and janus.cpu_pct_per_participant.
#
#   JANUS_LOAD_POINTS   ROOMSxPARTICIPANTS[/STREAMERS] ... (default below; STREAMERS default: all
#                       talk; the others join muted and send nothing, as an audience appliance)
#   JANUS_LOAD_CPUS     the CPUs Janus may use (taskset -c; default 0). 0-1 lets it spread its
#                       rooms' mixer threads over both CPUs of this VM, sharing CPU 1 with the
#                       generator; the CPU figure is then of all its threads (100 = one core).
# Needs janus (scripts/setup installs it) and libopus (janus depends on it).
command -v janus > /dev/null 2>&1 || { echo "bench janus-load: janus is not installed (apt-get install janus)" >&2; exit 1; }
JANUS_LOAD_POINTS="${JANUS_LOAD_POINTS:-1x3 5x3 10x3 2x10/3 5x10/3 10x6 15x6}"
JANUS_LOAD_WARMUP="${JANUS_LOAD_WARMUP:-5}"
JANUS_LOAD_DURATION="${JANUS_LOAD_DURATION:-20}"
speech far "$FAR_TEXT" en-us
# Janus on CPU 0, or JANUS_LOAD_CPUS (scripts/janus-dev): sets JANUS_DEV, JL_PORT, JL_PID. The files of an earlier
# Janus go first, or they would be read before janus-dev clears them.
jl_start_janus() {
  rm -f "$WORK/janus-load/ws_port" "$WORK/janus-load/janus.pid"
  taskset -c "${JANUS_LOAD_CPUS:-0}" "$ROOT/scripts/janus-dev" "$WORK/janus-load" > "$WORK/janus-load-dev.log" 2>&1 &
  JANUS_DEV=$!
  for _ in $(seq 150); do [ -s "$WORK/janus-load/ws_port" ] && break; sleep 0.1; done
  [ -s "$WORK/janus-load/ws_port" ] || { echo "bench janus-load: Janus did not start: $(cat "$WORK/janus-load-dev.log")" >&2; exit 1; }
  JL_PORT="$(cat "$WORK/janus-load/ws_port")"
  JL_PID="$(cat "$WORK/janus-load/janus.pid")"
}
jl_start_janus
# The address of the interface Janus's media is on (scripts/janus-dev: the first non-loopback one).
JL_IP="$(ip -4 -o addr show up scope global | awk '{print $4; exit}' | cut -d/ -f1)"
sleep 2
: > "$WORK/janus-load.jsonl"
jl_tag() { sed "s/^{/{\"janus_cpus\":\"${JANUS_LOAD_CPUS:-0}\",/"; }
python3 "$ROOT/scripts/bench.d/janus-load.py" idle --janus-pid "$JL_PID" --duration "$JANUS_LOAD_DURATION" | jl_tag | tee -a "$WORK/janus-load.jsonl"
base=9000
for point in $JANUS_LOAD_POINTS; do
  rooms="${point%%x*}"; rest="${point#*x}"; per_room="${rest%%/*}"
  streamers="$per_room"; [ "$rest" != "$per_room" ] && streamers="${rest#*/}"
  taskset -c 1 python3 "$ROOT/scripts/bench.d/janus-load.py" run --ws "$JL_PORT" --janus-pid "$JL_PID" --ip "$JL_IP" \
    --rooms "$rooms" --participants "$per_room" --streamers "$streamers" --room-base "$base" \
    --warmup "$JANUS_LOAD_WARMUP" --duration "$JANUS_LOAD_DURATION" --speech "$WORK/far.wav" | jl_tag | tee -a "$WORK/janus-load.jsonl"
  base=$((base + 1000))
  sleep 2
done
kill "$JANUS_DEV"; wait "$JANUS_DEV" 2>/dev/null || true

# The check on the generator: the same room size with real appliances (roomd --backend janus on
# the simulated card, WebRTC: ICE, DTLS-SRTP, RTCP), every one talking the far-end sentence, in
# AudioBridge room 1234 of a fresh Janus on CPU 0 (the appliances on CPU 1), next to the
# plain-RTP point of the same size: what ICE and DTLS-SRTP add per participant at Janus, which
# the plain-RTP sweep leaves out. JANUS_LOAD_WEBRTC appliances (default 3; 0 skips it).
JANUS_LOAD_WEBRTC="${JANUS_LOAD_WEBRTC:-3}"
if [ "$JANUS_LOAD_WEBRTC" -gt 0 ]; then
  jl_start_janus
  APPLIANCES=()
  for i in $(seq "$JANUS_LOAD_WEBRTC"); do
    room "$WORK/jl$i.conf" input="$WORK/far.wav" input_end=loop status="$WORK/jl$i.status" output=none
    ROOMSIM_CONFIG="$WORK/jl$i.conf" taskset -c 1 "$BIN/roomd" --board "$ROOT/board/sim" --json --stats-interval 1 \
      --backend janus --janus-room 1234 --server "127.0.0.1:$JL_PORT" --plaintext-signalling --display-name "load-$i" \
      --role streamer --duration $((JANUS_LOAD_WARMUP + JANUS_LOAD_DURATION + 5)) > "$WORK/jl$i.jsonl" 2> "$WORK/jl$i.log" &
    APPLIANCES+=($!)
  done
  python3 "$ROOT/scripts/bench.d/janus-load.py" idle --janus-pid "$JL_PID" --webrtc "$JANUS_LOAD_WEBRTC" \
    --warmup $((JANUS_LOAD_WARMUP + 2)) --duration "$JANUS_LOAD_DURATION" | tee -a "$WORK/janus-load.jsonl"
  wait "${APPLIANCES[@]}" || true
  kill "$JANUS_DEV"; wait "$JANUS_DEV" 2>/dev/null || true
  # The appliances must have had their media up (else the figure is Janus without them).
  up="$(grep -c 'WebRTC media is now available' "$WORK/janus-load/janus.log" || true)"
  [ "$up" -ge "$JANUS_LOAD_WEBRTC" ] || echo "bench janus-load: only $up of $JANUS_LOAD_WEBRTC appliances had WebRTC media up (Janus's log: $WORK/janus-load/janus.log)" >&2
fi
python3 "$ROOT/scripts/bench.d/janus-load.py" fit "$WORK/janus-load.jsonl"
