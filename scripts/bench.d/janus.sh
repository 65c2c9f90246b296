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
  "A's mic (sim card) -> APM -> Opus 20 ms (the Janus default) -> SRTP (DTLS keys) -> Janus AudioBridge (jitter buffer, decode, mix, Opus 20 ms) -> SRTP -> B's jitter buffer -> decoder -> B's speaker (sim card)" \
  | tee -a "$WORK/janus.jsonl"
python3 "$ROOT/scripts/bench_analysis.py" backends "$WORK/janus.jsonl"

# 4. Appliance -> browser and back: headless Chromium (Debian's) joins the room with the page
#    we ship (scripts/janus-page, echo=1: it sends back what it hears), A talks the marks with
#    no acoustic echo in its room, and A's speaker plays them again after appliance -> Janus ->
#    browser -> Janus -> appliance: janus.browser_round_trip_ms. Skipped without chromium.
CHROMIUM="$(command -v /usr/lib/chromium/chromium || command -v chromium || true)"
if [ -n "$CHROMIUM" ]; then
  "$ROOT/scripts/janus-dev" "$WORK/janus" "$JANUS_PORT" > "$WORK/janus-dev.log" 2>&1 &
  JANUS_DEV=$!
  for _ in $(seq 150); do [ -s "$WORK/janus/ws_port" ] && break; sleep 0.1; done
  PAGE_PORT="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
  python3 -m http.server --bind 127.0.0.1 --directory "$ROOT/scripts/janus-page" "$PAGE_PORT" > "$WORK/page-server.log" 2>&1 &
  PAGE_SERVER=$!
  for _ in $(seq 50); do (exec 3<>/dev/tcp/127.0.0.1/$PAGE_PORT) 2>/dev/null && break; sleep 0.1; done
  # Its own process group, ended as a whole (Chromium starts a dozen helpers).
  setsid "$CHROMIUM" --headless=new --no-sandbox --disable-gpu --mute-audio --no-first-run --disable-extensions \
    --disable-background-networking --disable-component-update --disable-sync --disable-dev-shm-usage \
    --disable-background-timer-throttling --disable-renderer-backgrounding --autoplay-policy=no-user-gesture-required \
    --use-fake-ui-for-media-stream --use-fake-device-for-media-stream --disable-features=WebRtcHideLocalIpsWithMdns \
    --user-data-dir="$WORK/chromium" \
    "http://127.0.0.1:$PAGE_PORT/index.html?janus=ws://127.0.0.1:$JANUS_PORT&room=1234&display=echo-browser&echo=1&rejoin=0" \
    > "$WORK/chromium.log" 2>&1 &
  BROWSER=$!
  sleep 4
  room "$WORK/rt.conf" input="$WORK/marks.wav" input_end=loop status="$WORK/rt.status" output="$WORK/rt-speaker.wav" echo=off
  ROOMSIM_CONFIG="$WORK/rt.conf" roomd $(join_args rt) --role streamer --duration 16 > "$WORK/rt.jsonl" 2> "$WORK/rt.log"
  kill -TERM -- "-$BROWSER" 2>/dev/null || true; wait "$BROWSER" 2>/dev/null || true
  kill "$PAGE_SERVER" "$JANUS_DEV" 2>/dev/null || true; wait "$PAGE_SERVER" "$JANUS_DEV" 2>/dev/null || true
  python3 "$ROOT/scripts/bench_analysis.py" browser-round-trip "$WORK"
else
  echo "bench janus: chromium not installed: no janus.browser_round_trip_ms" >&2
fi
