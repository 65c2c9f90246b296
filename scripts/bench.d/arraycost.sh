# shellcheck shell=bash
# scripts/bench arraycost: sourced by scripts/bench (sees BIN, WORK, ROOT).
#
# Per-stage cost of the capture chain with the array (docs/benchmarks.md, "Far-field capture"):
# scripts/bench.d/arraycost.cpp compiles the chain's C headers with the toolchain's clang++ -O3 (the
# AVX2 clones as in roomd) and times each stage offline, median µs per 10 ms block. Seconds.
clang++ -O3 -std=c++17 -I "$ROOT/Sources/CCaptureChain" -I "$ROOT/Sources/CRoomFFT/include" -o "$WORK/arraycost" "$ROOT/scripts/bench.d/arraycost.cpp"
"$WORK/arraycost"
