/*
 * roomsim — a simulated sound card for roomd, built as an ALSA PCM ioplug plugin
 * (libasound_module_pcm_roomsim.so, PCM type "roomsim"). See docs/sim-card.md.
 *
 * This header is the plugin's public contract for the programs and tests that drive it
 * from outside: the files it reads and writes. alsa-lib finds the plugin itself through
 * the exported symbol _snd_pcm_roomsim_open; nothing here needs to be linked.
 *
 * ---------------------------------------------------------------------------------------
 * Room file (ROOMSIM_CONFIG=<path> overrides the `room` parameter of the ALSA PCM):
 *   `key = value` lines, `#` starts a comment, blank lines ignored. Relative paths are
 *   relative to the room file's directory. Unknown keys and bad values make
 *   snd_pcm_open() fail with -EINVAL after a message on stderr naming file, line and key.
 *   Keys and defaults: see docs/sim-card.md and board/sim/room.conf.
 *
 * ---------------------------------------------------------------------------------------
 * Status file (room key `status = <path>`), rewritten atomically (temp file + rename)
 * when a stream starts, when an xrun or a device loss happens, and when a stream closes.
 * One record per line, `name key=value key=value ...`, values never contain spaces:
 *
 *   roomsim version=1 config=<room file or "-">
 *   capture  open=1 start_ns=<N> first_start_ns=<N> rate=48000 channels=4 format=S16_LE
 *            period=480 buffer=1920 starts=1 xruns=0 xruns_injected=0 skew_ppm=0
 *            input_frame=<F>
 *   playback open=1 start_ns=<N> first_start_ns=<N> rate=48000 channels=1 format=S16_LE
 *            period=480 buffer=1920 starts=1 xruns=0 xruns_injected=0 skew_ppm=0
 *            speaker_index=<G>
 *   faults   losses=0 lost=0 lost_until_ns=0 control_commands=0 stalls=0 stalled=0
 *
 *   (each stream record is one line; it is wrapped here for reading)
 *
 *   start_ns        CLOCK_MONOTONIC time, in ns, at which sample 0 of the current run of
 *                   that stream was recorded (capture) or played (playback). A run starts
 *                   at snd_pcm_start (explicit or implicit) and ends at drop/drain/xrun.
 *                   Sample j of the run is at start_ns + j * 1e9 / (rate * (1 + skew_ppm/1e6)).
 *   first_start_ns  start_ns of the first run since the room was (re)created.
 *   input_frame     input file frame that capture sample 0 of the current run carries.
 *   speaker_index   room-global speaker sample index of playback sample 0 of this run.
 *   open            1 while the stream is open, 0 after it was closed.
 *   A stream that was never opened in this room has no line.
 *
 * ---------------------------------------------------------------------------------------
 * Control file (room key `control = <path>`): checked at most every 5 ms while a stream is
 * being serviced (each period wakeup). When it exists it is read and deleted, then each
 * line is executed:
 *   xrun [capture|playback|both]   report one xrun (-EPIPE) on the stream(s); default both
 *   lose <ms>                      device loss for <ms> from now (-ENODEV, reopen fails)
 *   stall <ms>                     the card's clock stops for <ms>: both hw pointers stand still,
 *                                  blocking reads/writes wait, poll reports nothing; then the
 *                                  clock jumps on (an overrun/underrun follows). An I2S clock
 *                                  that stops, for the watchdog tests.
 *   skew [capture|playback] <ppm>  set the clock skew of a stream (default capture)
 * Unknown commands are reported on stderr and ignored.
 */
#ifndef ROOMSIM_H
#define ROOMSIM_H

/** Status file format version written in the first line. */
#define ROOMSIM_STATUS_VERSION 1

/** Environment variable naming a room file that overrides the ALSA `room` parameter. */
#define ROOMSIM_CONFIG_ENV "ROOMSIM_CONFIG"

/** Limits accepted at hw_params time. */
#define ROOMSIM_MIN_RATE 8000
#define ROOMSIM_MAX_RATE 192000
#define ROOMSIM_MAX_CAPTURE_CHANNELS 8
#define ROOMSIM_MAX_PLAYBACK_CHANNELS 2

#endif /* ROOMSIM_H */
