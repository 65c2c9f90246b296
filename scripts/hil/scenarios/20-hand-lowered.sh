# shellcheck shell=bash
# Hand lowered: a second press of the raise-hand button withdraws the request before the
# moderator acted: the hand LED goes on then off, the peer sees the dut's hand up then down, and
# there is no stage request left to approve.
baseline
id="$(dut_id)"

press hand
expect_led hand 1
expect_status stage hand_raised
peer_sees hand_raised

press hand
expect_led hand 0
expect_status stage off
peer_sees off
peer_refused invalid_state approve "$id"
expect_leds_steady "mute=0 hand=0 stage=0"
