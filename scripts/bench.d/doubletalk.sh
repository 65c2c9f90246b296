# shellcheck shell=bash
# scripts/bench doubletalk: sourced by scripts/bench (sees BIN, WORK, ROOT, speech, room, roomd).
#
# Double talk as a listener hears it: does the room's talker survive while the far end speaks,
# and is the far end's echo gone when only the far end speaks? Several simulated rooms (speaker
# to mic delay, reverb tail, echo level, noise), each with its own far-end and near-end voice
# (espeak-ng: English and German, male and female). Per room, four real-time runs of the
# release roomd on the sim board, in parallel (each its own room in its own process):
#
#   dt      far end plays (--far-end), the near-end talker speaks from 6 s, during far-end speech;
#           --record: what roomd sends
#   alone   the same near-end talker, no far end (the reference: the chain on the talker alone)
#   echo    far end only (input = none), full chain: the residual echo the room would send
#   erle    far end only, NS and AGC off, the room's noise off: aec.erle_db, the echo the
#           canceller itself removes (with the noise on, a canceller that passes the noise cannot
#           beat the echo-to-noise ratio, 31 dB in far80-rev360, and one that gates it scores higher)
#   erle-room  the same with the room's noise on: aec.erle_room_db
#
# scripts/bench.d/doubletalk.py computes PESQ-WB (P.862.2, PyPI `pesq`) of the double-talk output
# against the clean near-end talker over the near-end talk, time-aligned, at 16 kHz; the level
# loss and correlation against the talker-alone output (the measure of aec.doubletalk_near_loss_db)
# and the share of talker frames chopped by >= 10 dB; ERLE after 5 s of far-end speech; and the
# residual echo level of the echo-only output (audible when a 100 ms window exceeds -60 dBFS).
# A room whose runs had an xrun (the machine was busy) is run once more. About 2 minutes.
#
# Environment:
#   DOUBLETALK_ROOMS  subset of the room names below (default all)
#   DOUBLETALK_ROOM_SPECS  other rooms instead of the list below, one spec per line in its format
#                     (rooms the canceller was not tuned on: docs/echo-canceller.md, "Double talk")
#   DOUBLETALK_OPTS   extra roomd options for every run (e.g. "--aec-suppression low")
#   ROOMD_ECHO_CANCELLER  the canceller measured: kalman (roomd's own, the default here) or
#                     webrtc (roomd's shipped default until the self-test can measure kalman)
#   DOUBLETALK_LABEL  a free-text label reported with the results (default: the options)
#   DOUBLETALK_KEEP   a directory to copy the recordings, room files and logs into

export ROOMD_ECHO_CANCELLER="${ROOMD_ECHO_CANCELLER:-kalman}"

# PESQ from PyPI (numpy comes with it); idempotent and quiet when present.
if ! python3 -c 'import numpy, pesq' 2>/dev/null; then
  echo "bench doubletalk: installing pesq (and numpy) from PyPI" >&2
  python3 -m pip install --quiet --disable-pip-version-check numpy pesq >&2
fi

. "$ROOT/scripts/bench.d/doubletalk.texts"
speech dt_far_en_m "$DT_FAR_EN" en-us
speech dt_far_en_f "$DT_FAR_EN" en-gb+f3
speech dt_far_de_m "$DT_FAR_DE" de
speech dt_near_en_f "$DT_NEAR_EN" en-gb+f3
speech dt_near_en_m "$DT_NEAR_EN" en-us+m3
speech dt_near_de_f "$DT_NEAR_DE" de+f2
speech dt_near_de_m "$DT_NEAR_DE" de

# name | far voice | near voice | near-end level (linear gain at the mics) | room keys
# Echo levels at mic 0 with far-end speech normalized to -3 dBFS peak: about -21 dBFS RMS at
# echo_gain_db -10, -10 dBFS at 0 dB; the talker at gain 1 about -20 dBFS, at 0.25 about -32.
DT_ROOMS=(
  "dry2|dt_far_en_m|dt_near_en_f|1|echo_delay_ms=2 ir=none echo_gain_db=-6"
  "sim|dt_far_de_m|dt_near_en_m|1|"
  "rev120-loud|dt_far_en_f|dt_near_de_m|0.25|echo_delay_ms=40 ir=generated ir_length_ms=120 ir_rt60_ms=120 ir_drr_db=3 echo_gain_db=0"
  "far80-rev360|dt_far_de_m|dt_near_en_f|1|echo_delay_ms=80 ir=generated ir_length_ms=360 ir_rt60_ms=360 ir_drr_db=0 ir_seed=7 noise_dbfs=-60"
  "far80-dry-loud|dt_far_en_m|dt_near_de_f|0.35|echo_delay_ms=80 ir=none echo_gain_db=-2"
)
if [ -n "${DOUBLETALK_ROOM_SPECS:-}" ]; then mapfile -t DT_ROOMS <<< "$DOUBLETALK_ROOM_SPECS"; fi
DT_SELECT=" ${DOUBLETALK_ROOMS:-} "
DT_LEAD_S=6
DT_RUN_S=21
dt_quiet="--config none --state-dir none --control-socket none"

