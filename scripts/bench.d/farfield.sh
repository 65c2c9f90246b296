# shellcheck shell=bash
# scripts/bench farfield: sourced by scripts/bench (sees BIN, WORK, ROOT, speech, roomd).
#
# The whole room as the far end hears it: people 0.8-3 m from the sim board's array in
# simulated meeting rooms (sim card scenes: image-source responses per mic, RT60 0.3-0.8 s,
# ventilation/fan/diffuse noise at 12-25 dB SNR), one talker, two taking turns, one walking,
# one talking while the far end plays. Per room one real-time run of the release roomd on the
# sim board (--record: what it sends), all rooms in parallel; a room whose run had an xrun
# (the machine was busy) is run once more. scripts/bench.d/farfield.py puts roomd beside the
# raw mic 0 and offline anchors that know the talker's true position (delay-and-sum, MVDR,
# WPE + MVDR; nara_wpe from PyPI) and scores each with PESQ-WB and STOI against the dry talker.
# About 2 minutes.
#
# Environment:
#   FARFIELD_ROOMS  subset of the room names (default all: farfield.py's ROOMS)
#   FARFIELD_OPTS   extra roomd options for every run (e.g. "--disable ns")
#   FARFIELD_MIC_GAINS_DB  mics 1-3's sensitivity against mic 0's, dB (e.g. "1 -1 0.5": real MEMS mics
#                   differ by up to ±1 dB); the scene's micN_gain_db, so the anchors hear the same mics
#   FARFIELD_KNOWN_BOARD=1  the board has run in the room before: per room, first an 8 s run of
#                   roomd without the far end and with a state directory (where it keeps the mic
#                   corrections it measured), then the measured run with that state directory
#   FARFIELD_KEEP   a directory to copy the rooms (scenes, recordings, logs) and voices into
#                   (then: farfield.py windows KEEP ROOM, STOI over the talk's 0.75 s windows;
#                   farfield.py bands KEEP ROOM [hpf], STOI per third-octave band)

if ! python3 -c 'import numpy, scipy, pesq, pystoi, nara_wpe' 2>/dev/null; then
  echo "bench farfield: installing pesq, pystoi, nara_wpe (and numpy, scipy) from PyPI" >&2
  python3 -m pip install --quiet --disable-pip-version-check numpy scipy pesq pystoi nara_wpe >&2
fi

FF_EN="Good morning everyone, thanks for joining. Today we review the release schedule and the \
results of the field trial in the Berlin office."
FF_DE="Guten Morgen zusammen, danke, dass ihr dabei seid. Heute besprechen wir den Zeitplan und \
die Ergebnisse aus dem Berliner Büro."
FF_FAR="The trial went well overall; the rooms with the new ceiling microphones sounded much \
clearer, and people at the far end said they could follow every speaker without asking them to \
repeat anything, even in the large room on the third floor."
speech ff_en_m "$FF_EN" en-us
speech ff_en_f "$FF_EN" en-gb+f3
speech ff_de_m "$FF_DE" de
speech ff_de_f "$FF_DE" de+f3
speech ff_far_en "$FF_FAR" en-us+m3

ff_specs=()
while read -r name seconds far; do
  ff_specs+=("$name $seconds $far")
done < <(python3 "$ROOT/scripts/bench.d/farfield.py" prepare "$WORK" "$BIN" "$WORK")  # FARFIELD_ROOMS selects
[ ${#ff_specs[@]} -gt 0 ] || { echo "bench farfield: no room selected (FARFIELD_ROOMS='${FARFIELD_ROOMS:-}')" >&2; exit 2; }

ff_run() { # ff_run NAME SECONDS FAR: one real-time roomd run in the room, in the background
  local dir="$WORK/ff-$1" far_opt=() state=none
  [ "$3" = - ] || far_opt=(--far-end "$3")
  # a known board: a copy of what its earlier run kept (a run again after an xrun starts from
  # that too, not from the first try's)
  if [ -d "$dir/state.earlier" ]; then state="$dir/state"; rm -rf "$state"; cp -r "$dir/state.earlier" "$state"; fi
  # shellcheck disable=SC2086
  ROOMSIM_CONFIG="$dir/room.conf" roomd --config none --state-dir "$state" --control-socket none \
    --duration "$2" --stats-interval 0.05 --record "$dir/roomd.wav" "${far_opt[@]}" ${FARFIELD_OPTS:-} > "$dir/roomd.jsonl" 2> "$dir/roomd.log" &
}

if [ "${FARFIELD_KNOWN_BOARD:-}" = 1 ]; then
  # The board's earlier run in the room: the room's scene from its start for 8 s, no far end.
  for spec in "${ff_specs[@]}"; do
    name="${spec%% *}"
    rm -rf "$WORK/ff-$name/state.earlier"
    ROOMSIM_CONFIG="$WORK/ff-$name/room.conf" roomd --config none --state-dir "$WORK/ff-$name/state.earlier" --control-socket none \
      --duration 8 ${FARFIELD_OPTS:-} > /dev/null 2> "$WORK/ff-$name/earlier.log" &
  done
  wait
  for spec in "${ff_specs[@]}"; do
    name="${spec%% *}"
    kept="$(grep -o "mic corrections .* kept" "$WORK/ff-$name/earlier.log" | tail -1 || true)"
    echo "bench farfield: room $name, the earlier run: ${kept:-no mic corrections kept (too little quiet to measure)}" >&2
  done
fi

ff_xruns() { python3 "$ROOT/scripts/bench.d/farfield.py" xruns "$WORK/ff-$1"; }  # ff_xruns NAME ...
run_rerunning_disturbed farfield ff_run ff_xruns "${ff_specs[@]}"

ff_names=()
for spec in "${ff_specs[@]}"; do ff_names+=("${spec%% *}"); done
python3 "$ROOT/scripts/bench.d/farfield.py" analyze "$WORK" "$WORK" "${ff_names[@]}"
if [ -n "${FARFIELD_KEEP:-}" ]; then
  # the rooms with their mics' rendering (-L: mics.wav links into the card's cache) and the
  # voices, so that `farfield.py windows` and `analyze` can read them back
  mkdir -p "$FARFIELD_KEEP"
  cp -rL "$WORK"/ff-* "$FARFIELD_KEEP"/
  cp "$WORK"/ff_*.wav "$FARFIELD_KEEP"/
fi
