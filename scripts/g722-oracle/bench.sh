#!/bin/sh
# Times roomd's G.722 as the release build compiles it, beside libspandsp on the same frames.
#   scripts/g722-oracle/bench.sh [SECONDS] [RUNS]     (defaults 50 and 5)
# Set PROBE=/path/to/libroomallocprobe.so to also count allocations and retains (README.md).
set -e
here=$(cd "$(dirname "$0")" && pwd)
root=$here/../..
seconds=${1:-50}
runs=${2:-5}
input=$root/Tests/Fixtures/g722/input.s16
(cd "$root" && swift build -c release --target RoomTelephony >/dev/null)
release=$root/.build/release
swiftc -O -parse-as-library -I "$release/Modules" -o "$here/g722-bench" "$here/g722-bench.swift" \
    "$release/RoomTelephony.build/"*.o
make -s -C "$here" g722-oracle
[ -n "$PROBE" ] && LD_PRELOAD=$PROBE "$here/g722-bench" "$input" 1 | head -1
for run in $(seq "$runs"); do
    printf 'roomd (Swift):  '; "$here/g722-bench" "$input" "$seconds"
    printf 'libspandsp:     '; "$here/g722-oracle" bench "$input" "$seconds"
done
