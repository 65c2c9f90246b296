# shellcheck shell=bash
# scripts/bench aecdelay: sourced by scripts/bench (sees BIN, WORK, ROOT, speech, room, roomd).
#
# How fast roomd's canceller converges depending on where the echo path's bulk delay falls
# (docs/audio-engine.md, "Surprise"). Offline, no sound card: scripts/bench.d/aecdelay.cpp
# compiles Sources/CCaptureChain/kalman_aec.h with g++ and runs it on a pure delay (echo 6 dB below
# the far end, −70 dBFS noise) for delays 2 … 52 ms; the far end is an espeak sentence (15 s),
# played three times. aec.linear_erle_db per delay, over 5-10 s (`window: early`: what the
# double-talk bench sees) and over the last 10 s (`late`, converged). Then the far end's first
# second (aecdelay.py first: aec.offline_first_second_db per echo gain, docs/echo-canceller.md,
# "The first second"). Then the double-talk bench's
# rev120-loud room offline (scripts/bench.d/aecdelay.py: the room built like the sim card builds
# it, canceller alone) with its echo delay at 40-49 ms: aec.offline_doubletalk_pesq per delay —
# the figure that moved with the delay before the tapered gradient (docs/audio-engine.md,
# "Surprise"). AECDELAY_DT=0 skips that. About two minutes.
speech aecdelay_far "$FAR_TEXT" en-us
sox "$WORK/aecdelay_far.wav" -e floating-point -b 32 -t raw "$WORK/aecdelay_far1.f32" norm -3
cat "$WORK/aecdelay_far1.f32" "$WORK/aecdelay_far1.f32" "$WORK/aecdelay_far1.f32" > "$WORK/aecdelay_far.f32"
g++ -O2 -std=c++17 -I "$ROOT/Sources/CCaptureChain" -I "$ROOT/Sources/CRoomFFT/include" -o "$WORK/aecdelay" "$ROOT/scripts/bench.d/aecdelay.cpp"
far_s="$(python3 -c "import os; print(os.path.getsize('$WORK/aecdelay_far.f32') / 4 / 48000)")"
late_from="$(python3 -c "print(max(10.0, $far_s - 10))")"
for d in $(seq 2 2 52); do
  early="$("$WORK/aecdelay" "$WORK/aecdelay_far.f32" "$d" -6 5 10)"
  late="$("$WORK/aecdelay" "$WORK/aecdelay_far.f32" "$d" -6 "$late_from" "$far_s")"
  printf '{"bench": "aecdelay", "metric": "aec.linear_erle_db", "value": %s, "unit": "dB", "delay_ms": %s, "window": "early", "from_s": 5, "to_s": 10}\n' "$early" "$d"
  printf '{"bench": "aecdelay", "metric": "aec.linear_erle_db", "value": %s, "unit": "dB", "delay_ms": %s, "window": "late", "from_s": %s}\n' "$late" "$d" "$late_from"
done

# The far end's first second (docs/echo-canceller.md, "The first second"): the bench doubletalk's
# far voices, each starting at every 0.5 ms of a block, in the sim's room at -10, -7 and 0 dB.
. "$ROOT/scripts/bench.d/doubletalk.texts"
speech dt_far_en_m "$DT_FAR_EN" en-us
speech dt_far_en_f "$DT_FAR_EN" en-gb+f3
speech dt_far_de_m "$DT_FAR_DE" de
for v in dt_far_en_m dt_far_en_f dt_far_de_m; do sox "$WORK/$v.wav" -e floating-point -b 32 -t raw "$WORK/$v.f32"; done
python3 "$ROOT/scripts/bench.d/aecdelay.py" first "$WORK/aecdelay" "$WORK" "$WORK/aecdelay-first"

if [ "${AECDELAY_DT:-1}" != 0 ]; then
  # rev120-loud's near voice (its far voice is rendered above), as float32 raw.
  speech dt_near_de_m "$DT_NEAR_DE" de
  sox "$WORK/dt_near_de_m.wav" -e floating-point -b 32 -t raw "$WORK/dt_near_de_m.f32"
  python3 "$ROOT/scripts/bench.d/aecdelay.py" dt "$WORK/aecdelay" "$WORK" "$WORK/aecdelay-dt" \
    $(for d in $(seq 40 49); do printf 'rev120-loud@%s ' "$d"; done)
fi
