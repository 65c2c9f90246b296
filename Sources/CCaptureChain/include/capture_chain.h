// A small C interface to webrtc-audio-processing 0.3 (a C++ library), so Swift can drive the
// audio processing module without C++ interop. Every feature is switched on or off explicitly:
// a peer project shipped an echo canceller that silently did nothing because it trusted defaults.
#ifndef CWEBRTCAPM_H
#define CWEBRTCAPM_H
#ifdef __cplusplus
extern "C" {
#endif

typedef struct rapm rapm_t;

typedef struct {
    int sample_rate;          // 8000, 16000, 32000 or 48000
    int capture_channels;     // microphones fed to rapm_process_capture (1..8)
    int render_channels;      // channels of the far-end reference (1..2)

    int high_pass;            // 0/1
    int echo_cancel;          // 0/1: echo cancellation on (which canceller: echo_canceller)
    int echo_canceller;       // 0: webrtc's AEC (not the mobile AECM); 1: roomd's canceller
                              // (kalman_aec.h: Kalman-controlled frequency-domain filter and a
                              // residual echo suppressor) in front of the APM, webrtc's AEC off
    int aec_tail_ms;          // roomd's canceller: echo path it covers, ms (0 = 300)
    int aec_extended_filter;  // 0/1: 128 ms filter, robust to unreliable delays (webrtc's AEC)
    int aec_delay_agnostic;   // 0/1: estimate the render->capture delay internally (webrtc's AEC)
    int aec_suppression;      // 0 low, 1 moderate, 2 high (either canceller's residual suppression)
    int noise_suppress;       // 0/1
    int ns_level;             // 0 low, 1 moderate, 2 high, 3 very high
    int ns_in_canceller;      // 0/1: with roomd's canceller, suppress noise inside its
                              // suppressor (spectral_ns.h, no added delay) instead of webrtc's
                              // NS (7 ms); ignored with webrtc's AEC or without echo cancellation
    int gain_control;         // 0/1: adaptive digital AGC (experimental AGC switched off)
    int agc_target_dbfs;      // 0..31: target peak level, as dB below full scale
    int agc_compression_db;   // 0..90
    int agc_limiter;          // 0/1
    int voice_detect;         // 0/1
    int vad_likelihood;       // 0 very low, 1 low, 2 moderate, 3 high
    int beamform;             // 0/1: N mics in, one channel out (needs >= 2 mic positions)
    int low_band;             // 0/1: with roomd's canceller at 48 kHz and no beamformer, run
                              // webrtc's HPF/NS/AGC/VAD on the band below 8 kHz at 16 kHz
                              // (band_split.h): no three-band split, same delay

    int array;                // 0/1: roomd's array processing (array_beam.h): the mics
                              // (capture_channels, positions in mic_xyz) go through a beam
                              // steered with rapm_steer, one channel on from there; with roomd's
                              // canceller, it keeps one echo path per beam. Excludes beamform.
    int dereverb;             // dereverberation in roomd's canceller's suppressor (dereverb.h):
                              // 0 off, 1 WPE, 2 late-reverb suppression, 3 both; needs roomd's
                              // canceller, ignored without it

    const float *mic_xyz;     // capture_channels * 3 floats, metres; used when beamform or array
} rapm_config_t;

/// Creates and configures an APM. On failure returns NULL and writes a reason to err.
rapm_t *rapm_create(const rapm_config_t *config, char *err, int err_len);
void rapm_destroy(rapm_t *apm);

/// Frames per 10 ms block at the configured rate.
int rapm_frames_per_block(const rapm_t *apm);
/// Channels written by rapm_process_capture (1 with the beamformer, else capture_channels).
int rapm_output_channels(const rapm_t *apm);

/// Feeds one 10 ms block of what the speaker plays (deinterleaved, -1..1). Returns an APM error code (0 = ok).
int rapm_process_render(rapm_t *apm, const float *const *render);
/// Cleans one 10 ms block of microphone audio (deinterleaved, -1..1) into out
/// (rapm_output_channels channels). delay_ms: best estimate of render->capture delay.
int rapm_process_capture(rapm_t *apm, const float *const *mics, float *const *out, int delay_ms);

/// Voice activity of the last processed capture block (0/1).
int rapm_voice_detected(const rapm_t *apm);
/// Whether the AEC believes the last block held echo (0/1).
int rapm_echo_present(const rapm_t *apm);
/// roomd's canceller (mic 0): its double-talk step factor after the last block, 0..1 — near 1
/// while its error is what its echo estimate's uncertainty explains, small when the error stands
/// far above it (a near-end talker over the far end, or an echo path that moved). 1 without it.
float rapm_double_talk_factor(const rapm_t *apm);

/// Points the array's beam (config.array) at a talker at azimuth_deg (board frame, as
/// rloc_state reports), or back at mic 0 alone when has_direction is 0. A beam in use stays
/// until the talker is clearly nearer another; a change fades over 30 ms. echo_alone: the far end
/// plays and nobody in the room talks (the next block teaches the array how each mic hears the
/// echo, which starts the canceller on a beam it has not served before). far_active: the far end
/// plays; the beam then stays where it is until its next pause. Between blocks, on the thread
/// that processes capture; allocates nothing. No effect without the array or during a self-test.
void rapm_steer(rapm_t *apm, float azimuth_deg, int has_direction, int echo_alone, int far_active);
/// A self-test starts (1) or ends (0). While it runs the chain hears mic 0 (the test talker is
/// added to every mic alike, which no beam around the table passes at its level), rapm_steer
/// waits, and the dereverberation is held off; when it ends every beam's echo path starts anew
/// from mic 0's, just learnt from the sweep. Between blocks; allocates nothing.
void rapm_self_test(rapm_t *apm, int on);
/// Capture and playback started again (an xrun's restart, a reopened device): the echo may land
/// a few samples from where it did, so roomd's canceller becomes as unsure of the paths it learnt
/// as at its start (keeping them) and learns a moved one at once. No effect with webrtc's
/// canceller (delay-agnostic). Between blocks, on the thread that processes capture; allocates nothing.
void rapm_streams_restarted(rapm_t *apm);
/// How much of WPE's subtraction applies after the beam last turned (0 … 1: it comes back over
/// 1 s, dereverb.h kSettleBlocks), or −1 when the dereverberation does not run. For tests.
float rapm_dereverb_settled(const rapm_t *apm);
/// How reverberant the dereverberation measures the room (0 dry … 1 reverberant: how much of it
/// is applied; dereverb.h), or −1 when it does not run.
float rapm_reverberance(const rapm_t *apm);
/// Where the beam points: 1 with its centre in *azimuth_deg, 0 while it is mic 0 alone (or
/// there is no array).
int rapm_beam(const rapm_t *apm, float *azimuth_deg);
/// The gain (dB) the array puts on each mic to bring it to mic 0's sensitivity (array_beam.h,
/// calibrate; 0 until measured), up to `capacity` mics: how many were written, 0 without an array.
/// Allocates nothing: the audio thread reads it for the status.
int rapm_mic_corrections_db(const rapm_t *apm, float *db, int capacity);
/// Starts that estimate from corrections an earlier run measured (`count` values, mic 0 first, as
/// rapm_mic_corrections_db wrote them): applied from the first block and refined by what this run
/// measures, weighed as 10 s of it. Before the first block. 0, or -1 (nothing changed) without an
/// array, with the calibration off (ROOMD_MIC_CALIBRATION=off), for a count that is not the
/// array's or a value that is not finite; values beyond ±6 dB are taken as ±6.
int rapm_start_mic_corrections_db(rapm_t *apm, const float *db, int count);
/// Blocks this run measured the mics' sensitivities in (the room's noise alone, the speaker
/// quiet): whether rapm_mic_corrections_db holds more than the start it was given. 0 without an array.
long rapm_mic_calibration_blocks(const rapm_t *apm);

/// Switches noise suppression and gain control while running (the audio profile: music wants
/// neither). Call on the thread that processes capture, between blocks. Returns 0 or an APM error.
int rapm_set_noise_suppression(rapm_t *apm, int on);
int rapm_set_gain_control(rapm_t *apm, int on);
/// roomd's canceller skips its filter update while the far end has been digital silence for
/// its whole tail (on by default; off: the full update every block, for comparison).
void rapm_set_canceller_idle_skip(rapm_t *apm, int on);
/// The band the codec sends, up to top_hz (0: all of it): roomd's canceller adapts only there
/// and its suppressor zeroes what lies above (nothing there reaches a listener). No effect with
/// webrtc's canceller. Between blocks; allocates nothing.
void rapm_set_output_band(rapm_t *apm, int top_hz);
/// roomd's canceller (on mic 0, or on the array's beam): per bin of an N-point grid (*bins = N/2
/// + 1, N the smallest power of two ≥ 2 blocks), the last block's share of the mic's power that
/// is not its echo estimate (1 where nothing plays). NULL without roomd's canceller. The pointer
/// stays valid as long as the APM.
const float *rapm_near_share(const rapm_t *apm, int *bins);
/// Blocks the canceller (mic 0) skipped that way so far.
long rapm_canceller_idle_blocks(const rapm_t *apm);

typedef struct {
    float erle_db;            // AEC's own average ERLE estimate
    float erl_db;             // echo return loss (far-end power vs echo power)
    int delay_median_ms;      // AEC's estimated delay, -1 when unknown
    int delay_std_ms;
    float fraction_poor_delays;
} rapm_aec_stats_t;
/// AEC statistics since the last call (metrics are aggregated by the library).
int rapm_aec_stats(rapm_t *apm, rapm_aec_stats_t *stats);

// ---- the talker's direction (talker_locator.h) ----------------------------------------------

typedef struct rloc rloc_t;

/// A locator for `mics` microphones at mic_xyz (mics * 3 floats, metres, board frame), 10 ms
/// blocks at sample_rate. NULL when the geometry cannot tell directions around the whole circle
/// (fewer than 3 mics, or all on one line), with the reason in err.
rloc_t *rloc_create(int sample_rate, int mics, const float *mic_xyz, char *err, int err_len);
/// 1 with the reason in err when mics at mic_xyz cannot tell directions around the whole circle
/// (what rloc_create refuses), 0 when they can. Allocates nothing.
int rloc_geometry_problem(int mics, const float *mic_xyz, char *err, int err_len);
void rloc_destroy(rloc_t *loc);
/// What a block is to the locator.
typedef enum {
    RLOC_IDLE = 0,        // nothing to learn (no voice)
    RLOC_LISTEN = 1,      // someone in the room talks: the block may move the talker's direction
    RLOC_ECHO_ALONE = 2,  // the far end plays and nobody in the room talks: where the echo comes from
} rloc_mode_t;

/// One 10 ms block of the raw mics (one plane each). far_active: the far end plays (no talker is
/// then taken from within 25° of where its echo was found to come from). near_share: per bin,
/// the share of the mics' power that is not the speaker's echo (rapm_near_share), or NULL; bins
/// whose power is the echo's do not steer. Allocates nothing.
void rloc_process(rloc_t *loc, const float *const *mics, rloc_mode_t mode, int far_active, const float *near_share);
/// Where the echo was found to come from (board-frame degrees): 1 and *azimuth_deg, or 0 when not yet.
int rloc_echo_direction(const rloc_t *loc, float *azimuth_deg);
/// Bins rloc_process's near_share must have at this rate (the locator's FFT: N/2 + 1).
int rloc_bins(const rloc_t *loc);

typedef struct {
    float azimuth_deg;        // board frame: 0 = the +x axis (mic0 on board/sim), counter-clockwise; -180..180
    float confidence;         // the map's peak above its mean, in mic-pair coherence (0..1)
    int locked;               // a talker's direction is held (0: none yet, or 2 s without voice)
    int has_direction;        // azimuth_deg holds a direction (the last one, while not locked)
    unsigned changes;         // times the direction moved to a new talker (or was first found)
} rloc_state_t;
void rloc_state(const rloc_t *loc, rloc_state_t *state);

// ---- the array's beam on its own (array_beam.h), for analysis off the audio thread ----------

typedef struct rbeam rbeam_t;

/// The beam roomd's array processing uses, for `mics` mics at mic_xyz (metres, board frame),
/// 10 ms blocks at sample_rate: `roomctl selftest` measures with it what the array gains over
/// mic 0. NULL for fewer than 2 or more than 8 mics, or out of memory.
rbeam_t *rbeam_create(int sample_rate, int mics, const float *mic_xyz);
void rbeam_destroy(rbeam_t *beam);
/// Points the beam at azimuth_deg (board frame) at once, without the fade the engine uses.
void rbeam_steer(rbeam_t *beam, float azimuth_deg);
/// One 10 ms block of every mic (one plane each) → the beam's block (delayed by 2 ms).
void rbeam_process(rbeam_t *beam, const float *const *mics, float *out);
/// Samples per block at the beam's rate.
int rbeam_frames_per_block(const rbeam_t *beam);
/// The chain's adaptive beam (its designs' choices, array_beam.h `adapt`), for tests and
/// measurements. rbeam_set_room_quiet: the blocks processed from now on are ones nobody in the
/// room talks in (the noise-only average the echo-time design is chosen by). rbeam_echo_design:
/// the echo-time design the beam nearest azimuth_deg takes when it is taken up with a new echo
/// path (choose_echo_design): 0 delay-and-sum, 1-7 superdirective at white-noise-gain floors 0,
/// −3, −6, −10, −15, −20, −25 dB; −1 before ~1 s of quiet blocks (or for a beam that does not
/// choose).
rbeam_t *rbeam_create_adaptive(int sample_rate, int mics, const float *mic_xyz);
void rbeam_set_room_quiet(rbeam_t *beam, int quiet);
int rbeam_echo_design(rbeam_t *beam, float azimuth_deg);
/// Takes up the beam nearest azimuth_deg (without the engine's hysteresis between beams) as the
/// engine takes up the one it chose: with the fade, and a first beam's choice of designs
/// (array_beam.h kFirstChoiceBlocks). rbeam_superdirective_share: the share of that beam's bins
/// whose chosen design is not delay-and-sum (−1 for a beam that does not choose).
void rbeam_take_up(rbeam_t *beam, float azimuth_deg);
float rbeam_superdirective_share(const rbeam_t *beam, float azimuth_deg);

#ifdef __cplusplus
}
#endif
#endif
