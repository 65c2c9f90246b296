# shellcheck shell=bash
# The rig's verbs (docs/hil.md). Sourced by scripts/hil/run and by every scenario in
# scripts/hil/scenarios/. A verb prints one line when it did what it says; a check that does not
# hold calls `fail WHY`, which ends the scenario with that reason.
#
# The same verbs drive the simulated board (what `scripts/hil/run` sets up on this machine) and a
# real board: every place that touches the device under test ("dut") goes through a hook that a
# hardware rig overrides with its own command (a command line, split on spaces):
#
#   HIL_DUT_CTL    roomctl on the dut, e.g. "ssh board roomctl" (default: the local roomctl
#                  against $HIL_DUT_SOCK). Arguments are appended: `$HIL_DUT_CTL --json status`.
#   HIL_PRESS_CMD  presses a button: `$HIL_PRESS_CMD BUTTON MS` holds BUTTON (mute|hand) for MS
#                  milliseconds and returns after the release (default: the simulated board's
#                  FIFOs in $HIL_DUT_GPIO).
#   HIL_LEDS_CMD   prints the LEDs as one line `mute=0 hand=1 stage=0` (default: the simulated
#                  board's state file $HIL_DUT_GPIO/leds).
#   HIL_PEER_CTL   roomctl on the peer (default: the local roomctl against $HIL_PEER_SOCK).
#
# Variables the rig (scripts/hil/run) exports: HIL_BIN (roomctl), HIL_DUT_SOCK, HIL_PEER_SOCK,
# HIL_DUT_GPIO, HIL_DUT_SERVER and HIL_DUT_TOKEN (what `dut_join` joins with), HIL_WHY (the file
# a failure reason goes to).
#
# Tools: jq (JSON answers of `roomctl --json`), awk (numbers), timeout (coreutils).

# --- Audio thresholds ------------------------------------------------------------------------
# "The peer hears the dut" is read on the peer: `speaker_dbfs` of `roomctl status` (what its
# speaker plays, RMS smoothed with a 300 ms time constant, floor -100) and the packets its
# per-stream statistics (`roomctl stats`, `streams[].received`) count from the dut's participant.
# Measured with scripts/hil/run on the simulated board (debug build, 2-core VM; espeak-ng speech
# normalized to -3 dBFS peak, looped at the dut's mics, where mic_dbfs reads about -19 dBFS):
#   dut on stage, unmuted:   peer speaker_dbfs -33 dBFS in the first 100 ms, then -27 ... -17 dBFS
#                            (sampled every 100-200 ms); ~100 packets/s from the dut (fewer in
#                            pauses: the VAD gate)
#   dut in the audience:     -100 (the floor: the peer's speaker plays only what it receives, so
#                            the sim room's -70 dBFS noise floor at the mics does not show here)
#   dut muted / stepped      not one packet from the dut from the moment of the mute;
#   down / gone:             speaker_dbfs decays from the speech level at ~14.5 dB/s (the meter's
#                            smoothing of digital silence): below -60 after 2.6-3 s, -100 after ~5 s
# So: heard = level above -45 dBFS AND at least 20 new packets from the dut; silent = level
# below -60 dBFS held for a whole window AND not one new packet from the dut in it. A hardware
# rig with another talker level can move the thresholds through these variables.
HIL_HEARD_DBFS="${HIL_HEARD_DBFS:--45}"
HIL_HEARD_PACKETS="${HIL_HEARD_PACKETS:-20}"
HIL_SILENT_DBFS="${HIL_SILENT_DBFS:--60}"

# --- Reporting -------------------------------------------------------------------------------
step() { printf '    %s\n' "$*"; }

# fail WHY: ends the scenario. The first reason wins (a fail inside `$(...)` also makes the
# caller fail; that second report must not hide the first).
fail() {
  printf '    FAILED: %s\n' "$*" >&2
  if [ -n "${HIL_WHY:-}" ] && [ ! -s "$HIL_WHY" ]; then printf '%s\n' "$*" > "$HIL_WHY"; fi
  exit 1
}

sleep_ms() { sleep "$(awk -v ms="$1" 'BEGIN { printf "%.3f", ms / 1000 }')"; }
now_ms() { local t; t="$(date +%s%N)"; echo $((t / 1000000)); }
# gt A B / lt A B: numeric comparisons of decimal numbers.
gt() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a > b) }'; }
lt() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a < b) }'; }
ms_of() { awk -v s="$1" 'BEGIN { printf "%d", s * 1000 }'; }  # seconds (may be fractional) → ms
dbfs() { awk -v x="$1" 'BEGIN { printf "%.1f dBFS", x }'; }

