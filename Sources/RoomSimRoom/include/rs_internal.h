/* Internal interfaces of the roomsim plugin. RoomSimRoom is the simulated room, with no ALSA in
 * it (so the scene tool links it too); RoomSimCard is the ALSA glue. One job per file:
 *   keyvalue.c  `key = value` files: the line loop, value parsers, rs_log
 *   config.c    room file keys             wav.c    WAV/raw input and output files
 *   conv.c      FFT partitioned convolution
 *   ism.c       image-source impulse responses of a shoebox room
 *   scene.c     scene files: talkers, noise and the speaker placed in a room; their rendering
 *   room.c      shared room: echo path, faults, status
 *   RoomSimCard/pcm.c  the ALSA ioplug glue and the plugin entry point
 */
#ifndef RS_INTERNAL_H
#define RS_INTERNAL_H

#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "roomsim.h"

enum { RS_PLAYBACK = 0, RS_CAPTURE = 1 }; /* equal to SND_PCM_STREAM_PLAYBACK / _CAPTURE */
enum { RS_FILE_AUTO, RS_FILE_WAV, RS_FILE_RAW };
enum { RS_IR_GENERATED, RS_IR_NONE, RS_IR_FILE };

#define RS_MAX_MICS ROOMSIM_MAX_CAPTURE_CHANNELS

void rs_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
int64_t rs_now_ns(void); /* CLOCK_MONOTONIC */

/* splitmix64 finalizer: a counter-based, deterministic pseudo-random source. */
static inline uint64_t rs_mix64(uint64_t x)
{
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}
/* Approximately Gaussian, unit variance (sum of four uniforms), from one 64-bit value. */
static inline float rs_gauss(uint64_t r)
{
    float s = (float)(r & 0xFFFF) + (float)((r >> 16) & 0xFFFF) + (float)((r >> 32) & 0xFFFF)
              + (float)(r >> 48);
    return (s / 65536.0f - 2.0f) * 1.7320508f; /* var of sum of 4 U(0,1) = 1/3 */
}

/* ---- keyvalue.c ---------------------------------------------------------------------- */
typedef struct rs_kv_ctx {
    const char *file;
    int line;
    const char *key;
    char dir[PATH_MAX]; /* directory of the file, for relative paths */
} rs_kv_ctx;
/* Applies one key: NULL when taken, "" for an unknown key, else what the value should be. */
typedef const char *(*rs_kv_apply)(const rs_kv_ctx *ctx, void *target, const char *key, char *value);
/* Reads `key = value` lines (`#` comments, optional quotes) into target. 0, or -EINVAL/-errno
 * after one message on stderr naming file, line and key. `what` names the file in messages. */
int rs_kv_load(const char *path, const char *what, rs_kv_apply apply, void *target);
const char *rs_parse_number(const char *v, double min, double max, double *out);
const char *rs_parse_uint(const char *v, unsigned min, unsigned max, unsigned *out);
const char *rs_parse_bool(const char *v, int *out);
/* Relative paths are relative to the file's directory; allow_none: "none"/"off"/"" give "". */
const char *rs_parse_path(const rs_kv_ctx *ctx, const char *v, char *out, int allow_none);
/* 1..max_count numbers separated by spaces or commas. */
const char *rs_parse_list(const char *v, double min, double max, int max_count, double *out,
                          int *count);
int rs_is_none(const char *v);

/* ---- config.c ------------------------------------------------------------------------ */
typedef struct rs_config {
    char path[PATH_MAX];      /* room file this came from; "" = built-in defaults */
    char input[PATH_MAX];     /* "" = no input file (silence) */
    int input_format;         /* RS_FILE_* */
    unsigned input_channels;  /* raw input only */
    int input_loop;           /* 1 = loop at the end, 0 = silence */
    char output[PATH_MAX];    /* "" = discard playback */
    int output_format;        /* RS_FILE_* (auto: by ".wav" suffix) */
    int echo;                 /* echo path on/off */
    double echo_delay_ms;
    double echo_gain_db;
    int ir_mode;              /* RS_IR_* */
    char ir_file[PATH_MAX];
    double ir_length_ms, ir_rt60_ms, ir_drr_db;
    unsigned ir_seed;
    double mic_delay[RS_MAX_MICS]; /* in samples (or ms when mic_delay_ms is set) */
    int mic_delay_in_ms;
    double mic_gain[RS_MAX_MICS];  /* linear */
    /* A mono input duplicated to the mics: per-mic delay and gain (the talker's direction). */
    double input_mic_delay[RS_MAX_MICS]; /* in capture samples (or ms when ..._in_ms) */
    int input_mic_delay_in_ms;
    double input_mic_gain[RS_MAX_MICS];  /* linear */
    int input_mic_line;       /* line of the last input_mic_* key, 0 = none given */
    char input_mic_key[32];   /* and its name (they are refused with a multi-channel input) */
    int noise;                /* noise floor on/off */
    double noise_dbfs;
    unsigned noise_seed;
    double skew_ppm[2];       /* [RS_PLAYBACK], [RS_CAPTURE] */
    double xrun_at_ms[2];     /* < 0: none */
    double lose_at_ms;        /* < 0: none */
    double lose_for_ms;
    char control[PATH_MAX];   /* "" = none */
    char status[PATH_MAX];    /* "" = none */
    char scene[PATH_MAX];     /* "" = none; else the scene file (scene.c) gives input and echo */
    int scene_line;
    int scene_conflict_line;  /* first key a scene replaces (refused together with a scene) */
    char scene_conflict_key[32];
} rs_config;

