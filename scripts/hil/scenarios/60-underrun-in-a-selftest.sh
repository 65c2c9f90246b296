# shellcheck shell=bash
# A playback underrun in the middle of a self-test, in a call: the self-test answers
# device_error and the rig runs it again (dut_selftest), which must pass — the canceller learns
# the echo path again although the restart moved it (a few samples on the simulated card; a
# canceller that stays sure of the old path measured 3-12 dB for 45 s, docs/hil.md). The
# underrun comes from the simulated card's clock stopping for 8 ms (`stall 8`), so a real board
# skips this scenario.
if [ -z "${HIL_DUT_SIM_CONTROL:-}" ]; then
  step "no simulated sound card: the underrun cannot be made here; skipped"
  return 0
fi
baseline
id="$(dut_id)"
dut_do raise-hand
peer_do approve "$id"
wait_for on-stage
# First a self-test with the talker at the mics (it reports the loud room, as in scenario 50):
# the canceller has then learnt through double talk, which made the failure below certain.
result="$(dut_selftest)" && fail "selftest passed with a talker at the mics"
talker off
# 2.5 s into the test: the noise burst, after the canceller has learnt the path from the sweep.
( sleep 2.5; sim_card "stall 8" ) &
result="$(dut_selftest)" || fail "selftest after an underrun: $(jq -c '.result.problems // .error' <<< "$result")"
step "selftest after an underrun passed: echo reduced $(jq '.result.echo_reduction_db' <<< "$result") dB, $(jq .result.attempts <<< "$result") attempt(s)"
xruns="$(dut_ctl --json stats | jq -r '.result.playback_xruns + .result.capture_xruns')"
[ "$xruns" -ge 1 ] || fail "the stall made no xrun (roomctl stats: $xruns), so this proved nothing"
step "xruns on the dut: $xruns"
talker on
