# shellcheck shell=bash
# scripts/bench quality: sourced by scripts/bench (see there). Not written yet.
echo "bench quality: not written yet" >&2
exit 2
