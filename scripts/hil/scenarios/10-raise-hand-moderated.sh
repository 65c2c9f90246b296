# shellcheck shell=bash
# Moderated room: the dut is in the audience and nobody hears it; its raise-hand button asks to
# speak, the moderator (the peer) sees the request and approves; on stage the stage LED lights and
# the peer hears the dut's talker; the mute button mutes it (LED on, status muted, the peer hears
# nothing) and a second press brings it back.
baseline
id="$(dut_id)"
expect_silent 0.5

peer_listen stage_request
press hand
expect_led hand 1
expect_status stage hand_raised
expect_peer_event stage_request ".participant == $id"
peer_sees hand_raised
peer_unlisten

peer_do approve "$id"
wait_for on-stage
expect_led stage 1
expect_led hand 0
expect_hears

press mute
wait_for muted
expect_led mute 1
expect_led stage 1
expect_status muted true
expect_status self_muted true
expect_silent

press mute
wait_for unmuted
expect_led mute 0
expect_hears
