# shellcheck shell=bash
# scripts/bench server-sweep: sourced by scripts/bench (sees BIN, WORK, ROOT).
#
# The server bench's load (scripts/bench_server.sh: rooms of 10 participants, 3 streamers each)
# at growing sizes, one after another in one invocation: SERVER_SWEEP participants (default
# "500 1000 2000", i.e. 50, 100 and 200 rooms), plain (SRTP=no, SERVER_SIGNALLING=plain) unless
# set otherwise. With two or more CPUs the server runs on CPU 0 and roomload on the others
# (taskset), so the generator's work is not on the server's core; on one CPU, both share it.
# Each size runs once per SERVER_SWEEP_WORKERS (default "1 N", N = the CPUs): with one worker
# the server is pinned as above; with more, the server may use every CPU and so may roomload
# (a machine with no CPU to spare for the generator: it shares them, and what the generator
# takes shows in host_busy_pct). Each run's lines are printed tagged "participants" and
# "workers"; then, per size and worker count, a summary line (server-sweep.py): the server's
# CPU per 1000 participants, the p99 forward delay and the loss.
sweep="${SERVER_SWEEP:-500 1000 2000}"
cpus="$(nproc)"
worker_counts="${SERVER_SWEEP_WORKERS:-1 $cpus}"
: > "$WORK/server-sweep.jsonl"
for participants in $sweep; do
  rooms=$(( participants / 10 ))
  for workers in $(printf '%s\n' $worker_counts | awk '!seen[$0]++'); do
    if [ "$cpus" -ge 2 ] && [ "$workers" = 1 ]; then
      SERVER_TASKSET="0" LOAD_TASKSET="1-$(( cpus - 1 ))" SERVER_WORKERS=1 SRTP="${SRTP:-no}" SERVER_SIGNALLING="${SERVER_SIGNALLING:-plain}" \
        "$ROOT/scripts/bench_server.sh" "$BIN" --rooms "$rooms" --join-timeout 120
    else
      SERVER_WORKERS="$workers" SRTP="${SRTP:-no}" SERVER_SIGNALLING="${SERVER_SIGNALLING:-plain}" \
        "$ROOT/scripts/bench_server.sh" "$BIN" --rooms "$rooms" --join-timeout 120
    fi | sed "s/^{/{\"participants\":$participants,\"workers\":$workers,/" | tee -a "$WORK/server-sweep.jsonl"
  done
done
python3 "$ROOT/scripts/bench.d/server-sweep.py" "$WORK/server-sweep.jsonl"