void rs_config_defaults(rs_config *cfg);
/* Parses `path` over the defaults. 0, or -EINVAL/-errno after a message on stderr. */
int rs_config_load(rs_config *cfg, const char *path);

/* ---- wav.c --------------------------------------------------------------------------- */
/* The input file is read with pread through a two-block cache, not mapped: a mapping's pages
 * count in the application's (roomd's) resident set, and on kernels that map the page cache's
 * large folios whole (6.18, ext4) giving them back 64 KB at a time no longer kept them out —
 * the whole 1 MB talker file was resident in roomd. A board's mics are no file. */
#define RS_INPUT_BLOCK 16384   /* bytes per cache block (a multiple of 2: no sample straddles two) */
typedef struct rs_input {
    int fd;
    int open;                  /* fd is ours (a zeroed rs_input is a closed one) */
    uint64_t data_offset;      /* file offset of frame 0 */
    size_t frames;
    unsigned channels;
    unsigned rate;             /* 0 for raw files */
    int64_t block[2];          /* which block each cache slot holds (-1: none); slot = block & 1 */
    unsigned char cache[2][RS_INPUT_BLOCK];
} rs_input;

int rs_input_open(rs_input *in, const char *path, int format, unsigned raw_channels);
void rs_input_close(rs_input *in);
/* Reads data block `block` into its slot (zeros past the file's end or after a failed read:
 * the talker falls silent rather than the stream failing). */
void rs_input_load(rs_input *in, uint64_t block);
static inline int16_t rs_input_sample(rs_input *in, size_t frame, unsigned ch)
{
    const uint64_t at = ((uint64_t)frame * in->channels + ch) * 2, block = at / RS_INPUT_BLOCK;
    const unsigned slot = (unsigned)(block & 1);
    if (in->block[slot] != (int64_t)block)
        rs_input_load(in, block);
    const unsigned char *p = in->cache[slot] + at % RS_INPUT_BLOCK;
    return (int16_t)(uint16_t)(p[0] | (p[1] << 8));
}
/* Reads channel 0 of a PCM16 WAV as floats in -1..1 (for impulse responses). */
int rs_wav_read_mono(const char *path, float **samples, size_t *count, unsigned *rate);

typedef struct rs_output {
    FILE *f;
    int wav;
    unsigned channels, rate;  /* 0 until the format is known */
    uint64_t frames;
    char path[PATH_MAX];
} rs_output;

int rs_output_open(rs_output *out, const char *path, int format); /* creates/truncates */
/* After rs_output_close: appends to the file if it is still as we left it, else starts over. */
int rs_output_reopen(rs_output *out);
/* Sets the sample format; starts the file over when it differs from what it holds. */
int rs_output_set_format(rs_output *out, unsigned channels, unsigned rate);
int rs_output_write(rs_output *out, const int16_t *frames, size_t count);
void rs_output_sync(rs_output *out); /* flush and finalize the WAV header */
void rs_output_close(rs_output *out);

/* ---- conv.c -------------------------------------------------------------------------- */
typedef struct rs_conv rs_conv;
/* Zero-latency streaming convolution: direct head + uniformly partitioned FFT tail. */
rs_conv *rs_conv_new(const float *ir, size_t len);
void rs_conv_free(rs_conv *c);
void rs_conv_process(rs_conv *c, const float *in, float *out, size_t n);

/* ---- ism.c --------------------------------------------------------------------------- */
#define RS_SOUND_SPEED 343.0  /* m/s, air at 20 °C */
/* The wall reflection coefficient (pressure, the same for every wall and frequency) that
 * gives a shoebox room this reverberation time (Eyring), and back. */
