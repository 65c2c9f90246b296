# shellcheck shell=bash
# scripts/bench call: sourced by scripts/bench (sees BIN, WORK, ROOT, speech, room, roomd).
#
# A SIP call as its two ends hear it (issue 29): Debian's baresip calls roomd through kamailio
# (board/sip-test/kamailio.cfg, digest authentication), roomd auto-answers it (sip.auto_answer
# for the caller `far`), SRTP by SDES as installed (media_encryption = required, baresip
# mediaenc=srtp-mand). roomd's talker speaks first into its simulated mic (the board's room, echo
# path on, as the appliance lives), then baresip's talker from a file; baresip's decoder output
# (its sndfile dump) and roomd's speaker are recorded. PESQ-WB of each recording against the clean
# talker (scripts/bench.d/call.py), per codec. Beside it in the same run, the anchor: a baresip to
# baresip call through the same kamailio with the same codec and the same two talkers' files (no
# room, no canceller, baresip's own jitter buffer): what the codec and a plain SIP client give.
# Then, per codec, mouth to ear (sip.mouth_to_ear_ms, both directions): the same two calls with
# baresip on the simulated card, the e2e bench's mark train at each end's mic in turn, timed at
# the other end's speaker on the cards' one clock (sip.anchor_mouth_to_ear_ms for baresip to
# baresip), and what roomd costs in that call (call.cpu_pct_call_alone). The bridged call gives
# call.cpu_pct_room_and_call / call.rss_mb_room_and_call (A: in the room and in the call) beside
# call.cpu_pct_room_alone / call.rss_mb_room_alone (B, in the same room, the same window).
#
# Environment:
#   CALL_CODECS  codecs to measure (default "opus g722 pcmu")
#   CALL_BRIDGE  0: without the bridged call (default 1)
#   CALL_VOICES  espeak (default: espeak-ng's voices) or natural (alsa-utils' recorded voice)
#   CALL_ROOMD_OPTS  extra options for both roomd of the bridged call (e.g. "--disable agc")
#   CALL_M2E     0: without the mouth-to-ear calls (default 1)
#   CALL_M2E_PAIR  1: also roomd calling roomd, mouth to ear (sip.pair_mouth_to_ear_ms; default 0)
#   CALL_PESQ    0: without the PESQ calls (default 1; the mouth-to-ear and bridged calls stay)
#   CALL_BARESIP_EXTRA  baresip config lines for the mouth-to-ear calls' baresip, ";"-separated,
#                each replacing the line of its key (e.g. "jitter_buffer_delay 1-10")
#   CALL_KEEP    a directory to copy the recordings and logs into
# Installs kamailio and baresip-core (Debian) and pesq (PyPI) when missing.

for tool in kamailio baresip; do
  command -v "$tool" > /dev/null 2>&1 && continue
  echo "bench call: installing $tool (Debian)" >&2
  CL_SUDO=""
  [ "$(id -u)" -eq 0 ] || CL_SUDO="sudo"
  $CL_SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $CL_SUDO apt-get install -y -qq --no-install-recommends kamailio baresip-core > /dev/null
done
if ! python3 -c 'import numpy, scipy, pesq' 2>/dev/null; then
  echo "bench call: installing pesq (and numpy, scipy) from PyPI" >&2
  python3 -m pip install --quiet --disable-pip-version-check numpy scipy pesq >&2
fi

CW="$WORK/call"
mkdir -p "$CW"
CL_PIDS=()
cl_cleanup() {
  local p
  for p in "${CL_PIDS[@]}"; do kill "$p" 2> /dev/null || true; done
  for p in "${CL_PIDS[@]}"; do wait "$p" 2> /dev/null || true; done
  CL_PIDS=()
}
CL_PREV_EXIT="$(trap -p EXIT)"
CL_PREV_CMD="$(eval "set -- $CL_PREV_EXIT"; echo "${3:-}")"
trap 'cl_cleanup; eval "$CL_PREV_CMD"' EXIT

