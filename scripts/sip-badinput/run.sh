#!/usr/bin/env bash
# The daemon-level check of issue 29's bad-input line (docs/calls.md, "Bad input"): roomd (the
# debug build: `swift build` first) on the simulated board with a [sip] account whose registrar is
# registrar.py, and what an installer sees: roomd's sip/call log lines and `roomctl status`'s
# `call` object once a second. Not part of the test suite (it takes SECONDS of wall time).
#
#   scripts/sip-badinput/run.sh refuse 8    every REGISTER gets 401 (a wrong password)
#   scripts/sip-badinput/run.sh accept 8    registers, then two hostile INVITEs from the registrar
#                                           and 300 INVITEs from another address
#   scripts/sip-badinput/run.sh silent 38   a registrar that never answers (timer F is 32 s)
set -euo pipefail
MODE=${1:?refuse, accept or silent}; SECS=${2:-10}
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"; BIN="$ROOT/.build/debug"
D="$(mktemp -d /tmp/sip-badinput-$MODE.XXXXXX)"; mkdir -p "$D/gpio" "$D/state"
PORT=$(python3 -c 'import socket;s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM);s.bind(("127.0.0.1",0));print(s.getsockname()[1])')
printf 'not-the-password\n' > "$D/sip.password"; chmod 600 "$D/sip.password"
cat > "$D/roomd.conf" <<EOC
[sip]
registrar = 127.0.0.1:$PORT
user = room
auth_user = room-auth
password_file = sip.password
transport = udp
media_encryption = optional
EOC
printf 'input = none\noutput = none\n' > "$D/room.conf"
RP=""
if [ "$MODE" != silent ]; then python3 "$ROOT/scripts/sip-badinput/registrar.py" "$MODE" "$PORT" "$SECS" > "$D/registrar.log" 2>&1 & RP=$!; fi
env -u ALSA_CONFIG_PATH -u ALSA_PLUGIN_DIR ROOMSIM_CONFIG="$D/room.conf" ROOMD_SIM_GPIO_DIR="$D/gpio" \
  "$BIN/roomd" --config "$D/roomd.conf" --board "$ROOT/board/sim" --duration "$SECS" --stats-interval 0 \
  --control-socket "$D/r.sock" --state-dir "$D/state" > "$D/roomd.log" 2>&1 & DP=$!
start=$(date +%s.%N)
for _ in $(seq 1 $((SECS - 1))); do
  sleep 1
  [ -S "$D/r.sock" ] || continue
  call=$("$BIN/roomctl" --socket "$D/r.sock" --json status 2>/dev/null \
    | python3 -c 'import json,sys; print(json.dumps(json.load(sys.stdin)["result"].get("call")))' 2>/dev/null || true)
  printf '%5.1f s %s\n' "$(echo "$(date +%s.%N) - $start" | bc)" "$call" >> "$D/status.log"
done
wait $DP || true; [ -n "$RP" ] && wait $RP
echo "== roomd's sip and call lines"; grep -E "sip:|call:" "$D/roomd.log" || true
echo "== roomctl status: call (each change)"; uniq -f2 "$D/status.log"
[ -n "$RP" ] && { echo "== what the registrar's sockets received"; awk '{$1=""; print}' "$D/registrar.log" | sort | uniq -c | sort -rn; }
echo "(files in $D)"
