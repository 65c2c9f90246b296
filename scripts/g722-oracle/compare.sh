#!/bin/sh
# Encodes every DIR/*.s16 and decodes every DIR/*.g722 (and the encodings) with libspandsp and
# with roomd's Swift G.722, and compares the outputs byte for byte. Exits 1 on a difference.
#   scripts/g722-oracle/compare.sh DIR      (e.g. a DIR written by fuzz-inputs.py)
set -e
here=$(cd "$(dirname "$0")" && pwd)
dir=$1
make -s -C "$here" g722-oracle
"$here/build-swift.sh"
out=$(mktemp -d)
status=0
for input in "$dir"/*.s16; do
    name=$(basename "$input" .s16)
    "$here/g722-oracle" encode "$input" "$out/$name.spandsp.g722"
    "$here/g722-swift" encode "$input" "$out/$name.swift.g722"
    cmp "$out/$name.spandsp.g722" "$out/$name.swift.g722" && echo "$name: encoded the same" || status=1
    cp "$out/$name.spandsp.g722" "$out/$name.encoded.g722"
done
for input in "$dir"/*.g722 "$out"/*.encoded.g722; do
    [ -e "$input" ] || continue
    name=$(basename "$input" .g722)
    "$here/g722-oracle" decode "$input" "$out/$name.spandsp.s16"
    "$here/g722-swift" decode "$input" "$out/$name.swift.s16"
    cmp "$out/$name.spandsp.s16" "$out/$name.swift.s16" && echo "$name: decoded the same" || status=1
done
rm -r "$out"
exit $status