cl_wait_for() { # FILE TEXT SECONDS
  local _
  for _ in $(seq $(($3 * 10))); do grep -aq "$2" "$1" 2> /dev/null && return 0; sleep 0.1; done
  echo "bench call: no '$2' in $1 after $3 s:" >&2
  tail -n 20 "$1" >&2
  return 1
}

# The two talkers (the e2e bench's texts), 48 kHz mono; the call's timeline: roomd's talker
# from 3 s, the caller's after it (a turn each: PESQ scores one talker, not double talk).
if [ "${CALL_VOICES:-espeak}" = natural ]; then
  # A person's voice: alsa-utils' channel-test recordings (/usr/share/sounds/alsa, "Front left"…),
  # four phrases per talker, the same speaker. espeak-ng's voice is hard on G.722's ADPCM: the
  # codec alone scores PESQ-WB 2.99 on the espeak speech below and 4.38 on these recordings.
  A=/usr/share/sounds/alsa
  sox "$A/Front_Left.wav" "$A/Front_Center.wav" "$A/Front_Right.wav" "$A/Rear_Left.wav" -r 48000 -c 1 -b 16 "$WORK/cl-near.wav" norm -3
  sox "$A/Rear_Center.wav" "$A/Rear_Right.wav" "$A/Side_Left.wav" "$A/Side_Right.wav" -r 48000 -c 1 -b 16 "$WORK/cl-far.wav" norm -3
else
  speech cl-near "$NEAR_TEXT" en-us
  speech cl-far "$FAR_TEXT" en-gb
fi
python3 "$ROOT/scripts/bench.d/call.py" prepare "$CW" "$WORK/cl-near.wav" "$WORK/cl-far.wav"

# baresip's file source takes the codec's own format: Opus 48 kHz stereo, G.722 16 kHz mono,
# G.711 8 kHz mono.
cl_format() { case "$1" in opus) echo "48000 2" ;; g722) echo "16000 1" ;; *) echo "8000 1" ;; esac; }
cl_rtpmap() { case "$1" in opus) echo "opus/48000/2" ;; g722) echo "G722/16000/1" ;; pcmu) echo "PCMU/8000/1" ;; pcma) echo "PCMA/8000/1" ;; esac; }

# cl_baresip DIR USER PASSWORD SOURCE_WAV CODEC KAMAILIO_PORT [answermode]: a configured baresip
# in DIR (not started): the repo's template, its source the file, its decoder output dumped.
cl_baresip() {
  local dir="$1" port
  mkdir -p "$dir/dumps"
  read -r port _ < <(free_ports udp)
  sed -e "s|@SIP_PORT@|$port|; s|@OUT_DIR@|$dir|" \
    -e "s|^audio_source.*|audio_source\t\taufile,$4|" "$ROOT/board/sip-test/baresip/config" > "$dir/config"
  printf 'module\t\t\tsndfile.so\nsnd_path\t\t%s/dumps\n' "$dir" >> "$dir/config"
  echo "<sip:$2@127.0.0.1:$6;transport=udp>;auth_pass=$3;regint=60;mediaenc=srtp-mand;audio_codecs=$(cl_rtpmap "$5")${7:+;answermode=$7}" > "$dir/accounts"
  : > "$dir/contacts"
}

cl_kamailio() { # DIR -> prints the port; kamailio's pid in CL_KAM
  local port
  read -r port _ < <(free_ports udp)
  mkdir -p "$1"
  kamailio -f "$ROOT/board/sip-test/kamailio.cfg" -DD -E -n 1 -m 16 -M 8 -Y "$1" -l "udp:127.0.0.1:$port" > "$1/kamailio.log" 2>&1 &
  CL_KAM=$!
  CL_PIDS+=("$CL_KAM")
  for _ in $(seq 50); do grep -q "$(printf ':%04X ' "$port")" /proc/net/udp && break; sleep 0.1; done
  CL_KPORT=$port
}

