# shellcheck shell=bash
# The mute LED agrees with the mute state whoever changes it: roomctl mute / unmute /
# toggle-mute on the dut, and the moderator muting the dut while it is on stage (the peer then
# hears nothing; a moderator's mute is soft, so the mute button unmutes it and it is heard
# again), and the listener counts no loss for the time the dut was muted.
baseline
id="$(dut_id)"

dut_do mute
wait_for muted
expect_led mute 1
dut_do unmute
wait_for unmuted
expect_led mute 0
dut_do toggle-mute
wait_for muted
expect_led mute 1
dut_do toggle-mute
wait_for unmuted
expect_led mute 0

dut_do raise-hand
expect_led hand 1
peer_do approve "$id"
wait_for on-stage
expect_led stage 1
expect_hears

peer_do mute-participant "$id"
wait_for muted
expect_led mute 1
expect_status server_muted true
expect_status self_muted false
expect_silent

# The LED is on, so the button unmutes (it toggles what people see, not only the self mute).
press mute
wait_for unmuted
expect_led mute 0
expect_status server_muted false
expect_hears

# Packets dropped while muted never got RTP sequence numbers: the peer saw no hole to count.
lost="$(peer_ctl --json stats | jq -r --argjson id "$id" '[.result.streams[] | select(.participant == $id) | .lost] | first // 0')"
step "peer's loss count for the dut after a mute: $lost"
[ "$lost" -le 5 ] || fail "the peer counted $lost packets lost from the dut: muted time shows as loss"