# --- roomctl on each appliance ---------------------------------------------------------------
# dut_ctl ARGS... / peer_ctl ARGS...: roomctl against that appliance, exit status as roomctl's
# (0 ok, 1 refused, 3 wait timeout, 69 not reachable). Put --json before the subcommand.
dut_ctl() {
  if [ -n "${HIL_DUT_CTL:-}" ]; then
    # shellcheck disable=SC2086  # a command line, split on purpose
    $HIL_DUT_CTL "$@"
  else
    "$HIL_BIN/roomctl" --socket "$HIL_DUT_SOCK" "$@"
  fi
}
# dut_selftest: `roomctl --json selftest` on the dut, run again (at most twice more) while the
# dut answers device_error — "the audio device had an xrun or was lost during the test; run it
# again": the machine, not the dut's chain, spoilt the recording (a fresh-clone CI saw the dut and
# the peer both underrun in that second). The rig's one rerun policy, as a person would do it.
# Output and exit status of the last run; its stderr goes to the rig's.
dut_selftest() {
  local out rc err n spoilt
  err="$(mktemp)"
  for n in 1 2 3; do
    rc=0 spoilt=0
    out="$(dut_ctl --json selftest 2> "$err")" || rc=$?
    grep -q device_error "$err" || grep -q device_error <<< "$out" || break
    spoilt=1
    [ "$n" -lt 3 ] && step "selftest: device_error (an xrun during the test): running it again" >&2
  done
  # The last answer too: the scenario's FAIL line will say so (HIL_WHY.device_error), which is
  # what the test suite's rerun policy looks for.
  [ "$spoilt" -eq 0 ] || [ -z "${HIL_WHY:-}" ] || echo "$n" > "$HIL_WHY.device_error"
  cat "$err" >&2
  rm -f "$err"
  printf '%s\n' "$out"
  return "$rc"
}
peer_ctl() {
  if [ -n "${HIL_PEER_CTL:-}" ]; then
    # shellcheck disable=SC2086
    $HIL_PEER_CTL "$@"
  else
    "$HIL_BIN/roomctl" --socket "$HIL_PEER_SOCK" "$@"
  fi
}

# dut_status [JQ_PATH] / peer_status [JQ_PATH]: the `status` result, or one field of it.
dut_status() { dut_ctl --json status | jq -c -r ".result${1:+.$1}"; }
peer_status() { peer_ctl --json status | jq -c -r ".result${1:+.$1}"; }

# dut_id: the dut's participant id in the room (changes when it joins again).
dut_id() {
  local id
  id="$(dut_status participant)" || fail "dut_id: roomctl status failed"
  if [ -z "$id" ] || [ "$id" = null ]; then fail "dut_id: the dut is not in a room ($(dut_status 2> /dev/null || true))"; fi
  echo "$id"
}

# poll WANT TIMEOUT PROBE...: true once PROBE (a command that prints one value) prints WANT,
# asked every 50 ms for up to TIMEOUT s; false after that, with the last value in POLLED. A PROBE
# that fails ends the scenario. The waiting verbs below are this loop with their own message.
POLLED=""
poll() {
  local want="$1" timeout="$2" deadline
  shift 2
  deadline=$(($(now_ms) + $(ms_of "$timeout")))
  while :; do
    POLLED="$("$@")" || fail "$*: failed"
    [ "$POLLED" = "$want" ] && return 0
    [ "$(now_ms)" -lt "$deadline" ] || return 1
    sleep 0.05
  done
}

# expect_status FIELD VALUE [TIMEOUT]: the dut's `status` FIELD becomes VALUE (default 3 s).
expect_status() {
  local field="$1" want="$2" timeout="${3:-3}"
  poll "$want" "$timeout" dut_status "$field" || fail "dut status $field is $POLLED, expected $want (after ${timeout} s)"
  step "dut status: $field = $want"
}