# --- Mouth-to-ear through the call: both ends on the simulated card --------------------------
# The same calls again (baresip -> kamailio -> roomd, then baresip -> kamailio -> baresip), with
# baresip's sound on the roomsim card instead of files, so each end's mic and speaker are a
# simulated card's streams whose start times the card writes on CLOCK_MONOTONIC: the e2e bench's
# mark train spoken into one end's mic is timed at the other end's speaker on one clock
# (scripts/bench_analysis.py mouth_to_ear). Talkers in turn: the callee's marks from 4 s of its
# mic, the caller's from 18 s of its own. baresip's card runs at 48 kHz mono (ausrc_srate,
# auplay_srate, *_channels: baresip converts to the codec's rate and channels) and without the
# room's echo path (baresip has no echo canceller: its speaker back into its mic would send the
# marks round again); roomd's has the board's echo path, as the appliance lives.
CL_BARESIP_CARD=("$ROOT/scripts/simcard-env" --build "$BIN" baresip)
python3 "$ROOT/scripts/bench_analysis.py" marks "$CW/marks.wav"
python3 "$ROOT/scripts/bench.d/call.py" m2e-timeline "$CW" "$CW/marks.wav"
CL_M2E_SECONDS="$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["seconds"])' "$CW/m2e.json")"

# cl_card_baresip DIR USER PASSWORD CODEC KAMAILIO_PORT [answermode]: cl_baresip's instance with
# the roomsim card as its source and player (no file dump), its console on the FIFO DIR/in (for
# `audio_debug`: its jitter buffer and audio buffer, in its log), CALL_BARESIP_EXTRA's lines.
cl_card_baresip() {
  cl_baresip "$1" "$2" "$3" none "$4" "$5" ${6:+"$6"}
  sed -i -e 's|^audio_source.*|audio_source\t\talsa,roomsim|; s|^audio_player.*|audio_player\t\talsa,roomsim|' \
    -e '/^module[[:space:]]*sndfile.so/d; /^snd_path/d' "$1/config"
  printf 'module\t\t\talsa.so\nmodule\t\t\tstdio.so\nstatmode_default\toff\n' >> "$1/config"
  printf 'ausrc_srate\t\t48000\nauplay_srate\t\t48000\nausrc_channels\t\t1\nauplay_channels\t\t1\n' >> "$1/config"
  # baresip takes the first line of a key: an extra line replaces the template's
  local line
  while IFS= read -r line; do
    [ -n "${line// /}" ] || continue
    sed -i "/^${line%%[[:space:]]*}[[:space:]]/d" "$1/config"
    echo "$line" >> "$1/config"
  done < <(tr ';' '\n' <<< "${CALL_BARESIP_EXTRA:-}")
  rm -f "$1/in"
  mkfifo "$1/in"
}

# cl_debug_at SECONDS FIFO...: `/audio_debug` to each baresip console after SECONDS, five times
# 0.25 s apart (a reading of a buffer that a 20 ms reader empties is one point of its swing). The
# FIFOs are held open by this shell, so a write does not wait for a reader.
cl_debug_at() {
  local t="$1" fifo
  shift
  (sleep "$t"; for _ in 1 2 3 4 5; do
    for fifo in "$@"; do printf '/audio_debug\n' > "$fifo" || true; done
    sleep 0.25
  done) &
  CL_PIDS+=("$!")
}

