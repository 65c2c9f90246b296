# shellcheck shell=bash
# scripts/bench doubletalk: sourced by scripts/bench (see there). Not written yet.
echo "bench doubletalk: not written yet" >&2
exit 2