# wait_for CONDITION [TIMEOUT]: `roomctl wait` on the dut: joined | on-stage | muted | unmuted |
# connected (default 5 s).
wait_for() {
  local cond="$1" timeout="${2:-5}" rc=0
  dut_ctl wait "$cond" --timeout "$timeout" > /dev/null || rc=$?
  [ "$rc" -eq 0 ] || fail "dut not $cond within ${timeout} s (roomctl wait exit $rc; status $(dut_status 2>/dev/null || true))"
  step "dut is $cond"
}

# dut_do ARGS... / peer_do ARGS...: a roomctl command that must succeed.
dut_do() {
  local out
  out="$(dut_ctl "$@" 2>&1)" || fail "dut: roomctl $* refused: $out"
  step "dut: roomctl $*"
}
peer_do() {
  local out
  out="$(peer_ctl "$@" 2>&1)" || fail "peer: roomctl $* refused: $out"
  step "peer: roomctl $*"
}
# peer_refused CODE ARGS...: a roomctl command on the peer that must be refused with CODE: the
# answer's error code, or the room service's code (`room_code`) for a `room_error`, e.g.
# `peer_refused invalid_state approve 7`.
peer_refused() {
  local code="$1" out rc=0 got
  shift
  out="$(peer_ctl --json "$@" 2> /dev/null)" || rc=$?
  [ "$rc" -eq 1 ] || fail "peer: roomctl $* should be refused ($code), got exit $rc: $out"
  got="$(jq -r '.error | "\(.code) \(.room_code // "")"' <<< "$out")" || fail "peer: roomctl $*: not a JSON answer: $out"
  case " $got " in *" $code "*) ;; *) fail "peer: roomctl $* refused with $got, expected $code: $out" ;; esac
  step "peer: roomctl $* refused: $(jq -r '"\(.error.code) \(.error.room_code // "") \(.error.message)"' <<< "$out")"
}

# peer_sees STAGE [TIMEOUT]: the peer's participant list shows the dut with stage STAGE
# (off, hand_raised, invited, on_stage), or `absent`: the dut is not in the peer's room.
# _peer_stage ID: participant ID's stage as the peer sees it, or `absent`.
_peer_stage() {
  peer_ctl --json participants |
    jq -r --argjson id "$1" '[.result.participants[] | select(.id == $id) | .stage] | first // "absent"'
}

peer_sees() {
  local want="$1" timeout="${2:-3}" id
  id="$(dut_id)"
  poll "$want" "$timeout" _peer_stage "$id" || fail "the peer sees the dut (participant $id) as $POLLED, expected $want"
  step "peer sees the dut (participant $id): $want"
}

# peer_sees_gone ID [TIMEOUT]: participant ID is no longer in the peer's room.
peer_sees_gone() {
  local id="$1" timeout="${2:-3}"
  poll absent "$timeout" _peer_stage "$id" || fail "participant $id is still in the peer's room after ${timeout} s"
  step "peer: participant $id has left the room"
}

# --- Events seen by the peer -----------------------------------------------------------------
# peer_listen EVENT...: follow the peer's events in the background (until peer_unlisten). Returns
# once the subscription is live: it sends `log-level info` (the level the rig starts the peer
# with) until the `config` event this broadcasts comes back on the new connection.
HIL_LISTENER_PID=""
HIL_LISTENER_FILE=""
peer_listen() {
  local args=() e deadline
  for e in "$@" config; do args+=(--event "$e"); done
  HIL_LISTENER_FILE="$(mktemp "${TMPDIR:-/tmp}/hil-events.XXXXXX")"
  peer_ctl --json events "${args[@]}" --timeout 60 > "$HIL_LISTENER_FILE" 2>&1 &
  HIL_LISTENER_PID=$!
  deadline=$(($(now_ms) + 5000))
  until grep -q '"event":"config"' "$HIL_LISTENER_FILE"; do
    [ "$(now_ms)" -lt "$deadline" ] || fail "peer_listen: the event subscription did not start: $(cat "$HIL_LISTENER_FILE")"
    peer_ctl log-level info > /dev/null || fail "peer_listen: roomctl log-level failed"
    sleep 0.05
  done
  step "peer follows events: $*"
}
peer_unlisten() {
  if [ -n "$HIL_LISTENER_PID" ]; then
    kill "$HIL_LISTENER_PID" 2> /dev/null || true
    wait "$HIL_LISTENER_PID" 2> /dev/null || true
  fi
  [ -z "$HIL_LISTENER_FILE" ] || rm -f "$HIL_LISTENER_FILE"
  HIL_LISTENER_PID="" HIL_LISTENER_FILE=""
}
# expect_peer_event EVENT JQ_CONDITION [TIMEOUT]: the peer got EVENT whose JSON makes the jq
# condition true, e.g. expect_peer_event stage_request ".participant == 7".
expect_peer_event() {
  local event="$1" cond="$2" timeout="${3:-3}" deadline
  [ -n "$HIL_LISTENER_FILE" ] || fail "expect_peer_event: call peer_listen first"
  deadline=$(($(now_ms) + $(ms_of "$timeout")))
  until jq -e -s --arg e "$event" "any(.[]; .event == \$e and ($cond))" "$HIL_LISTENER_FILE" > /dev/null 2>&1; do
    [ "$(now_ms)" -lt "$deadline" ] || fail "the peer got no $event event with $cond in ${timeout} s (got: $(tr '\n' ' ' < "$HIL_LISTENER_FILE"))"
    sleep 0.05
  done
  step "peer got event $event ($cond)"
}