# cl_m2e CODEC LEG: the two mouth-to-ear calls of one codec, through the running kamailio
# (CL_KPORT). Leaves LEG/m2e-roomd and LEG/m2e-anchor, each with callee.* and caller.* (status
# file, speaker recording) for `call.py m2e`.
cl_m2e() {
  local codec="$1" m="$2/m2e-roomd" a="$2/m2e-anchor" pid far callee far_in callee_in
  mkdir -p "$m" "$a"
  echo "bench call: $codec, mouth to ear, baresip (card) -> kamailio -> roomd (load: $(cut -d' ' -f1-3 /proc/loadavg))" >&2
  room "$m/callee.conf" input="$CW/m2e-callee.wav" input_end=silence output="$m/callee-speaker.wav" status="$m/callee.status"
  room "$m/caller.conf" input="$CW/m2e-caller.wav" input_end=silence output="$m/caller-speaker.wav" status="$m/caller.status" echo=off
  ROOMSIM_CONFIG="$m/callee.conf" "$BIN/roomd" --board "$ROOT/board/sim" --config "$2/roomd.conf" --json --stats-interval 1 \
    --duration $((CL_M2E_SECONDS + 5)) --control-socket "$m/roomd.sock" --state-dir none > "$m/roomd.jsonl" 2> "$m/roomd.log" &
  pid=$!
  CL_PIDS+=("$pid")
  cl_wait_for "$m/roomd.log" "sip: registered" 10
  cl_card_baresip "$m/far" far far-secret "$codec" "$CL_KPORT"
  exec {far_in}<> "$m/far/in"
  ROOMSIM_CONFIG="$m/caller.conf" "${CL_BARESIP_CARD[@]}" -f "$m/far" -t $((CL_M2E_SECONDS + 2)) -e "/dial sip:room@127.0.0.1:$CL_KPORT" \
    < "$m/far/in" > "$m/far/baresip.log" 2>&1 &
  far=$!
  CL_PIDS+=("$far")
  cl_wait_for "$m/roomd.log" "call: up" 10
  # Each listener's buffers in the middle of the turn it hears (the callee's marks from 4 s of
  # its mic, about 2.5 s of the call for roomd; the caller's from 18 s of the call): roomd's
  # jitter buffer (`roomctl stats`), baresip's (`audio_debug`). CPU and RSS of both ends over both
  # turns.
  cl_debug_at 10 "$m/far/in"
  (sleep 24; "$BIN/roomctl" --socket "$m/roomd.sock" --json stats > "$m/stats.json" 2> /dev/null || true) &
  CL_PIDS+=("$!")
  sleep 2
  python3 "$ROOT/scripts/bench.d/baresip.py" cpu "$m/cpu.json" $((CL_M2E_SECONDS - 6)) roomd=$pid baresip=$far
  wait $far || true
  wait $pid || true
  exec {far_in}>&-

  echo "bench call: $codec, mouth to ear, baresip (card) -> kamailio -> baresip (card), the anchor" >&2
  room "$a/callee.conf" input="$CW/m2e-callee.wav" input_end=silence output="$a/callee-speaker.wav" status="$a/callee.status" echo=off
  room "$a/caller.conf" input="$CW/m2e-caller.wav" input_end=silence output="$a/caller-speaker.wav" status="$a/caller.status" echo=off
  cl_card_baresip "$a/b" farsec farsec-secret "$codec" "$CL_KPORT" auto
  exec {callee_in}<> "$a/b/in"
  ROOMSIM_CONFIG="$a/callee.conf" "${CL_BARESIP_CARD[@]}" -f "$a/b" -t $((CL_M2E_SECONDS + 4)) < "$a/b/in" > "$a/b/baresip.log" 2>&1 &
  callee=$!
  CL_PIDS+=("$callee")
  cl_wait_for "$a/b/baresip.log" "200 OK" 10
  cl_card_baresip "$a/a" far far-secret "$codec" "$CL_KPORT"
  exec {far_in}<> "$a/a/in"
  ROOMSIM_CONFIG="$a/caller.conf" "${CL_BARESIP_CARD[@]}" -f "$a/a" -t $((CL_M2E_SECONDS + 2)) -e "/dial sip:farsec@127.0.0.1:$CL_KPORT" \
    < "$a/a/in" > "$a/a/baresip.log" 2>&1 &
  far=$!
  CL_PIDS+=("$far")
  cl_wait_for "$a/b/baresip.log" "Call established" 10
  cl_debug_at 10 "$a/a/in"
  cl_debug_at 24 "$a/b/in"
  wait $far || true
  kill $callee 2> /dev/null || true
  wait $callee 2> /dev/null || true
  exec {far_in}>&- {callee_in}>&-
  [ "${CALL_M2E_PAIR:-0}" != 1 ] || cl_m2e_pair "$codec" "$2"
}

