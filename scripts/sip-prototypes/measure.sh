#!/usr/bin/env bash
# Measures each SIP prototype (issue 29): lines of C, stripped size, the shared libraries it
# brings (ldd, sizes), RSS after registering, CPU of the whole register + 2 s call + hang-up +
# un-register run (user+sys from getrusage at exit, median of RUNS), each run against fresh peers.
#   scripts/sip-prototypes/measure.sh [RUNS]     (default 5)
set -euo pipefail
cd "$(dirname "$0")"
runs=${1:-5}
make -s -C libre && make -s -C osip && make -s -C sofia
code_lines() { grep -v '^\s*$' "$1" | grep -cv '^\s*\(/\*\|\*\|//\)'; }
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
for p in ${PROTOS:-libre/proto_re osip/proto_osip sofia/proto_sofia}; do
  src=$p.c
  strip -o /tmp/stripped.$$ "$p"
  echo "== $p"
  echo "lines of C: $(wc -l < "$src") total, $(code_lines "$src") code (no blank or comment lines)"
  echo "stripped binary: $(stat -c %s /tmp/stripped.$$) bytes"
  echo "shared libraries beyond libc:"
  ldd "$p" | awk '$3 ~ /^\// {print $1, $3}' | grep -v -e 'libc.so' | while read -r name path; do
    echo "  $name $(stat -L -c %s "$path") bytes"
  done
  rss=() cpu=() base=()
  for _ in $(seq "$runs"); do
    out=$(./with-peers.sh bash -c "./$p \$KAMAILIO_PORT" 2>&1)
    echo "$out" | grep -q 'hangup after 2 s' || { echo "run failed:"; echo "$out"; exit 1; }
    rss+=("$(echo "$out" | sed -n 's/.*rss_kib \([0-9]*\).*/\1/p')")
    cpu+=("$(echo "$out" | sed -n 's/.*cpu_total_ms \([0-9.]*\).*/\1/p')")
    base+=("$(echo "$out" | sed -n 's/.*rss_at_start_kib \([0-9]*\).*/\1/p')")
  done
  echo "RSS after REGISTER 200 (KiB), runs: ${rss[*]} -> median $(printf '%s\n' "${rss[@]}" | median)"
  echo "RSS at the start of main (KiB), runs: ${base[*]} -> median $(printf '%s\n' "${base[@]}" | median)"
  echo "CPU user+sys of the whole process at exit (ms, getrusage), runs: ${cpu[*]} -> median $(printf '%s\n' "${cpu[@]}" | median)"
done
rm -f /tmp/stripped.$$
