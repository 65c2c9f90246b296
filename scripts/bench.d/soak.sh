# shellcheck shell=bash
# scripts/bench soak (or scripts/soak MINUTES): a long call on an impaired network, watched for
# growth. roomserver + roomproxy (SOAK_LOSS % loss and ±SOAK_JITTER_MS jitter on every datagram,
# both directions) + three roomd on their own simulated cards, all on stage, each talking from a
# looping speech file (its own voice, pauses between sentences) with the echo path on, so every
# appliance sends, receives two streams, cancels echo and conceals loss for the whole run.
# Every SOAK_SAMPLE_S seconds: each roomd's JSON status line (RSS, CPU, xruns, jitter-buffer
# delay, loss), and roomserver's and roomproxy's RSS and CPU from /proc. scripts/bench.d/soak.py
# fits a line through each series after the warm-up and reports the growth over the run.
# Not in CI (issue 10 asks for 30 minutes); `scripts/soak 2` is a quick look.
#
# Environment: SOAK_MINUTES (default 30), SOAK_LOSS (10), SOAK_JITTER_MS (20),
# SOAK_SAMPLE_S (10), SOAK_WARMUP_S (60), SOAK_KEEP (a directory to copy the samples to).

S_MIN="${SOAK_MINUTES:-30}"
S_SECONDS="$(python3 -c "print(int(round(float('$S_MIN') * 60)))")"
S_SAMPLE="${SOAK_SAMPLE_S:-10}"
[ "$S_SECONDS" -ge $((3 * S_SAMPLE)) ] || { echo "bench soak: $S_MIN minutes is shorter than three samples of $S_SAMPLE s" >&2; exit 2; }

speech soak_a "Good morning everyone, thanks for joining. Today we review the release schedule and the open hardware issues." en-us
speech soak_b "The second room still had an echo on Tuesday afternoon, so we should look at the speaker placement." en-gb+f3
speech soak_c "Guten Morgen zusammen. Heute besprechen wir den Zeitplan und die Ergebnisse des Feldversuchs." de
# Pauses between sentences: a talker that never stops would never let DTX, the voice gate or
# the jitter buffer's silence handling run.
for v in a b c; do sox "$WORK/soak_$v.wav" "$WORK/soak_$v-talk.wav" pad 0 "$(( ${#v} + 2 ))"; done

read -r S_TCP S_UDP < <(free_ports tcp)
sed -e "s/127.0.0.1:7700/127.0.0.1:$S_TCP/; s/127.0.0.1:7701/127.0.0.1:$S_UDP/; s/^log_level = .*/log_level = notice/" \
  "$ROOT/docs/roomserver.conf.example" > "$WORK/soak-server.conf"
S_PIDS=()
soak_cleanup() {
  local p
  for p in "${S_PIDS[@]}"; do kill "$p" 2> /dev/null || true; done
  for p in "${S_PIDS[@]}"; do wait "$p" 2> /dev/null || true; done
  S_PIDS=()
}
S_PREV_EXIT="$(trap -p EXIT)"
S_PREV_CMD="$(eval "set -- $S_PREV_EXIT"; echo "${3:-}")"
trap 'soak_cleanup; eval "$S_PREV_CMD"' EXIT

dev_tls "$WORK"
"$BIN/roomserver" --config "$WORK/soak-server.conf" 2> "$WORK/soak-server.log" &
S_SERVER=$!
S_PIDS+=("$S_SERVER")
for _ in $(seq 50); do (exec 3<>/dev/tcp/127.0.0.1/$S_TCP) 2>/dev/null && break; sleep 0.1; done
"$BIN/roomproxy" --listen 127.0.0.2 --server "127.0.0.1:$S_TCP" --media-port "$S_UDP" \
  --loss "${SOAK_LOSS:-10}" --jitter-ms "${SOAK_JITTER_MS:-20}" --seed 4242 --stats "$S_SAMPLE" \
  > "$WORK/soak-proxy.jsonl" 2> "$WORK/soak-proxy.log" &
S_PROXY=$!
S_PIDS+=("$S_PROXY")
for _ in $(seq 50); do (exec 3<>/dev/tcp/127.0.0.2/$S_TCP) 2>/dev/null && break; sleep 0.1; done

echo "bench soak: $S_MIN min, loss ${SOAK_LOSS:-10} %, jitter ±${SOAK_JITTER_MS:-20} ms, a sample every $S_SAMPLE s (load: $(cut -d' ' -f1-3 /proc/loadavg))" >&2
S_ROOMDS=()
for v in a b c; do
  room "$WORK/soak-$v.conf" input="$WORK/soak_$v-talk.wav" input_end=loop output=none
  # The token outlives the run (a reconnect after a blip presents it again).
  token="$("$BIN/roomserver" mint-token --config "$WORK/soak-server.conf" --key dev --room soak --user "soak-$v" --publish \
    --ttl $((S_SECONDS + 3600)))"
  ROOMSIM_CONFIG="$WORK/soak-$v.conf" "$BIN/roomd" --board "$ROOT/board/sim" --json --stats-interval "$S_SAMPLE" \
    --config none --state-dir none --control-socket none \
    --server "127.0.0.2:$S_TCP" --tls-ca-file "$WORK/tls/ca.pem" --token "$token" --role streamer --duration "$S_SECONDS" \
    > "$WORK/soak-$v.jsonl" 2> "$WORK/soak-$v.log" &
  S_ROOMDS+=($!)
  S_PIDS+=($!)
done

# The server and the proxy: RSS (kB) and CPU ticks from /proc, on the same grid.
hz="$(getconf CLK_TCK)"
: > "$WORK/soak-procs.jsonl"
t0="$(date +%s.%N)"
while kill -0 "${S_ROOMDS[0]}" 2> /dev/null; do
  sleep "$S_SAMPLE"
  now="$(date +%s.%N)"
  for pair in "server:$S_SERVER" "proxy:$S_PROXY"; do
    name="${pair%%:*}"; pid="${pair#*:}"
    [ -r "/proc/$pid/stat" ] || continue
    rss="$(awk '/^VmRSS:/{print $2}' "/proc/$pid/status")"
    ticks="$(awk '{print $14 + $15}' "/proc/$pid/stat")"
    echo "{\"proc\":\"$name\",\"t\":$(python3 -c "print(round($now - $t0, 2))"),\"rss_kb\":$rss,\"cpu_ticks\":$ticks,\"hz\":$hz}" >> "$WORK/soak-procs.jsonl"
  done
done
S_STATUS=0
for p in "${S_ROOMDS[@]}"; do wait "$p" || { echo "bench soak: a roomd exited with $?" >&2; S_STATUS=1; }; done
soak_cleanup
trap 'eval "$S_PREV_CMD"' EXIT
if [ -n "${SOAK_KEEP:-}" ]; then mkdir -p "$SOAK_KEEP" && cp "$WORK"/soak-*.jsonl "$WORK"/soak-*.log "$SOAK_KEEP"/; fi
python3 "$ROOT/scripts/bench.d/soak.py" "$WORK" "${SOAK_WARMUP_S:-60}" "$S_MIN" "${SOAK_LOSS:-10}" "${SOAK_JITTER_MS:-20}"
[ "$S_STATUS" = 0 ]