# cl_m2e_pair CODEC LEG: roomd calls roomd (CALL_M2E_PAIR=1): a second roomd with the account
# `far` dials the first (`roomctl call`), which answers by itself; both on the board's card with
# its echo path. Neither end is baresip: what roomd's own sending and receiving give, per codec.
cl_m2e_pair() {
  local codec="$1" d="$2/m2e-pair" callee caller
  mkdir -p "$d"
  echo "bench call: $codec, mouth to ear, roomd -> kamailio -> roomd" >&2
  printf 'far-secret\n' > "$d/far.password"
  chmod 600 "$d/far.password"
  printf '[sip]\nregistrar = 127.0.0.1:%s\nuser = far\npassword_file = %s\ntransport = udp\ncodecs = %s\n' \
    "$CL_KPORT" "$d/far.password" "$codec" > "$d/far-roomd.conf"
  room "$d/callee.conf" input="$CW/m2e-callee.wav" input_end=silence output="$d/callee-speaker.wav" status="$d/callee.status"
  room "$d/caller.conf" input="$CW/m2e-caller.wav" input_end=silence output="$d/caller-speaker.wav" status="$d/caller.status"
  ROOMSIM_CONFIG="$d/callee.conf" "$BIN/roomd" --board "$ROOT/board/sim" --config "$2/roomd.conf" --json --stats-interval 1 \
    --duration $((CL_M2E_SECONDS + 5)) --control-socket "$d/callee.sock" --state-dir none > "$d/callee.jsonl" 2> "$d/callee.log" &
  callee=$!
  CL_PIDS+=("$callee")
  cl_wait_for "$d/callee.log" "sip: registered" 10
  ROOMSIM_CONFIG="$d/caller.conf" "$BIN/roomd" --board "$ROOT/board/sim" --config "$d/far-roomd.conf" --json --stats-interval 1 \
    --duration $((CL_M2E_SECONDS + 3)) --control-socket "$d/caller.sock" --state-dir none > "$d/caller.jsonl" 2> "$d/caller.log" &
  caller=$!
  CL_PIDS+=("$caller")
  cl_wait_for "$d/caller.log" "sip: registered" 10
  "$BIN/roomctl" --socket "$d/caller.sock" call "sip:room@127.0.0.1:$CL_KPORT" > /dev/null
  cl_wait_for "$d/callee.log" "call: up" 10
  # Each listener's jitter buffer in the middle of the turn it hears.
  (sleep 10; "$BIN/roomctl" --socket "$d/caller.sock" --json stats > "$d/caller-stats.json" 2> /dev/null || true) &
  CL_PIDS+=("$!")
  (sleep 24; "$BIN/roomctl" --socket "$d/callee.sock" --json stats > "$d/callee-stats.json" 2> /dev/null || true) &
  CL_PIDS+=("$!")
  wait $caller || true
  wait $callee || true
}