dt_run_room() { # dt_run_room DIR FAR NEAR GAIN KEYS...
  local dir="$1" far="$2" near="$3" gain="$4"; shift 4
  # shellcheck disable=SC2086
  local opts="$dt_quiet --duration $DT_RUN_S ${DOUBLETALK_OPTS:-}"
  room "$dir/talk.conf" input="$dir/near-late.wav" input_end=silence input_mic_gains="$gain $gain $gain $gain" "$@"
  room "$dir/echo.conf" input=none "$@"
  local kv quiet=()
  for kv in "$@"; do [[ "$kv" == noise_dbfs=* ]] || quiet+=("$kv"); done
  room "$dir/quiet.conf" input=none noise_dbfs=off "${quiet[@]}"
  # shellcheck disable=SC2086
  local pids=()
  ROOMSIM_CONFIG="$dir/talk.conf" roomd $opts --far-end "$WORK/$far.wav" --record "$dir/dt.wav" > "$dir/dt.jsonl" 2> "$dir/dt.log" &
  pids+=($!)
  ROOMSIM_CONFIG="$dir/talk.conf" roomd $opts --record "$dir/alone.wav" > "$dir/alone.jsonl" 2> "$dir/alone.log" &
  pids+=($!)
  ROOMSIM_CONFIG="$dir/echo.conf" roomd $opts --far-end "$WORK/$far.wav" --record "$dir/echo.wav" > "$dir/echo.jsonl" 2> "$dir/echo.log" &
  pids+=($!)
  ROOMSIM_CONFIG="$dir/quiet.conf" roomd $opts --far-end "$WORK/$far.wav" --disable ns --disable agc > "$dir/erle.jsonl" 2> "$dir/erle.log" &
  pids+=($!)
  ROOMSIM_CONFIG="$dir/echo.conf" roomd $opts --far-end "$WORK/$far.wav" --disable ns --disable agc > "$dir/erle-room.jsonl" 2> "$dir/erle-room.log" &
  pids+=($!)
  local pid rc=0
  for pid in "${pids[@]}"; do wait "$pid" || rc=$?; done
  [ $rc = 0 ] || echo "bench doubletalk: a roomd run in $dir exited with $rc (see its .log)" >&2
}

dt_names=()
for spec in "${DT_ROOMS[@]}"; do
  IFS='|' read -r name far near gain keys <<< "$spec"
  [ "$DT_SELECT" = "  " ] || [[ "$DT_SELECT" == *" $name "* ]] || continue
  dir="$WORK/dt-$name"
  mkdir -p "$dir"
  # The near-end talker starts after DT_LEAD_S seconds of far-end speech (the canceller has
  # converged) and ends well before the far end does: every near-end word is double talk.
  sox -n -r 48000 -c 1 -b 16 "$dir/lead.wav" trim 0 "$DT_LEAD_S"
  sox "$dir/lead.wav" "$WORK/$near.wav" "$dir/near-late.wav"
  echo "$far $near $gain $keys" > "$dir/room.txt"
  dt_names+=("$name")
done
[ ${#dt_names[@]} -gt 0 ] || { echo "bench doubletalk: no room selected (DOUBLETALK_ROOMS='${DOUBLETALK_ROOMS:-}')" >&2; exit 2; }
dt_start() { # dt_start NAME: the room's five runs, to their end
  local far near gain keys
  read -r far near gain keys < "$WORK/dt-$1/room.txt"
  # shellcheck disable=SC2086
  dt_run_room "$WORK/dt-$1" "$far" "$near" "$gain" $keys
}
dt_xruns() { python3 "$ROOT/scripts/bench.d/doubletalk.py" xruns "$WORK/dt-$1"; }
run_rerunning_disturbed doubletalk dt_start dt_xruns "${dt_names[@]}"

DOUBLETALK_LABEL="${DOUBLETALK_LABEL:-canceller $ROOMD_ECHO_CANCELLER ${DOUBLETALK_OPTS:-}}" \
  python3 "$ROOT/scripts/bench.d/doubletalk.py" analyze "$WORK" "$DT_LEAD_S" "${dt_names[@]}"
if [ -n "${DOUBLETALK_KEEP:-}" ]; then
  mkdir -p "$DOUBLETALK_KEEP"
  cp -r "$WORK"/dt-* "$DOUBLETALK_KEEP"/
  cp "$WORK"/dt_*.wav "$DOUBLETALK_KEEP"/
fi
