# shellcheck shell=bash
# scripts/bench baresip: sourced by scripts/bench (sees BIN, WORK, ROOT, speech, room, roomd).
#
# Side by side with baresip (Debian's package), in one run, on the same simulated card:
#   roomd:   A (streamer) -> roomserver -> B (audience), the e2e bench's set-up;
#   baresip: A calls B peer to peer on loopback (direct SIP URI, no registrar), Opus, once per
#            ptime (20 and 10 ms), B muted (B only listens, as roomd's audience does).
# Both talk the e2e bench's mark train into A's simulated mic and record B's simulated speaker,
# with the board's room (echo path on, as in the e2e bench); mouth-to-ear is the e2e bench's
# measure (scripts/bench_analysis.py, mouth_to_ear). CPU (% of one core) and RSS of each
# process from /proc over the same 9 s of each call. Analysis: scripts/bench.d/baresip.py.
#
# baresip runs with the configuration Debian's baresip writes on first start (its template),
# changed only where the bench needs it: the roomsim card for audio (alert sounds to ALSA's
# null device), SIP and RTP on 127.0.0.1, opus.so loaded (the template loads only g711), the
# account's ptime and codec, and the status line off (terminal UI). No audio filter module is
# loaded by that template: no echo canceller, noise suppression, AGC or PLC module.
#
# Environment:
#   BARESIP_PTIMES  packet times in ms (default "20 10")
#   BARESIP_EXTRA   baresip config lines, ";"-separated, each replacing the template's line of
#                   that key (e.g. "jitter_buffer_delay 1-10"); reported in the `config` key
#   E2E_A_OPTS, E2E_B_OPTS  extra roomd options, as for the e2e bench
#   BARESIP_KEEP    a directory to copy the configurations, logs and recordings into
# Installs baresip-core from Debian when baresip is missing (needs root or sudo).

if ! command -v baresip > /dev/null 2>&1; then
  echo "bench baresip: installing baresip-core (Debian)" >&2
  BS_SUDO=""
  [ "$(id -u)" -eq 0 ] || BS_SUDO="sudo"
  $BS_SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $BS_SUDO apt-get install -y -qq --no-install-recommends baresip-core > /dev/null
fi

BW="$WORK/baresip"
mkdir -p "$BW"
BS_PIDS=()
BS_FDS=()
bs_cleanup() {
  local p fd
  for p in "${BS_PIDS[@]}"; do kill "$p" 2> /dev/null || true; done
  for p in "${BS_PIDS[@]}"; do wait "$p" 2> /dev/null || true; done
  for fd in "${BS_FDS[@]}"; do eval "exec $fd>&-" 2> /dev/null || true; done
  BS_PIDS=()
  BS_FDS=()
}
# Stop what this bench started, then whatever scripts/bench does at exit (its trap is put back
# at the end).
BS_PREV_EXIT="$(trap -p EXIT)"
BS_PREV_CMD="$(eval "set -- $BS_PREV_EXIT"; echo "${3:-}")"
trap 'bs_cleanup; eval "$BS_PREV_CMD"' EXIT

bs_ports() { free_ports "$1"; }
bs_wait_for() { # FILE TEXT SECONDS
  local _
  for _ in $(seq $(($3 * 10))); do grep -aq "$2" "$1" 2> /dev/null && return 0; sleep 0.1; done
  echo "bench baresip: no '$2' in $1 after $3 s:" >&2
  tail -n 20 "$1" >&2
  return 1
}
BS_CALL_S=14 # A talks (the marks: 12 s) for this long
BS_CPU_FROM=2 BS_CPU_S=9

python3 "$ROOT/scripts/bench_analysis.py" marks "$BW/marks.wav"

# --- roomd: A -> roomserver -> B, as the e2e bench runs it -----------------------------------
leg="$BW/roomd"
mkdir -p "$leg"
read -r BS_TCP BS_UDP < <(bs_ports tcp)
sed -e "s/127.0.0.1:7700/127.0.0.1:$BS_TCP/; s/127.0.0.1:7701/127.0.0.1:$BS_UDP/" \
  "$ROOT/docs/roomserver.conf.example" > "$leg/server.conf"
