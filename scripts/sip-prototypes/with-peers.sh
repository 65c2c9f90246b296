#!/usr/bin/env bash
# Runs COMMAND with a kamailio registrar (board/sip-test/kamailio.cfg) and an auto-answering
# baresip (board/sip-test/baresip/, registered as far) on free loopback ports, then stops both
# by their PIDs. COMMAND sees KAMAILIO_PORT and SCRATCH. Logs stay in $SCRATCH.
#   scripts/sip-prototypes/with-peers.sh scripts/sip-prototypes/libre/proto_re
set -euo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
free_port() { python3 -c 'import socket;s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM);s.bind(("127.0.0.1",0));print(s.getsockname()[1])'; }
SCRATCH=${SCRATCH:-$(mktemp -d /tmp/sip-proto-XXXXXX)}
KAMAILIO_PORT=$(free_port)
SIP_PORT=$(free_port)
mkdir -p "$SCRATCH/kamailio" "$SCRATCH/baresip"
for f in config accounts contacts; do
  sed -e "s|@SIP_PORT@|$SIP_PORT|g" -e "s|@KAMAILIO_PORT@|$KAMAILIO_PORT|g" -e "s|@OUT_DIR@|$SCRATCH|g" \
    "$here/board/sip-test/baresip/$f" > "$SCRATCH/baresip/$f"
done
kamailio -f "$here/board/sip-test/kamailio.cfg" -DD -E -n 1 -m 16 -M 8 -Y "$SCRATCH/kamailio" \
  -l "udp:127.0.0.1:$KAMAILIO_PORT" > "$SCRATCH/kamailio.log" 2>&1 &
kam_pid=$!
sleep 0.5
baresip -f "$SCRATCH/baresip" < /dev/null > "$SCRATCH/baresip.log" 2>&1 &
bs_pid=$!
cleanup() { kill "$bs_pid" "$kam_pid" 2>/dev/null || true; wait "$bs_pid" "$kam_pid" 2>/dev/null || true; }
trap cleanup EXIT
for _ in $(seq 50); do grep -q "200 OK" "$SCRATCH/baresip.log" 2>/dev/null && break; sleep 0.1; done
export KAMAILIO_PORT SCRATCH
"$@"