double rs_ism_beta_for_rt60(const double room[3], double rt60_s);
double rs_ism_rt60_for_beta(const double room[3], double beta);
/* h[0..n): the impulse response from src to mic (metres, room frame) at `rate`, sum of every
 * image source whose sound arrives within n samples; the direct path at 1 m has gain 1. */
void rs_ism_ir(const double room[3], double beta, const double src[3], const double mic[3],
               double rate, float *h, size_t n);
/* T20 reverberation time of a response in seconds (Schroeder integral, -5 to -25 dB, x3); 0
 * when it does not decay by 25 dB. */
double rs_ir_t20(const float *h, size_t n, double rate);
/* In place, 2nd-order Butterworth high-pass (causal). */
void rs_highpass(float *x, size_t n, double fc, double rate);

/* ---- scene.c ------------------------------------------------------------------------- */
#define RS_SCENE_MAX_TALKERS 8
#define RS_SCENE_MAX_NOISES 4
#define RS_SCENE_MAX_POINTS 16
#define RS_SCENE_VERSION 1     /* of the rendering: part of the cache key */
enum { RS_NOISE_WHITE, RS_NOISE_PINK, RS_NOISE_BROWN, RS_NOISE_VENT, RS_NOISE_FAN, RS_NOISE_FILE };

typedef struct rs_scene_point { double p[3]; double t; } rs_scene_point;

typedef struct rs_scene_talker {
    int line;                  /* of talkerN; 0 = not given */
    char file[PATH_MAX];
    rs_scene_point path[RS_SCENE_MAX_POINTS]; /* absolute room coordinates; t in scene seconds */
    int points, at_line;
    double start_s, gain_db;
} rs_scene_talker;

typedef struct rs_scene_noise {
    int line;                  /* of noiseN; 0 = not given */
    int kind;                  /* RS_NOISE_* */
    char file[PATH_MAX];
    double at[3];
    int at_line, diffuse;
    int level_line, level_is_snr;
    double level_db;           /* dB SNR against the talkers at mic 0, or dBFS at mic 0 */
    unsigned seed;
} rs_scene_noise;

typedef struct rs_scene {
    char path[PATH_MAX];
    double room[3];
    int room_line;
    double rt60_ms, absorption; /* one of the two (< 0: not given) */
    int decay_line;
    double beta;               /* the walls' reflection coefficient (rs_scene_load sets it) */
    double array[3];
    int array_line;
    double mic[RS_MAX_MICS][3];
    int mic_line[RS_MAX_MICS];
    double mic_gain_db[RS_MAX_MICS]; /* micN_gain_db: the mic's sensitivity against its nominal */
    int mic_gain_line[RS_MAX_MICS];
    int mics;                  /* mic0..mic(mics-1), after rs_scene_load */
    double speaker[3];         /* relative to the array centre */
    int speaker_line;
    unsigned rate;
    double duration_s;         /* 0 = until the last talker's room has rung out */
    double ir_ms;              /* 0 = the room's rt60 */
    double highpass_hz;
    rs_scene_talker talker[RS_SCENE_MAX_TALKERS];
    rs_scene_noise noise[RS_SCENE_MAX_NOISES];
} rs_scene;

/* Parses and checks a scene file, and finds the walls' reflection that gives `rt60_ms` as
 * measured (T20 of a response across the room): 0, or -EINVAL/-errno after one message naming
 * file, line and key. */
int rs_scene_load(rs_scene *s, const char *path);
double rs_scene_beta(const rs_scene *s);
/* Impulse response length in samples at `rate`. */
size_t rs_scene_ir_length(const rs_scene *s, double rate);
/* The impulse response from a point (absolute room coordinates) to mic m at `rate` (n taps,
 * the scene's high-pass applied). malloc'ed; NULL when out of memory. */
float *rs_scene_ir(const rs_scene *s, const double src[3], int mic, double rate, size_t n);
/* Mic m's sensitivity (micN_gain_db) as a linear factor on everything it hears: the rendering's
 * talkers and noise, and the speaker's echo. Not in rs_scene_ir: a response is the room's. */
static inline double rs_scene_mic_gain(const rs_scene *s, int m) { return pow(10.0, s->mic_gain_db[m] / 20.0); }

typedef struct rs_scene_report {
    double seconds;
    double speech_dbfs;        /* active level of all talkers at mic 0 (0 = no talker) */
    double noise_dbfs[RS_SCENE_MAX_NOISES];
    uint64_t clipped;          /* samples clipped to 16 bits */
} rs_scene_report;
/* Renders what each mic hears (talkers and noise; not the echo, which the card adds) into a
 * PCM16 WAV with one channel per mic. */