# --- Buttons and LEDs ------------------------------------------------------------------------
# press BUTTON [MS]: press mute or hand for MS milliseconds (default 150: a short press; the
# long press is 1.5 s held, docs/gpio.md, so use 2000 for one).
press() {
  local button="$1" ms="${2:-150}" fifo
  case "$button" in mute | hand) ;; *) fail "press: unknown button $button (mute or hand)" ;; esac
  if [ -n "${HIL_PRESS_CMD:-}" ]; then
    # shellcheck disable=SC2086
    $HIL_PRESS_CMD "$button" "$ms" || fail "press $button: $HIL_PRESS_CMD failed"
  else
    fifo="$HIL_DUT_GPIO/$button"
    [ -p "$fifo" ] || fail "press $button: no button FIFO at $fifo"
    # roomd holds the FIFO open read-write; the timeout keeps a dead roomd from blocking the open.
    # shellcheck disable=SC2016  # $1 is the inner bash's
    timeout 2 bash -c 'echo press > "$1"' _ "$fifo" || fail "press $button: cannot write $fifo"
    sleep_ms "$ms"
    # shellcheck disable=SC2016
    timeout 2 bash -c 'echo release > "$1"' _ "$fifo" || fail "press $button: cannot write $fifo"
  fi
  step "press $button (${ms} ms)"
}

# leds: the LED line, `mute=0 hand=0 stage=0`.
leds() {
  if [ -n "${HIL_LEDS_CMD:-}" ]; then
    # shellcheck disable=SC2086
    $HIL_LEDS_CMD
  else
    cat "$HIL_DUT_GPIO/leds"
  fi
}
# led NAME: 0 or 1.
led() {
  local line word
  line="$(leds)" || fail "leds: cannot read the LEDs"
  for word in $line; do
    case "$word" in "$1="*) echo "${word#*=}"; return 0 ;; esac
  done
  fail "no LED $1 in '$line'"
}

# expect_led NAME 0|1 [TIMEOUT]: LED NAME (mute, hand, stage) shows the value (default 2 s: the
# LEDs follow the state within an event-loop turn, the button's action 30 ms after release).
expect_led() {
  local name="$1" want="$2" timeout="${3:-2}"
  poll "$want" "$timeout" led "$name" || fail "LED $name is not $want after ${timeout} s: $(leds)"
  step "LED $name=$want ($(leds))"
}

# expect_leds_steady 'mute=0 hand=0 stage=0' [SECONDS]: the whole LED line is exactly this and
# stays so for SECONDS (default 0.6: longer than one blink phase, so blinking is caught).
expect_leds_steady() {
  local want="$1" seconds="${2:-0.6}" deadline got
  deadline=$(($(now_ms) + $(ms_of "$seconds")))
  while :; do
    got="$(leds)" || fail "leds: cannot read the LEDs"
    [ "$got" = "$want" ] || fail "LEDs are '$got', expected steady '$want'"
    [ "$(now_ms)" -lt "$deadline" ] || break
    sleep 0.05
  done
  step "LEDs steady: $want"
}

