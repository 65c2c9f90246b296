# shellcheck shell=bash
# The hand button beyond raising a hand (docs/gpio.md, Sources/RoomAppliance/Panel.swift): a short press
# accepts a moderator's invitation (invited lights the hand LED) and, on stage, steps down; a
# long press (held >= 1.5 s) leaves the room, and nothing more happens on the release. (The rig
# brings the dut back into the room before the next scenario.)
baseline
id="$(dut_id)"

peer_do invite "$id"
expect_status stage invited
expect_led hand 1
press hand
wait_for on-stage
expect_led stage 1
expect_led hand 0
peer_sees on_stage
expect_hears

press hand
expect_status stage off
expect_led stage 0
peer_sees off
expect_silent

dut_do raise-hand
peer_do approve "$id"
wait_for on-stage
expect_led stage 1
expect_hears
press hand 2000
expect_status connection disconnected
expect_status reason left
peer_sees_gone "$id"
expect_silent --from "$id" 0.5
# After the release the hand button did nothing more (no raise-hand, no rejoin).
expect_status connection disconnected
expect_led mute 0
# Left on purpose: the LEDs are steady and off, not the "failed" blinking (docs/gpio.md).
expect_leds_steady "mute=0 hand=0 stage=0" 1
# Held again: the dut joins the room again.
press hand 2000
wait_for joined 10

