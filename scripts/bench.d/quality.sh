# shellcheck shell=bash
# scripts/bench quality: sourced by scripts/bench (sees BIN, WORK, ROOT, speech, room, roomd).
#
# Codec quality as a listener hears it: four voices (English and German, male and female,
# espeak-ng, ~9-11 s each) spoken into A's simulated mic, A (streamer) -> roomproxy (random
# loss on A's uplink only, so the loss end to end is the proxy's rate) -> roomserver -> B
# (audience), B's speaker recorded; PESQ-WB of B's speaker against A's clean input per voice
# (scripts/bench.d/quality.py). Echo path off on both cards: the codec and network chain is
# measured, not the canceller. Release programs, one run per loss rate, ~50 s each.
#
# Environment:
#   QUALITY_LOSSES   loss rates in percent (default "0 5 10 20")
#   QUALITY_A_OPTS   extra roomd options for A (e.g. "--opus-frame 20"); QUALITY_B_OPTS for B
#   QUALITY_VOICES   subset of the voice names below (default all four)
#   QUALITY_KEEP     a directory to copy the recordings and logs into
#   QUALITY_SETTINGS a free-text label reported with the results (default: A's options)
# ROOMD_OPUS (docs/audio-engine.md, "Codec settings") is passed through to both roomd, so a
# lever can be measured without rebuilding: ROOMD_OPUS="fec=0" scripts/bench quality.

# PESQ from PyPI (numpy and scipy come with it when missing); idempotent and quiet when present.
if ! python3 -c 'import numpy, scipy, pesq' 2>/dev/null; then
  echo "bench quality: installing pesq (and numpy, scipy) from PyPI" >&2
  python3 -m pip install --quiet --disable-pip-version-check numpy scipy pesq >&2
fi

Q_TEXT_EN_M="Good morning everyone, thanks for joining. Today we review the release schedule, \
the open hardware issues and the results of the field trial in the Berlin office."
Q_TEXT_EN_F="The second room still had an echo on Tuesday afternoon, so I think we should look at \
the speaker placement before we ship more units to the customers."
Q_TEXT_DE_M="Guten Morgen zusammen, danke, dass ihr dabei seid. Heute besprechen wir den Zeitplan \
und die Ergebnisse des Feldversuchs im Berliner Büro."
Q_TEXT_DE_F="Im zweiten Raum gab es am Dienstag noch ein Echo. Wir sollten uns die Position der \
Lautsprecher ansehen, bevor wir weitere Geräte ausliefern."
speech q_en_us_m "$Q_TEXT_EN_M" en-us
speech q_en_gb_f "$Q_TEXT_EN_F" en-gb+f3
speech q_de_m "$Q_TEXT_DE_M" de
speech q_de_f "$Q_TEXT_DE_F" de+f3
read -r -a Q_VOICES <<< "${QUALITY_VOICES:-q_en_us_m q_en_gb_f q_de_m q_de_f}"
Q_TALK_S="$(python3 "$ROOT/scripts/bench.d/quality.py" prepare "$WORK" "${Q_VOICES[@]}")"
Q_A_S="$(python3 -c "import math; print(math.ceil($Q_TALK_S + 1))")"
Q_B_S=$((Q_A_S + 2))
read -r -a Q_LOSSES <<< "${QUALITY_LOSSES:-0 5 10 20}"

read -r Q_TCP Q_UDP < <(free_ports tcp)
sed -e "s/127.0.0.1:7700/127.0.0.1:$Q_TCP/; s/127.0.0.1:7701/127.0.0.1:$Q_UDP/; s/^log_level = .*/log_level = notice/" \
  "$ROOT/docs/roomserver.conf.example" > "$WORK/q-server.conf"
dev_tls "$WORK"
"$BIN/roomserver" --config "$WORK/q-server.conf" 2> "$WORK/q-server.log" &
Q_SERVER=$!
for _ in $(seq 50); do (exec 3<>/dev/tcp/127.0.0.1/$Q_TCP) 2>/dev/null && break; sleep 0.1; done
q_mint() { "$BIN/roomserver" mint-token --config "$WORK/q-server.conf" --key dev --room "$1" --user "$2" ${3:+"$3"}; }
q_quiet="--config none --state-dir none --control-socket none"

for loss in "${Q_LOSSES[@]}"; do
  run="$WORK/run-$loss"
  mkdir -p "$run"
  echo "bench quality: ${loss} % loss, ${Q_TALK_S} s of speech (load: $(cut -d' ' -f1-3 /proc/loadavg))" >&2
  "$BIN/roomproxy" --listen 127.0.0.2 --server "127.0.0.1:$Q_TCP" --media-port "$Q_UDP" \
    --loss "$loss" --direction up --seed $((1000 + loss)) > "$run/proxy.jsonl" 2> "$run/proxy.log" &
  PROXY=$!
  for _ in $(seq 50); do (exec 3<>/dev/tcp/127.0.0.2/$Q_TCP) 2>/dev/null && break; sleep 0.1; done
  room "$run/a.conf" input="$WORK/talk.wav" input_end=silence echo=off output=none status="$run/a.status"
  room "$run/b.conf" input=none echo=off output="$run/b-speaker.wav" status="$run/b.status"
  # shellcheck disable=SC2086
  ROOMSIM_CONFIG="$run/b.conf" roomd $q_quiet --server "127.0.0.1:$Q_TCP" --tls-ca-file "$WORK/tls/ca.pem" --token "$(q_mint "q$loss" b)" \
    --role audience --duration "$Q_B_S" ${QUALITY_B_OPTS:-} > "$run/b.jsonl" 2> "$run/b.log" &
  B=$!
  sleep 0.5
  # shellcheck disable=SC2086
  ROOMSIM_CONFIG="$run/a.conf" roomd $q_quiet --server "127.0.0.2:$Q_TCP" --tls-ca-file "$WORK/tls/ca.pem" --token "$(q_mint "q$loss" a --publish)" \
    --role streamer --duration "$Q_A_S" ${QUALITY_A_OPTS:-} > "$run/a.jsonl" 2> "$run/a.log" &
  A=$!
  wait $A || echo "bench quality: A exited with $?" >&2
  wait $B || echo "bench quality: B exited with $?" >&2
  kill -INT $PROXY; wait $PROXY 2>/dev/null || true
done
kill $Q_SERVER; wait $Q_SERVER 2>/dev/null || true

QUALITY_SETTINGS="${QUALITY_SETTINGS:-A: ${QUALITY_A_OPTS:-defaults}; B: ${QUALITY_B_OPTS:-defaults}; ROOMD_OPUS=${ROOMD_OPUS:-}}" \
  python3 "$ROOT/scripts/bench.d/quality.py" analyze "$WORK" "${Q_LOSSES[@]}"
if [ -n "${QUALITY_KEEP:-}" ]; then mkdir -p "$QUALITY_KEEP" && cp -r "$WORK"/run-* "$WORK"/talk.wav "$WORK"/segments.json "$QUALITY_KEEP"/; fi