# leds_seen SECONDS: the distinct LED lines seen while sampling every 50 ms for SECONDS, joined
# by " | " (shows blinking).
leds_seen() {
  local deadline seen=() line l known
  deadline=$(($(now_ms) + $(ms_of "$1")))
  while [ "$(now_ms)" -lt "$deadline" ]; do
    line="$(leds)" || fail "leds: cannot read the LEDs"
    known=0
    for l in "${seen[@]}"; do [ "$l" = "$line" ] && known=1; done
    [ "$known" -eq 1 ] || seen+=("$line")
    sleep 0.05
  done
  local joined
  joined="$(printf '%s|' "${seen[@]}")"
  joined="${joined%|}"
  echo "${joined//|/ | }"
}

# --- Audio: does the peer hear the dut? -------------------------------------------------------
# _peer_probe ID: "SPEAKER_DBFS PACKETS": the peer's speaker level and the packets it has
# received from participant ID's stream so far.
_peer_probe() {
  local level packets
  level="$(peer_ctl --json status | jq -r '.result.speaker_dbfs')" || return 1
  packets="$(peer_ctl --json stats |
    jq -r --argjson id "$1" '[.result.streams[]? | select(.participant == $id) | .received] | add // 0')" || return 1
  echo "$level $packets"
}

# expect_hears [TIMEOUT]: within TIMEOUT (default 4 s) the peer's speaker is above
# HIL_HEARD_DBFS while at least HIL_HEARD_PACKETS new packets came from the dut.
expect_hears() {
  local timeout="${1:-4}" id start deadline level packets p0 best=-100
  id="$(dut_id)"
  start="$(now_ms)"
  deadline=$((start + $(ms_of "$timeout")))
  read -r level p0 < <(_peer_probe "$id") || fail "expect_hears: cannot read the peer's status"
  while :; do
    read -r level packets < <(_peer_probe "$id") || fail "expect_hears: cannot read the peer's status"
    gt "$level" "$best" && best="$level"
    if gt "$level" "$HIL_HEARD_DBFS" && [ $((packets - p0)) -ge "$HIL_HEARD_PACKETS" ]; then break; fi
    [ "$(now_ms)" -lt "$deadline" ] ||
      fail "the peer does not hear the dut: speaker at most $(dbfs "$best") (need > $HIL_HEARD_DBFS), $((packets - p0)) packets from participant $id in ${timeout} s (need $HIL_HEARD_PACKETS)"
    sleep 0.1
  done
  step "peer hears the dut: speaker $(dbfs "$level"), +$((packets - p0)) packets in $(($(now_ms) - start)) ms"
}

# expect_silent [--from ID] [WINDOW] [SETTLE]: the peer's speaker falls below HIL_SILENT_DBFS
# within SETTLE seconds (default 6: the meter's smoothing decays at ~14.5 dB/s) and then stays
# below for WINDOW seconds (default 1) during which not one packet arrives from the dut
# (participant ID: default the dut's current id; give it when the dut has left the room).
expect_silent() {
  local id window settle start deadline level packets p0 worst
  if [ "${1:-}" = --from ]; then id="$2"; shift 2; else id="$(dut_id)"; fi
  window="${1:-1}" settle="${2:-6}"
  start="$(now_ms)"
  deadline=$((start + $(ms_of "$settle")))
  while :; do
    read -r level p0 < <(_peer_probe "$id") || fail "expect_silent: cannot read the peer's status"
    lt "$level" "$HIL_SILENT_DBFS" && break
    [ "$(now_ms)" -lt "$deadline" ] || fail "the peer still hears something: speaker $(dbfs "$level") after ${settle} s (need < $HIL_SILENT_DBFS)"
    sleep 0.1
  done
  worst="$level"
  deadline=$(($(now_ms) + $(ms_of "$window")))
  while :; do
    sleep 0.1
    read -r level packets < <(_peer_probe "$id") || fail "expect_silent: cannot read the peer's status"
    gt "$level" "$worst" && worst="$level"
    lt "$level" "$HIL_SILENT_DBFS" || fail "the peer hears something: speaker $(dbfs "$level") (need < $HIL_SILENT_DBFS)"
    [ "$packets" -eq "$p0" ] || fail "the peer received $((packets - p0)) packets from the dut (participant $id) while it should be silent"
    [ "$(now_ms)" -lt "$deadline" ] || break
  done
  step "peer hears nothing from the dut: speaker at most $(dbfs "$worst"), no packet in ${window} s (settled in $(($(now_ms) - start)) ms)"
}