dev_tls "$leg"
"$BIN/roomserver" --config "$leg/server.conf" 2> "$leg/server.log" &
BS_SERVER=$!
BS_PIDS+=("$BS_SERVER")
for _ in $(seq 50); do (exec 3<> "/dev/tcp/127.0.0.1/$BS_TCP") 2> /dev/null && break; sleep 0.1; done
bs_mint() { "$BIN/roomserver" mint-token --config "$leg/server.conf" --key dev --room bench --user "$@"; }
room "$leg/a.conf" input="$BW/marks.wav" input_end=loop status="$leg/a.status" output=none
room "$leg/b.conf" input=none status="$leg/b.status" output="$leg/b-speaker.wav"
echo "bench baresip: roomd A -> roomserver -> B (load: $(cut -d' ' -f1-3 /proc/loadavg))" >&2
# roomd itself, not the roomd() function: $! must be the program's pid (CPU, RSS, cleanup)
# shellcheck disable=SC2086
ROOMSIM_CONFIG="$leg/b.conf" "$BIN/roomd" --board "$ROOT/board/sim" --json --stats-interval 1 --server "127.0.0.1:$BS_TCP" --tls-ca-file "$leg/tls/ca.pem" --token "$(bs_mint b)" --role audience \
  --duration $((BS_CALL_S)) ${E2E_B_OPTS:-} > "$leg/b.jsonl" 2> "$leg/b.log" &
BS_B=$!
BS_PIDS+=("$BS_B")
sleep 0.5
# shellcheck disable=SC2086
ROOMSIM_CONFIG="$leg/a.conf" "$BIN/roomd" --board "$ROOT/board/sim" --json --stats-interval 1 --server "127.0.0.1:$BS_TCP" --tls-ca-file "$leg/tls/ca.pem" --token "$(bs_mint a --publish)" --role streamer \
  --duration $((BS_CALL_S + 1)) ${E2E_A_OPTS:-} > "$leg/a.jsonl" 2> "$leg/a.log" &
BS_A=$!
BS_PIDS+=("$BS_A")
sleep "$BS_CPU_FROM"
python3 "$ROOT/scripts/bench.d/baresip.py" cpu "$leg/cpu.json" "$BS_CPU_S" A=$BS_A B=$BS_B roomserver=$BS_SERVER
wait $BS_B
wait $BS_A
kill $BS_SERVER
wait $BS_SERVER 2> /dev/null || true
BS_PIDS=()
printf '{"program": "roomd", "window_ms": 300, "ptime": 10, "config": "%s", "path": "%s"}\n' \
  "roomd defaults (board/sim; A: ${E2E_A_OPTS:-defaults}; B: ${E2E_B_OPTS:-defaults})" \
  "A's mic -> APM -> Opus 10 ms -> RTP -> roomserver -> B's jitter buffer -> decoder -> B's speaker" > "$leg/leg.json"

# --- baresip: A calls B, peer to peer ---------------------------------------------------------
# Debian's template, written by baresip itself on its first start in an empty directory.
baresip -f "$BW/template" -t 1 < /dev/null > "$BW/template.log" 2>&1
grep -q '^module[[:space:]]*g711.so' "$BW/template/config" || {
  echo "bench baresip: unexpected template (no g711.so line) in $BW/template/config" >&2
  exit 1
}
bs_configure() { # DIR SIP_PORT PTIME USER
  mkdir -p "$1"
  sed -e 's/^\(audio_player\|audio_source\)[[:space:]].*/\1\t\talsa,roomsim/' \
    -e 's/^audio_alert[[:space:]].*/audio_alert\t\talsa,null/' \
    -e 's/^module[[:space:]]*g711.so.*/module\t\t\topus.so\n&/' "$BW/template/config" > "$1/config"
  printf 'sip_listen\t\t127.0.0.1:%s\nnet_interface\t\t127.0.0.1\nstatmode_default\toff\n' "$2" >> "$1/config"
  # baresip takes the first line of a key: an extra line replaces the template's
  local line
  while IFS= read -r line; do
    [ -n "${line// /}" ] || continue
    sed -i "/^${line%%[[:space:]]*}[[:space:]]/d" "$1/config"
    echo "$line" >> "$1/config"
  done < <(tr ';' '\n' <<< "${BARESIP_EXTRA:-}")
  echo "<sip:$4@127.0.0.1:$2>;regint=0;answermode=auto;ptime=$3;audio_codecs=opus/48000/2" > "$1/accounts"
}
# baresip with the roomsim card: scripts/simcard-env execs it, so $! is baresip's pid (not
# through a function, whose $! would be a subshell's).
BS_RUN=("$ROOT/scripts/simcard-env" --build "$BIN" baresip)

