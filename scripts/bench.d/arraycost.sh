# shellcheck shell=bash
# scripts/bench arraycost: sourced by scripts/bench (sees BIN, WORK, ROOT).
#
# Per-stage cost of the capture chain with the array (docs/benchmarks.md, "Far-field capture"):
# scripts/bench.d/arraycost.cpp compiles the chain's C headers with g++ at the package's
# optimisation and times each stage offline, median µs per 10 ms block. Seconds.
g++ -O2 -std=c++17 -I "$ROOT/Sources/CWebRTCAPM" -o "$WORK/arraycost" "$ROOT/scripts/bench.d/arraycost.cpp"
"$WORK/arraycost"
