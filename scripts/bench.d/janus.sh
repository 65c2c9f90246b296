# shellcheck shell=bash
# scripts/bench janus: sourced by scripts/bench (sees BIN, WORK, ROOT, room, roomd, pair_call,
# roomserver_call).
#
# The appliance on the WebRTC path next to the roomserver path, in one run, the same call on
# the same simulated card: A talks the e2e bench's mark train, B listens, B2 joins late.
#   1. roomserver as installed (TLS signalling, SRTP media): the e2e.* figures;
#   2. a Janus AudioBridge (Debian's janus 1.1.2, scripts/janus-dev; room.backend = janus):
#      WebSocket signalling on loopback, ICE + DTLS-SRTP media on this machine's interface,
#      Janus decoding, mixing and re-encoding (20 ms frames) in between: the janus.* figures;
#   3. janus.*.vs_roomserver: the difference, per metric.
# janus.mouth_to_ear_ms is appliance -> Janus -> appliance (docs/janus.md says what a browser
# adds). Needs janus (scripts/setup installs it with the test packages).
command -v janus > /dev/null 2>&1 || { echo "bench janus: janus is not installed (apt-get install janus)" >&2; exit 1; }
python3 "$ROOT/scripts/bench_analysis.py" marks "$WORK/marks.wav"
roomserver_call yes
BENCH_SRTP=yes BENCH_SIGNALLING=tls python3 "$ROOT/scripts/bench_analysis.py" e2e "$WORK" | tee -a "$WORK/janus.jsonl"

"$ROOT/scripts/janus-dev" "$WORK/janus" > "$WORK/janus-dev.log" 2>&1 &
JANUS_DEV=$!
for _ in $(seq 150); do [ -s "$WORK/janus/ws_port" ] && break; sleep 0.1; done
[ -s "$WORK/janus/ws_port" ] || { echo "bench janus: Janus did not start: $(cat "$WORK/janus-dev.log")" >&2; exit 1; }
JANUS_PORT="$(cat "$WORK/janus/ws_port")"
join_args() { echo "--backend janus --janus-room 1234 --server 127.0.0.1:$JANUS_PORT --plaintext-signalling --display-name bench-$1"; }
pair_call
kill "$JANUS_DEV"; wait "$JANUS_DEV" 2>/dev/null || true
python3 "$ROOT/scripts/bench_analysis.py" e2e "$WORK" janus \
  "A's mic (sim card) -> APM -> Opus 10 ms -> SRTP (DTLS keys) -> Janus AudioBridge (jitter buffer, decode, mix, Opus 20 ms) -> SRTP -> B's jitter buffer -> decoder -> B's speaker (sim card)" \
  | tee -a "$WORK/janus.jsonl"
python3 "$ROOT/scripts/bench_analysis.py" backends "$WORK/janus.jsonl"
