# shellcheck shell=bash
# scripts/bench scene: sourced by scripts/bench (sees BIN, WORK, ROOT).
#
# The simulated card's scenes (docs/sim-card.md, "Scenes") checked against an independent
# image-source implementation, pyroomacoustics from PyPI: for 3 rooms (RT60 0.3-0.8 s) and 7
# sources 0.9-3 m from board/sim's 4-mic array, every source -> mic response of
# `roomsim-scene --irs` beside pyroomacoustics' for the same geometry and absorption: direct
# path arrival, RT60 (T20) and direct-to-reverberant ratio (scripts/bench.d/scene.py). ~30 s.

if ! python3 -c 'import numpy, scipy, pyroomacoustics' 2>/dev/null; then
  echo "bench scene: installing pyroomacoustics (and numpy, scipy) from PyPI" >&2
  python3 -m pip install --quiet --disable-pip-version-check numpy scipy pyroomacoustics >&2
fi
python3 "$ROOT/scripts/bench.d/scene.py" check "$WORK" "$BIN/roomsim-scene"
