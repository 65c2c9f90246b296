# shellcheck shell=bash
# scripts/bench server-ab: sourced by scripts/bench (sees BIN, WORK, ROOT).
#
# Another revision's roomserver and this tree's, alternated in one invocation (old, new, old,
# new, ...) under the server bench's load (scripts/bench_server.sh: 50 rooms × 10, 3 streamers
# per room), with one generator for both: this tree's roomload. Only the server differs, and
# both builds see the same machine minutes, so a difference between them is the code's, not
# the host's (this VM's per-packet kernel cost has differed 4× between days: docs/roomserver.md,
# "What a forwarded packet costs").
#
# The revision's roomserver is built once per commit, with the flags scripts/bench uses, from
# `git archive` of the commit into .build/server-ab/COMMIT (kept: the next invocation reuses it).
# Its configuration comes from that revision's docs/roomserver.conf.example (bench_server.sh's
# SERVER_CONFIG_EXAMPLE), so a server from before TLS or SRTP gets a file it can read.
#
# Environment:
#   SERVER_AB_REV     the revision to compare with (default 500b574, the commit whose plain
#                     server read 15.2 % of a core on 2026-11-21)
#   SERVER_AB_PAIRS   old/new pairs (default 3)
#   SRTP, SERVER_SIGNALLING   as for bench_server.sh (default plain both: a server from before
#                     SRTP forwards plain RTP only)
#   SERVER_AB_ARGS    roomload options for every run (e.g. "--rooms 5 --duration 10")
#   SERVER_AB_QUIET_WAIT  before each pair, wait up to this many seconds (default 120) for the
#                     host to be under 15 % of one core busy over 5 s (other work on a shared machine); the
#                     pair runs anyway after that, and its host_busy_pct says how busy it was
# Every run's lines are printed tagged with "build" (old or new), "rev" and "pair"; then one
# summary line per metric (server-ab.py): the new build's median as the value, the old build's
# median, every run's figure, and the median of the paired differences (new − old).

AB_REV="${SERVER_AB_REV:-500b574}"
AB_PAIRS="${SERVER_AB_PAIRS:-3}"
AB_COMMIT="$(git -C "$ROOT" rev-parse --verify "$AB_REV^{commit}")" || { echo "bench server-ab: no commit $AB_REV" >&2; exit 2; }
AB_DIR="$ROOT/.build/server-ab/$AB_COMMIT"
if [ ! -x "$AB_DIR/roomserver" ]; then
  echo "bench server-ab: building $AB_REV's roomserver in $AB_DIR" >&2
  rm -rf "$AB_DIR/src"
  mkdir -p "$AB_DIR/src"
  git -C "$ROOT" archive "$AB_COMMIT" | tar -x -C "$AB_DIR/src"
  # shellcheck disable=SC2046 # the flags are separate words on purpose
  (cd "$AB_DIR/src" && swift build $(swift_build_flags release) --product roomserver >&2)
  # shellcheck disable=SC2046
  cp "$(cd "$AB_DIR/src" && swift build $(swift_build_flags release) --show-bin-path)/roomserver" "$AB_DIR/roomserver"
fi
# Each build's bench directory: its roomserver beside this tree's roomload.
mkdir -p "$WORK/ab-old" "$WORK/ab-new"
ln -sf "$AB_DIR/roomserver" "$WORK/ab-old/roomserver"
ln -sf "$BIN/roomserver" "$WORK/ab-new/roomserver"
ln -sf "$BIN/roomload" "$WORK/ab-old/roomload"
ln -sf "$BIN/roomload" "$WORK/ab-new/roomload"
AB_NEW_REV="$(git -C "$ROOT" rev-parse --short HEAD)$([ -z "$(git -C "$ROOT" status --porcelain --untracked-files=no)" ] || echo +)"
: > "$WORK/server-ab.jsonl"
for pair in $(seq "$AB_PAIRS"); do
  python3 - "${SERVER_AB_QUIET_WAIT:-120}" <<'PY' >&2
import os, sys, time
def busy():
    f = [int(x) for x in open("/proc/stat").readline().split()[1:]]
    return sum(f) - f[3] - f[4], sum(f)
deadline = time.monotonic() + float(sys.argv[1])
while True:
    a = busy(); time.sleep(5); b = busy()
    share = 100 * (b[0] - a[0]) / max(1, b[1] - a[1]) * os.cpu_count()  # % of one core
    if share < 15 or time.monotonic() > deadline:
        print(f"bench server-ab: host {share:.1f} % of one core busy before the pair", flush=True)
        break
PY
  for build in old new; do
    example="$ROOT/docs/roomserver.conf.example" rev="$AB_NEW_REV"
    [ "$build" = new ] || { example="$AB_DIR/src/docs/roomserver.conf.example"; rev="$(git -C "$ROOT" rev-parse --short "$AB_COMMIT")"; }
    # shellcheck disable=SC2086 # SERVER_AB_ARGS holds separate options
    SERVER_CONFIG_EXAMPLE="$example" SRTP="${SRTP:-no}" SERVER_SIGNALLING="${SERVER_SIGNALLING:-plain}" \
      "$ROOT/scripts/bench_server.sh" "$WORK/ab-$build" ${SERVER_AB_ARGS:-} > "$WORK/run.jsonl" \
      || echo "bench server-ab: the $build server's run $pair failed" >&2
    python3 -c '
import json, sys
for line in open(sys.argv[1]):
    if line.startswith("{"):
        r = json.loads(line)
        r.update(bench="server-ab", build=sys.argv[2], rev=sys.argv[3], pair=int(sys.argv[4]))
        print(json.dumps(r), flush=True)
' "$WORK/run.jsonl" "$build" "$rev" "$pair" | tee -a "$WORK/server-ab.jsonl"
  done
done
python3 "$ROOT/scripts/bench.d/server-ab.py" "$WORK/server-ab.jsonl"
