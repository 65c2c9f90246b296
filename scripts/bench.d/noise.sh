# shellcheck shell=bash
# scripts/bench noise: sourced by scripts/bench (sees BIN, WORK, ROOT, speech, room, roomd).
#
# Noise suppression as a listener hears it. A talker in a noisy room (three noises mixed into
# the mics' input: white at -45 dBFS, pink at 15 dB SNR, brown — a fan or air conditioning —
# at 10 dB SNR; 3 s of noise alone, then the talker), echo path off, the release roomd on the
# sim board recording what it sends (--record). Three chains per noise, run in parallel:
#
#   kalman   the shipped chain with roomd's canceller: noise suppressed inside its suppressor
#            (Sources/CCaptureChain/spectral_ns.h, no added delay)
#   webrtc   webrtc's AEC and webrtc's NS (7 ms of delay)
#   off      the chain with NS off (--disable ns): what suppression starts from
#
# scripts/bench.d/noise.py: PESQ-WB of the output against the clean talker (time-aligned,
# 16 kHz) as ns.pesq, and ns.snr_gain_db — output SNR minus input SNR, the speech level over the
# talk against the noise level over the last 2 s of noise alone (the AGC's gain cancels out).
# A noise whose runs had an xrun is run once more (run_rerunning_disturbed). About 40 s.
#
# Environment: NOISE_OPTS  extra roomd options for every run.

if ! python3 -c 'import numpy, pesq' 2>/dev/null; then
  echo "bench noise: installing pesq (and numpy) from PyPI" >&2
  python3 -m pip install --quiet --disable-pip-version-check numpy pesq >&2
fi

NS_TALK="Sorry to interrupt, but the second room still had an echo on Tuesday afternoon, \
and I think we should look at the speaker placement before we ship more units."
speech ns_talker_f "$NS_TALK" en-gb+f3
speech ns_talker_m "$NS_TALK" de
python3 "$ROOT/scripts/bench.d/noise.py" prepare "$WORK"
ns_quiet="--config none --state-dir none --control-socket none"
ns_run() { # ns_run NOISE: the three chains in that noise, in parallel, in the background
  local dir="$WORK/ns-$1" chain opts canceller
  for chain in kalman webrtc off; do
    opts="$ns_quiet --duration 16 ${NOISE_OPTS:-}"
    [ "$chain" = off ] && opts="$opts --disable ns"
    canceller=kalman; [ "$chain" = webrtc ] && canceller=webrtc
    # shellcheck disable=SC2086
    ROOMD_ECHO_CANCELLER=$canceller ROOMSIM_CONFIG="$dir/room.conf" roomd $opts --record "$dir/$chain.wav" \
      > "$dir/$chain.jsonl" 2> "$dir/$chain.log" &
  done
}
ns_xruns() { python3 "$ROOT/scripts/bench.d/noise.py" xruns "$WORK/ns-$1"; }
for noise in white pink brown; do
  room "$WORK/ns-$noise/room.conf" input="$WORK/ns-$noise/input.wav" input_end=silence echo=off noise_dbfs=off
done
# ns.pesq carries the xruns of the run it scores
run_rerunning_disturbed noise ns_run ns_xruns white pink brown
python3 "$ROOT/scripts/bench.d/noise.py" analyze "$WORK"