int rs_scene_render(const rs_scene *s, const char *wav_path, rs_scene_report *report);
/* The rendering of the scene file `path`, made once and kept beside it in .roomsim-cache/
 * (keyed by the scene, its sound files and RS_SCENE_VERSION): its path into out. `rendered`
 * (may be NULL) gets the rendering's report when it was made now, zeros when it was cached. */
int rs_scene_cached_render(const char *path, char out[PATH_MAX], rs_scene_report *rendered);

/* ---- room.c -------------------------------------------------------------------------- */
/* Linear clock of one stream: position(t) = base_pos + (t - base_ns) * rate_eff / 1e9. */
typedef struct rs_clock {
    int64_t base_ns;
    double base_pos;
    double rate_eff;
} rs_clock;

static inline double rs_clock_pos(const rs_clock *c, double t_ns)
{
    return c->base_pos + (t_ns - (double)c->base_ns) * c->rate_eff * 1e-9;
}
static inline double rs_clock_time(const rs_clock *c, double pos)
{
    return (double)c->base_ns + (pos - c->base_pos) / c->rate_eff * 1e9;
}

typedef struct rs_room rs_room;

typedef struct rs_stream_info {
    unsigned rate, channels;
    const char *format;
    unsigned long period, buffer;
} rs_stream_info;

/* Finds or creates the room of cfg->path; fails with -ENODEV during a device loss. */
int rs_room_acquire(const rs_config *cfg, int stream, rs_room **room);
/* cpu_ns: the closing stream's time in the plugin's own work (rs_now_ns around its transfers
 * and its ring-out), added to the stream's `cpu_ns` in the status file. */
void rs_room_release(rs_room *room, int stream, uint64_t cpu_ns);
const rs_config *rs_room_config(const rs_room *room);

/* Fault bookkeeping for a stream at time now: returns -ENODEV while the device is lost
 * (counting a new loss once), 0 otherwise. Executes the control file when due. Sets
 * *xrun when an xrun requested through the control file is pending for this stream and
 * *skew_ppm to the stream's current skew. */
int rs_room_poll_faults(rs_room *room, int stream, int64_t now, int *xrun, double *skew_ppm);
int rs_room_is_lost(rs_room *room, int64_t now);
/* 0 after the control command `input off` (the talker at the mics is silent), else 1. */
int rs_room_input_on(rs_room *room);
/* 0 after the control command `mics off` (the array unplugged: every mic reads digital zero,
 * talker, echo and noise alike), else 1. */
int rs_room_mics_on(rs_room *room);
/* The time the card's clock shows at `now`: `now`, except during a `stall` (control file), when
 * it stays at the moment the stall began, so the hw pointers stop; afterwards it jumps on. */
int64_t rs_room_clock_time(rs_room *room, int64_t now);

/* Records the setup; for playback also sets the output file format. */
int rs_room_stream_setup(rs_room *room, int stream, const rs_stream_info *info);
/* start_ns: this run; first_start_ns: first run since the stream was opened; position:
 * input frame (capture) or speaker index (playback) of sample 0 of the run. */
void rs_room_stream_started(rs_room *room, int stream, int64_t start_ns, int64_t first_start_ns,
                            double skew_ppm, uint64_t position);
void rs_room_stream_xrun(rs_room *room, int stream, int injected);
/* A running playback stream received frames whose first one plays `lead_us` from now
 * (negative: it was already due — a late write, counted). */
void rs_room_playback_lead(rs_room *room, double lead_us);

/* Playback side: the speaker signal. n is the stream's sample index. */
int rs_room_playback_prepare(rs_room *room, unsigned rate);
/* Returns the room-global speaker index of sample 0 of the run. */
uint64_t rs_room_playback_start(rs_room *room, const rs_clock *clock);
void rs_room_playback_clock(rs_room *room, const rs_clock *clock); /* after a skew change */
void rs_room_playback_stop(rs_room *room);
/* count frames of the stream from its sample index n: interleaved S16 for the output file,
 * and their mono mix in -1..1 for the echo path. */
void rs_room_playback_write(rs_room *room, uint64_t n, const int16_t *frames, unsigned channels,
                            const float *mono, size_t count);

/* Capture side: adds the echo of the speaker (per-mic delay and gain applied) to acc
 * (count frames x channels, in int16 units) for capture samples j0.. of a stream with
 * the given clock. */
void rs_room_capture_echo(rs_room *room, const rs_clock *clock, uint64_t j0, size_t count,
                          unsigned channels, float *acc);

#endif /* RS_INTERNAL_H */