read -r -a CL_CODECS <<< "${CALL_CODECS:-opus g722 pcmu}"
CL_SECONDS="$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["seconds"])' "$CW/timeline.json")"
for codec in "${CL_CODECS[@]}"; do
  leg="$CW/$codec"
  mkdir -p "$leg"
  read -r rate channels <<< "$(cl_format "$codec")"
  sox "$CW/far-timeline.wav" -r "$rate" -c "$channels" "$leg/far-source.wav"
  sox "$CW/near-timeline.wav" -r "$rate" -c "$channels" "$leg/near-source.wav"
  cl_kamailio "$leg/kamailio"

  printf 'room-secret\n' > "$leg/sip.password"
  chmod 600 "$leg/sip.password"
  printf '[sip]\nregistrar = 127.0.0.1:%s\nuser = room\npassword_file = %s\ntransport = udp\ncodecs = %s\nauto_answer = yes\nauto_answer_from = far\n' \
    "$CL_KPORT" "$leg/sip.password" "$codec" > "$leg/roomd.conf"
  # roomd answers baresip (CALL_PESQ=0: only the mouth-to-ear calls below).
  if [ "${CALL_PESQ:-1}" = 1 ]; then
    echo "bench call: $codec, baresip -> kamailio -> roomd (load: $(cut -d' ' -f1-3 /proc/loadavg))" >&2
    room "$leg/room.conf" input="$CW/near-timeline.wav" input_end=silence output="$leg/roomd-speaker.wav" status="$leg/roomd.status"
    ROOMSIM_CONFIG="$leg/room.conf" "$BIN/roomd" --board "$ROOT/board/sim" --config "$leg/roomd.conf" --json --stats-interval 1 \
      --duration $((CL_SECONDS + 6)) --control-socket none --state-dir none > "$leg/roomd.jsonl" 2> "$leg/roomd.log" &
    CL_ROOMD=$!
    CL_PIDS+=("$CL_ROOMD")
    cl_wait_for "$leg/roomd.log" "sip: registered" 10
    cl_baresip "$leg/far" far far-secret "$leg/far-source.wav" "$codec" "$CL_KPORT"
    baresip -f "$leg/far" -t $((CL_SECONDS + 2)) -e "/dial sip:room@127.0.0.1:$CL_KPORT" < /dev/null > "$leg/far/baresip.log" 2>&1 &
    CL_FAR=$!
    CL_PIDS+=("$CL_FAR")
    wait $CL_FAR || true
    wait $CL_ROOMD || true

    # The anchor: baresip calls baresip through the same registrar, the same files.
    echo "bench call: $codec, baresip -> kamailio -> baresip (the anchor)" >&2
    cl_baresip "$leg/anchor-b" farsec farsec-secret "$leg/near-source.wav" "$codec" "$CL_KPORT" auto
    baresip -f "$leg/anchor-b" -t $((CL_SECONDS + 4)) < /dev/null > "$leg/anchor-b/baresip.log" 2>&1 &
    CL_B=$!
    CL_PIDS+=("$CL_B")
    cl_wait_for "$leg/anchor-b/baresip.log" "200 OK" 10
    cl_baresip "$leg/anchor-a" far far-secret "$leg/far-source.wav" "$codec" "$CL_KPORT"
    baresip -f "$leg/anchor-a" -t $((CL_SECONDS + 2)) -e "/dial sip:farsec@127.0.0.1:$CL_KPORT" < /dev/null > "$leg/anchor-a/baresip.log" 2>&1 &
    CL_A=$!
    CL_PIDS+=("$CL_A")
    wait $CL_A || true
    kill $CL_B 2> /dev/null || true
    wait $CL_B 2> /dev/null || true
  fi
  [ "${CALL_M2E:-1}" != 1 ] || cl_m2e "$codec" "$leg"
  kill "$CL_KAM" 2> /dev/null || true
  wait "$CL_KAM" 2> /dev/null || true
  CL_PIDS=()
done