# expect_dut_pauses [SETTLE]: within SETTLE seconds (default 4) the dut's stream, as the peer
# receives it, falls to the rate of a pause: at most 2 packets in 0.5 s (the voice gate sends one
# every 0.4 s; speech, 100 a second). After `talker off` the dut goes on sending for a while —
# the voice gate's and the encoder's hangovers — and a count that starts then holds packets of
# the talker, not of what comes next. In a quiet room it also says the voice gate closed.
expect_dut_pauses() {
  local settle="${1:-4}" id start deadline p0 packets
  id="$(dut_id)"
  start="$(now_ms)"
  deadline=$((start + $(ms_of "$settle")))
  read -r _ p0 < <(_peer_probe "$id") || fail "expect_dut_pauses: cannot read the peer's stats"
  while :; do
    sleep 0.5
    read -r _ packets < <(_peer_probe "$id") || fail "expect_dut_pauses: cannot read the peer's stats"
    [ $((packets - p0)) -le 2 ] && break
    [ "$(now_ms)" -lt "$deadline" ] ||
      fail "the dut still sends at speech rate: $((packets - p0)) packets in the last 0.5 s, ${settle} s on"
    p0="$packets"
  done
  step "the dut pauses: at most 2 packets in 0.5 s (settled in $(($(now_ms) - start)) ms)"
}

# --- State --------------------------------------------------------------------------------------
# sim_card COMMAND: one command to the simulated dut's sound card (docs/sim-card.md, "Control
# file"), written whole so the card never reads half of it. Only with a simulated dut.
sim_card() {
  echo "$1" > "$HIL_DUT_SIM_CONTROL.tmp" && mv "$HIL_DUT_SIM_CONTROL.tmp" "$HIL_DUT_SIM_CONTROL"
}
# talker off|on: the talker at the dut's mics stops or talks again (a quiet room for a
# self-test). Simulated board: the sim card's control file (`input off|on`, docs/sim-card.md);
# a hardware rig sets HIL_TALKER_SWITCH_CMD (called as `HIL_TALKER_SWITCH_CMD off|on`).
talker() {
  case "$1" in off | on) ;; *) fail "talker: off or on, not '$1'" ;; esac
  if [ -n "${HIL_TALKER_SWITCH_CMD:-}" ]; then
    # shellcheck disable=SC2086  # a command line, split on purpose
    $HIL_TALKER_SWITCH_CMD "$1" || fail "HIL_TALKER_SWITCH_CMD $1 failed"
  else
    [ -n "${HIL_DUT_SIM_CONTROL:-}" ] || fail "talker: no simulated card control file and no HIL_TALKER_SWITCH_CMD"
    sim_card "input $1"
    # The card reads its control file within 5 ms of a period; give it a few periods.
    sleep 0.1
  fi
  step "talker $1"
}

# dut_join: join the rig's room again (after a leave), with the server and token of the rig.
dut_join() {
  local out
  # The token on standard input (ssh carries it): on a command line it is in every process list.
  out="$(dut_ctl join --server "$HIL_DUT_SERVER" --token-file /dev/stdin --role audience <<< "$HIL_DUT_TOKEN" 2>&1)" ||
    fail "dut: roomctl join refused: $out"
  step "dut: roomctl join (the rig's room, as audience)"
}

# baseline: bring the dut to where every scenario starts: in the room, audience, off stage,
# unmuted, LEDs all off and steady.
baseline() {
  local status
  # The talker talks (a scenario that stopped it may have failed before starting it again).
  if [ -n "${HIL_TALKER_SWITCH_CMD:-}${HIL_DUT_SIM_CONTROL:-}" ]; then talker on > /dev/null; fi
  status="$(dut_status)" || fail "baseline: the dut does not answer roomctl status"
  if [ "$(jq -r .joined <<< "$status")" != true ]; then
    case "$(jq -r .connection <<< "$status")" in
      connecting | reconnecting) ;;
      *) dut_join ;;
    esac
    wait_for joined 10
    status="$(dut_status)"
  fi
  case "$(jq -r .stage <<< "$status")" in
    on_stage) dut_do step-down ;;
    hand_raised) dut_do lower-hand ;;
    invited) dut_do decline-invite ;;
  esac
  [ "$(jq -r .muted <<< "$status")" = false ] || dut_do unmute
  expect_status stage off
  expect_status muted false
  expect_leds_steady "mute=0 hand=0 stage=0" 0.3
  step "baseline: dut is participant $(dut_id), audience, unmuted"
}