# bs_call LEG PTIME SECONDS: one call, A -> B, with the rooms BS_ROOM_A / BS_ROOM_B (room keys);
# A hangs up after SECONDS; CPU and RSS sampled as for roomd. B's speaker: LEG/b-speaker.wav.
bs_call() {
  local leg="$1" ptime="$2" secs="$3" port_a port_b a b a_in b_in
  mkdir -p "$leg"
  read -r port_a port_b < <(bs_ports udp)
  bs_configure "$leg/a" "$port_a" "$ptime" a
  bs_configure "$leg/b" "$port_b" "$ptime" b
  room "$leg/a.conf" "${BS_ROOM_A[@]}" status="$leg/a.status" output=none
  room "$leg/b.conf" "${BS_ROOM_B[@]}" input=none status="$leg/b.status" output="$leg/b-speaker-2ch.wav"
  # Each instance reads its console (stdio.so) from a FIFO: B is muted and told to quit there.
  mkfifo "$leg/a.in" "$leg/b.in"
  exec {a_in}<> "$leg/a.in"
  exec {b_in}<> "$leg/b.in"
  BS_FDS+=("$a_in" "$b_in")
  ROOMSIM_CONFIG="$leg/b.conf" "${BS_RUN[@]}" -f "$leg/b" < "$leg/b.in" > "$leg/b.log" 2>&1 &
  b=$!
  BS_PIDS+=("$b")
  bs_wait_for "$leg/b.log" "baresip is ready" 10
  ROOMSIM_CONFIG="$leg/a.conf" "${BS_RUN[@]}" -f "$leg/a" -t "$secs" -e "/dial sip:b@127.0.0.1:$port_b" \
    < "$leg/a.in" > "$leg/a.log" 2>&1 &
  a=$!
  BS_PIDS+=("$a")
  bs_wait_for "$leg/b.log" "Call established" 10
  printf m >&"$b_in" # mute B's microphone
  sleep "$BS_CPU_FROM"
  python3 "$ROOT/scripts/bench.d/baresip.py" cpu "$leg/cpu.json" "$BS_CPU_S" A=$a B=$b
  wait $a
  printf q >&"$b_in"
  wait $b
  BS_PIDS=()
  bs_cleanup
  grep -aq "call muted" "$leg/b.log" || { echo "bench baresip: B was not muted (see $leg/b.log)" >&2; return 1; }
  # B plays what Opus decodes, 2 channels (opus/48000/2): the analysis reads channel 1.
  sox "$leg/b-speaker-2ch.wav" "$leg/b-speaker.wav" remix 1
  # window_ms: a mark is looked for up to 500 ms after it was spoken (the e2e bench: 300 ms).
  # Marks come every 600 ms, so a configuration slower than ~500 ms cannot be measured this way.
  printf '{"program": "baresip", "window_ms": 500, "ptime": %s, "config": "%s", "path": "%s"}\n' "$ptime" \
    "Debian baresip $(dpkg-query -W -f='${Version}' baresip-core 2> /dev/null || echo '?') template config${BARESIP_EXTRA:+ + $BARESIP_EXTRA}" \
    "A's mic -> alsa (period = ptime, 4 periods) -> Opus $ptime ms -> RTP -> B's jitter buffer -> decoder -> B's audio buffer -> alsa (period = ptime, 4 periods) -> B's speaker" \
    > "$leg/leg.json"
}

BS_LEGS=()
read -r -a BS_PTIMES <<< "${BARESIP_PTIMES:-20 10}"
for ptime in "${BS_PTIMES[@]}"; do
  echo "bench baresip: baresip A -> B, ptime $ptime ms (load: $(cut -d' ' -f1-3 /proc/loadavg))" >&2
  BS_ROOM_A=(input="$BW/marks.wav" input_end=loop)
  BS_ROOM_B=()
  bs_call "$BW/ptime$ptime" "$ptime" "$BS_CALL_S"
  BS_LEGS+=("ptime$ptime")
done

# PESQ-WB of baresip's path, when the quality bench ran first in this invocation
# (`scripts/bench quality baresip`): its talk file (the same voices), echo path off on both cards
# as there, ptime 20, scored by scripts/bench.d/quality.py.
if [ -f "$WORK/talk.wav" ] && [ -f "$WORK/segments.json" ]; then
  BS_TALK_S="$(python3 -c 'import sys, wave; w = wave.open(sys.argv[1]); print(int(w.getnframes() / w.getframerate() + 2.5))' "$WORK/talk.wav")"
  echo "bench baresip: baresip A -> B, ptime 20 ms, ${BS_TALK_S} s of the quality bench's voices" >&2
  BS_ROOM_A=(input="$WORK/talk.wav" input_end=silence echo=off)
  BS_ROOM_B=(echo=off)
  bs_call "$BW/pesq/run-0" 20 "$BS_TALK_S"
  cp "$WORK/talk.wav" "$WORK/segments.json" "$BW/pesq/"
  python3 "$ROOT/scripts/bench.d/quality.py" analyze "$BW/pesq" 0 > "$BW/pesq/quality.jsonl"
fi

trap - EXIT
eval "$BS_PREV_EXIT"
if [ -n "${BARESIP_KEEP:-}" ]; then mkdir -p "$BARESIP_KEEP" && cp -r "$BW"/. "$BARESIP_KEEP"/; fi
python3 "$ROOT/scripts/bench.d/baresip.py" analyze "$BW" roomd "${BS_LEGS[@]}"
[ ! -f "$BW/pesq/quality.jsonl" ] || python3 "$ROOT/scripts/bench.d/baresip.py" pesq "$BW/pesq/quality.jsonl"