# --- A caller bridged into a two-appliance room (issue 29's second acceptance line) -------------
# A (roomd, with the SIP account) and B (roomd) in one roomserver room, both on stage; baresip
# calls A, A answers by itself and is bridged (`roomctl bridge`). Talkers in turn, on one time
# base per recording: A from 3 s, then B, then the caller. What each heard of the others (PESQ-WB)
# and of itself (the level of its own turn in its own recording, and the envelope correlation):
# nobody should hear themselves.
if [ "${CALL_BRIDGE:-1}" = 1 ]; then
  bw="$CW/bridge"
  mkdir -p "$bw"
  speech cl-b "Could we move the review to Thursday? Half of the team is travelling on Wednesday and the rest has the board meeting." en-us+f3
  python3 "$ROOT/scripts/bench.d/call.py" bridge-timeline "$bw" "$WORK/cl-near.wav" "$WORK/cl-b.wav" "$WORK/cl-far.wav"
  CL_SECONDS="$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["seconds"])' "$bw/timeline.json")"
  sox "$bw/far-timeline.wav" -r 48000 -c 2 "$bw/far-source.wav"
  cl_kamailio "$bw/kamailio"
  read -r CL_TCP CL_UDP < <(free_ports tcp)
  sed -e "s/127.0.0.1:7700/127.0.0.1:$CL_TCP/; s/127.0.0.1:7701/127.0.0.1:$CL_UDP/" "$ROOT/docs/roomserver.conf.example" > "$bw/server.conf"
  dev_tls "$bw"
  "$BIN/roomserver" --config "$bw/server.conf" 2> "$bw/server.log" &
  CL_PIDS+=("$!")
  for _ in $(seq 50); do (exec 3<> "/dev/tcp/127.0.0.1/$CL_TCP") 2> /dev/null && break; sleep 0.1; done
  cl_token() { "$BIN/roomserver" mint-token --config "$bw/server.conf" --key dev --room bridge --user "$1" --publish; }
  printf 'room-secret\n' > "$bw/sip.password"
  chmod 600 "$bw/sip.password"
  printf '[sip]\nregistrar = 127.0.0.1:%s\nuser = room\npassword_file = %s\ntransport = udp\ncodecs = opus\nauto_answer = yes\nauto_answer_from = far\n' \
    "$CL_KPORT" "$bw/sip.password" > "$bw/a-roomd.conf"
  room "$bw/a.conf" input="$bw/a-timeline.wav" input_end=silence output="$bw/a-speaker.wav"
  room "$bw/b.conf" input="$bw/b-timeline.wav" input_end=silence output="$bw/b-speaker.wav"
  echo "bench call: bridge, baresip -> kamailio -> A, bridged into a room with B (load: $(cut -d' ' -f1-3 /proc/loadavg))" >&2
  ROOMSIM_CONFIG="$bw/b.conf" "$BIN/roomd" --board "$ROOT/board/sim" --json --stats-interval 1 --server "127.0.0.1:$CL_TCP" \
    --tls-ca-file "$bw/tls/ca.pem" --token "$(cl_token b)" --role streamer --duration $((CL_SECONDS + 4)) \
    --control-socket none --state-dir none ${CALL_ROOMD_OPTS:-} > "$bw/b.jsonl" 2> "$bw/b.log" &
  CL_B=$!
  CL_PIDS+=("$CL_B")
  ROOMSIM_CONFIG="$bw/a.conf" "$BIN/roomd" --board "$ROOT/board/sim" --config "$bw/a-roomd.conf" --json --stats-interval 1 \
    --server "127.0.0.1:$CL_TCP" --tls-ca-file "$bw/tls/ca.pem" --token "$(cl_token a)" --role streamer \
    --duration $((CL_SECONDS + 4)) --control-socket "$bw/a.sock" --state-dir none ${CALL_ROOMD_OPTS:-} > "$bw/a.jsonl" 2> "$bw/a.log" &
  CL_A=$!
  CL_PIDS+=("$CL_A")
  cl_wait_for "$bw/a.log" "sip: registered" 10
  cl_baresip "$bw/far" far far-secret "$bw/far-source.wav" opus "$CL_KPORT"
  baresip -f "$bw/far" -t $((CL_SECONDS + 1)) -e "/dial sip:room@127.0.0.1:$CL_KPORT" < /dev/null > "$bw/far/baresip.log" 2>&1 &
  CL_FAR=$!
  CL_PIDS+=("$CL_FAR")
  cl_wait_for "$bw/a.log" "call: up" 10
  "$BIN/roomctl" --socket "$bw/a.sock" bridge
  # What A costs in the room and in the call at once, beside B in the same room without a call,
  # over the same window (all three turns; ends before the caller hangs up).
  python3 "$ROOT/scripts/bench.d/baresip.py" cpu "$bw/cpu.json" $((CL_SECONDS - 8)) A=$CL_A B=$CL_B
  wait $CL_FAR || true
  wait $CL_A || true
  wait $CL_B || true
  cl_cleanup
fi

trap - EXIT
eval "$CL_PREV_EXIT"
if [ -n "${CALL_KEEP:-}" ]; then mkdir -p "$CALL_KEEP" && cp -r "$CW"/. "$CALL_KEEP"/; fi
[ "${CALL_PESQ:-1}" != 1 ] || python3 "$ROOT/scripts/bench.d/call.py" analyze "$CW" "${CL_CODECS[@]}"
[ "${CALL_M2E:-1}" != 1 ] || python3 "$ROOT/scripts/bench.d/call.py" m2e "$CW" "${CL_CODECS[@]}"
[ "${CALL_BRIDGE:-1}" != 1 ] || python3 "$ROOT/scripts/bench.d/call.py" bridge "$CW/bridge"
[ "${CALL_BRIDGE:-1}" != 1 ] || python3 "$ROOT/scripts/bench.d/call.py" cost "$CW/bridge"
