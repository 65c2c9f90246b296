/* The ALSA ioplug glue: a PCM paced by CLOCK_MONOTONIC through a timerfd.
 *
 * Each stream has a linear clock started at snd_pcm_start: position(t) = (t - start) * rate *
 * (1 + skew_ppm / 1e6). The hw pointer is position(now) rounded down to whole periods; the
 * timerfd fires at every period boundary so poll()/blocking reads and writes wake up. Capture data is generated when the
 * application reads it (input file + echo + noise for the sample's recording time);
 * playback data goes to the output file and into the room's echo path when written.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <math.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <alsa/asoundlib.h>
#include <alsa/pcm_external.h>

#include "rs_internal.h"

#define CHUNK 256 /* frames converted per step */

typedef struct rs_pcm {
    snd_pcm_ioplug_t io;
    rs_room *room;
    const rs_config *cfg;     /* the room's */
    int stream;
    int tfd;

    /* setup (hw_params / sw_params) */
    unsigned rate, channels;
    snd_pcm_format_t format;
    snd_pcm_uframes_t period, buffer, boundary, stop_threshold, avail_min;

    /* the current run */
    int running;
    rs_clock clock;
    double skew_ppm;
    int64_t first_start_ns;   /* first start since open: base of xrun_at_ms and of the input */
    int xrun_at_fired;
    double min_lead_us;       /* playback: smallest lead reported to the room so far */
    int lead_reported;

    /* capture */
    rs_input in;
    uint64_t input_base;      /* input frame of sample 0 of the current run */
    float noise_amp;          /* in int16 units; 0 = off */
    int in_shaped;            /* mono input with per-mic delays/gains (input_mic_*) */
    int input_on;             /* the room's `input on|off`, read at each pointer update */
    int mics_on;              /* the room's `mics on|off`, likewise */
    int64_t in_delay[ROOMSIM_MAX_CAPTURE_CHANNELS]; /* in samples of the stream's rate */
    float in_gain[ROOMSIM_MAX_CAPTURE_CHANNELS];

    float acc[CHUNK * ROOMSIM_MAX_CAPTURE_CHANNELS];
    int16_t s16[CHUNK * ROOMSIM_MAX_CAPTURE_CHANNELS];
    float mono[CHUNK];

    uint64_t cpu_ns;          /* thread CPU time in transfers (and the ring-out at close) */
} rs_pcm;

/* ---- timer -------------------------------------------------------------------------------- */

static void timer_set(rs_pcm *p, int64_t first_abs_ns, int64_t interval_ns)
{
    struct itimerspec its = { 0 };
    its.it_value.tv_sec = first_abs_ns / 1000000000;
    its.it_value.tv_nsec = first_abs_ns % 1000000000;
    its.it_interval.tv_sec = interval_ns / 1000000000;
    its.it_interval.tv_nsec = interval_ns % 1000000000;
    timerfd_settime(p->tfd, TFD_TIMER_ABSTIME, &its, NULL);
}

static void timer_stop(rs_pcm *p)
{
    struct itimerspec its = { 0 };
    timerfd_settime(p->tfd, 0, &its, NULL);
}

/* Make poll() return at once and keep returning (until the timer is re-armed or read). */
static void timer_now(rs_pcm *p) { timer_set(p, 1, 0); }

static void timer_periodic(rs_pcm *p, int64_t now)
{
    int64_t period_ns = (int64_t)ceil((double)p->period * 1e9 / p->clock.rate_eff);
    /* first wakeup: when the clock reaches the next period boundary */
    double pos = rs_clock_pos(&p->clock, (double)now);
    double next = (floor(pos / p->period) + 1) * p->period;
    int64_t first = (int64_t)ceil(rs_clock_time(&p->clock, next));
    timer_set(p, first, period_ns);
}

/* One read takes every expiration so far (the count, and resets it): a second read would only
 * return EAGAIN, a system call per period for nothing. */
static void drain_timer(rs_pcm *p)
{
    uint64_t expirations;
    while (read(p->tfd, &expirations, sizeof expirations) < 0 && errno == EINTR) {
    }
}

/* ---- helpers ------------------------------------------------------------------------------ */

static int is_lost(rs_pcm *p) { return rs_room_is_lost(p->room, rs_now_ns()); }

static void *area_ptr(const snd_pcm_channel_area_t *a, snd_pcm_uframes_t frame)
{
    return (char *)a->addr + (a->first + frame * a->step) / 8;
}

static int16_t to_s16(float v)
{
    if (v > -32768.5f && v < 32767.5f) {
        /* lrintf without the libm call: adding and removing 1.5 * 2^23 rounds |v| < 2^22 to an
         * integer in the current rounding mode, as lrintf does (no reassociation without
         * -ffast-math, so the sum is kept) */
        int32_t i = (int32_t)((v + 12582912.0f) - 12582912.0f);
        return (int16_t)(i > 32767 ? 32767 : i < -32768 ? -32768 : i);
    }
    long s = lrintf(v); /* out of range or NaN */
    return (int16_t)(s > 32767 ? 32767 : s < -32768 ? -32768 : s);
}

static void set_clock(rs_pcm *p, int64_t base_ns, double base_pos, double skew_ppm)
{
    p->skew_ppm = skew_ppm;
    p->clock.base_ns = base_ns;
    p->clock.base_pos = base_pos;
    p->clock.rate_eff = p->rate * (1.0 + skew_ppm * 1e-6);
}

/* The hw pointer at `now`: the clock's position rounded down to whole periods, like a
 * DMA engine that reports at period interrupts. (A frame-exact pointer lets an application
 * that reads a moment after a wakeup take 481 frames, and then the next wakeup finds 479 <
 * avail_min and sleeps a whole extra period.) The epsilon keeps a wakeup that lands exactly
 * on a boundary from seeing 479.9999999 frames. */
static uint64_t hw_frames(const rs_pcm *p, int64_t now)
{
    double pos = rs_clock_pos(&p->clock, (double)now) + 1e-6;
    uint64_t frames = pos > 0 ? (uint64_t)pos : 0;
    return frames - frames % p->period;
}

/* ---- callbacks ------------------------------------------------------------------------- */

static int rs_start(snd_pcm_ioplug_t *io)
{
    rs_pcm *p = io->private_data;
    int64_t now = rs_now_ns();
    if (rs_room_is_lost(p->room, now))
        return -ENODEV;
    int xrun;
    double skew;
    rs_room_poll_faults(p->room, p->stream, now, &xrun, &skew);
    p->input_on = rs_room_input_on(p->room);
    p->mics_on = rs_room_mics_on(p->room);
    set_clock(p, now, 0.0, skew);
    p->running = 1;
    if (p->first_start_ns == 0)
        p->first_start_ns = now;
    uint64_t position;
    if (p->stream == RS_CAPTURE) {
        /* the room kept sounding while the stream was stopped: continue at the frame for now */
        p->input_base = (uint64_t)llround((double)(now - p->first_start_ns) * p->clock.rate_eff * 1e-9);
        position = p->input_base;
    } else {
        position = rs_room_playback_start(p->room, &p->clock);
    }
    rs_room_stream_started(p->room, p->stream, now, p->first_start_ns, skew, position);
    timer_periodic(p, now);
    return 0;
}

static int rs_stop(snd_pcm_ioplug_t *io)
{
    rs_pcm *p = io->private_data;
    if (p->running && p->stream == RS_PLAYBACK)
        rs_room_playback_stop(p->room);
    p->running = 0;
    timer_stop(p);
    return 0;
}

static snd_pcm_sframes_t rs_pointer(snd_pcm_ioplug_t *io)
{
    rs_pcm *p = io->private_data;
    if (!p->running || io->state == SND_PCM_STATE_DISCONNECTED || io->state == SND_PCM_STATE_XRUN)
        return (snd_pcm_sframes_t)io->hw_ptr;

    int64_t now = rs_now_ns();
    int xrun;
    double skew;
    if (rs_room_poll_faults(p->room, p->stream, now, &xrun, &skew) < 0) {
        snd_pcm_ioplug_set_state(io, SND_PCM_STATE_DISCONNECTED);
        timer_now(p);
        return (snd_pcm_sframes_t)io->hw_ptr;
    }
    p->input_on = rs_room_input_on(p->room);
    p->mics_on = rs_room_mics_on(p->room);
    if (skew != p->skew_ppm) { /* control file: rebase the clock at now */
        set_clock(p, now, rs_clock_pos(&p->clock, (double)now), skew);
        if (p->stream == RS_PLAYBACK)
            rs_room_playback_clock(p->room, &p->clock);
        timer_periodic(p, now);
    }
    double at = p->cfg->xrun_at_ms[p->stream];
    if (!p->xrun_at_fired && at >= 0 && now >= p->first_start_ns + (int64_t)(at * 1e6)) {
        p->xrun_at_fired = 1;
        xrun = 1;
    }
    if (xrun) {
        rs_room_stream_xrun(p->room, p->stream, 1);
        timer_now(p);
        return -EPIPE;
    }

    uint64_t hw = hw_frames(p, rs_room_clock_time(p->room, now)); /* frozen during a stall */
    uint64_t appl = io->appl_ptr; /* the boundary is far beyond any run on 64-bit */
    uint64_t avail;
    if (p->stream == RS_CAPTURE) {
        avail = hw > appl ? hw - appl : 0;
    } else {
        if (io->state == SND_PCM_STATE_DRAINING && hw > appl)
            hw = appl; /* drained: ioplug stops the stream */
        if (hw >= appl)
            avail = p->buffer + (hw - appl);
        else
            avail = appl - hw >= p->buffer ? 0 : p->buffer - (appl - hw);
    }
    if (avail >= p->stop_threshold && p->stop_threshold <= p->buffer &&
        io->state != SND_PCM_STATE_DRAINING) {
        if (getenv("ROOMSIM_DEBUG"))
            rs_log("%s xrun: hw=%llu appl=%llu avail=%llu stop_threshold=%lu buffer=%lu state=%d",
                   p->stream == RS_CAPTURE ? "capture" : "playback", (unsigned long long)hw,
                   (unsigned long long)appl, (unsigned long long)avail, p->stop_threshold,
                   p->buffer, io->state);
        rs_room_stream_xrun(p->room, p->stream, 0); /* the application was too late */
        timer_now(p);
        return -EPIPE;
    }
    return (snd_pcm_sframes_t)(p->boundary ? hw % p->boundary : hw);
}

static int rs_poll_revents(snd_pcm_ioplug_t *io, struct pollfd *pfd, unsigned int nfds,
                           unsigned short *revents)
{
    rs_pcm *p = io->private_data;
    *revents = 0;
    if (nfds < 1)
        return -EINVAL;
    snd_pcm_state_t state = io->state;
    if (state == SND_PCM_STATE_XRUN || state == SND_PCM_STATE_DISCONNECTED) {
        *revents = POLLERR; /* the timer stays readable until prepare */
        return 0;
    }
    if (!(pfd[0].revents & POLLIN))
        return 0;
    unsigned short ready = p->stream == RS_CAPTURE ? POLLIN : POLLOUT;
    if (!p->running) {
        /* prepared playback may be filled before start */
        if (p->stream == RS_PLAYBACK && state == SND_PCM_STATE_PREPARED &&
            io->appl_ptr < p->buffer) {
            *revents = ready;
            return 0;
        }
        drain_timer(p);
        return 0;
    }
    drain_timer(p);
    if (state == SND_PCM_STATE_DRAINING) {
        *revents = ready;
        return 0;
    }
    uint64_t hw = hw_frames(p, rs_room_clock_time(p->room, rs_now_ns())), appl = io->appl_ptr, avail;
    if (p->stream == RS_CAPTURE)
        avail = hw > appl ? hw - appl : 0;
    else
        avail = appl > hw + p->buffer ? 0 : hw + p->buffer - appl;
    if (avail >= p->avail_min)
        *revents = ready;
    else if (getenv("ROOMSIM_DEBUG"))
        rs_log("%s poll: not ready hw=%llu appl=%llu avail=%llu avail_min=%lu",
               p->stream == RS_CAPTURE ? "capture" : "playback", (unsigned long long)hw,
               (unsigned long long)appl, (unsigned long long)avail, p->avail_min);
    return 0;
}

/* dst[f * stride] = input frame idx + f as a float sample of file channel ch, times gain, for
 * f < n: 0 before the start, and after the end unless the input loops. One division per run
 * instead of one per sample (a looping input is past its end most of the time). */
static void input_run(rs_pcm *p, int64_t idx, unsigned ch, float gain, float *dst,
                      size_t stride, size_t n)
{
    size_t f = 0;
    const uint64_t frames = p->in.frames;
    for (; f < n && (idx + (int64_t)f < 0 || frames == 0); f++)
        dst[f * stride] = 0.0f * gain;
    if (f == n)
        return;
    uint64_t u = (uint64_t)(idx + (int64_t)f);
    int past_end = u >= frames;
    if (past_end && p->cfg->input_loop) {
        u %= frames;
        past_end = 0;
    }
    for (; f < n && !past_end; f++) {
        dst[f * stride] = rs_input_sample(&p->in, u, ch) * gain;
        if (++u == frames) {
            if (p->cfg->input_loop)
                u = 0;
            else
                past_end = 1;
        }
    }
    for (; f < n; f++)
        dst[f * stride] = 0.0f * gain;
}

/* acc[f * ch + c] += amp * gauss(mix64(seed << 40 ^ c << 56 ^ (idx0 + f))): one mic at a time
 * into a contiguous run, so the generator vectorizes (AVX2 clone on x86-64); same values. */
#if defined(__x86_64__) && defined(__clang__) && defined(__linux__)
__attribute__((target_clones("avx2", "default")))
#endif
static void add_noise(float *acc, unsigned ch, size_t n, uint64_t idx0, unsigned seed, float amp)
{
    float tmp[CHUNK];
    for (unsigned c = 0; c < ch; c++) {
        const uint64_t key = ((uint64_t)seed << 40) ^ ((uint64_t)c << 56);
        for (size_t f = 0; f < n; f++)
            tmp[f] = amp * rs_gauss(rs_mix64(key ^ (idx0 + f)));
        for (size_t f = 0; f < n; f++)
            acc[f * ch + c] += tmp[f];
    }
}

static snd_pcm_sframes_t capture_transfer(rs_pcm *p, const snd_pcm_channel_area_t *areas,
                                          snd_pcm_uframes_t offset, snd_pcm_uframes_t size)
{
    unsigned ch = p->channels;
    uint64_t j0 = p->io.appl_ptr;
    for (snd_pcm_uframes_t done = 0; done < size;) {
        size_t n = size - done < CHUNK ? size - done : CHUNK;
        float *acc = p->acc;
        /* the input file; a mono one may reach each mic with its own delay and gain. While
         * `input off`, the file keeps its place (the talker goes on talking, unheard). */
        for (size_t f = 0; f < n && !p->input_on; f++)
            for (unsigned c = 0; c < ch; c++)
                acc[f * ch + c] = 0.0f;
        if (p->input_on) {
            int64_t src = (int64_t)(p->input_base + j0 + done);
            for (unsigned c = 0; c < ch; c++) {
                if (p->in_shaped)
                    input_run(p, src - p->in_delay[c], 0, p->in_gain[c], acc + c, ch, n);
                else
                    input_run(p, src, p->in.channels ? c % p->in.channels : 0, 1.0f, acc + c, ch, n);
            }
        }
        /* the noise floor: a deterministic function of (seed, mic, input frame) */
        if (p->noise_amp > 0)
            add_noise(acc, ch, n, p->input_base + j0 + done, p->cfg->noise_seed, p->noise_amp);
        /* the echo of the speaker */
        rs_room_capture_echo(p->room, &p->clock, j0 + done, n, ch, acc);
        /* `mics off`: an unplugged array reads zeros, whatever the room sounds like */
        for (size_t i = 0; i < n * ch && !p->mics_on; i++)
            acc[i] = 0.0f;

        /* Per channel, the format chosen once and the address stepped: the sample formats
         * this card offers (S16, FLOAT) sit on whole bytes, so `step` bits are step/8 bytes. */
        for (unsigned c = 0; c < ch; c++) {
            char *dst = area_ptr(&areas[c], offset + done);
            const size_t step = areas[c].step / 8;
            const float *src = acc + c;
            if (p->format == SND_PCM_FORMAT_FLOAT_LE)
                for (size_t f = 0; f < n; f++, dst += step)
                    *(float *)dst = src[f * ch] / 32768.0f;
            else
                for (size_t f = 0; f < n; f++, dst += step)
                    *(int16_t *)dst = to_s16(src[f * ch]);
        }
        done += n;
    }
    return (snd_pcm_sframes_t)size;
}

static snd_pcm_sframes_t playback_transfer(rs_pcm *p, const snd_pcm_channel_area_t *areas,
                                           snd_pcm_uframes_t offset, snd_pcm_uframes_t size)
{
    unsigned ch = p->channels;
    uint64_t n0 = p->io.appl_ptr;
    if (p->io.state == SND_PCM_STATE_RUNNING) {
        /* The pointer ALSA sees moves in whole periods, so a write that comes after its
         * first frame was due passes unnoticed there; on a card that plays continuously it
         * is an underrun. Measured against the stream's continuous clock. */
        double due = rs_clock_time(&p->clock, (double)n0);
        double lead_us = (due - (double)rs_now_ns()) / 1e3;
        /* The room's lock only for news: a late write or a new smallest lead (rare after the
         * first writes), not on every period. */
        if (lead_us < 0 || !p->lead_reported || lead_us < p->min_lead_us) {
            p->min_lead_us = lead_us;
            p->lead_reported = 1;
            rs_room_playback_lead(p->room, lead_us);
        }
    }
    for (snd_pcm_uframes_t done = 0; done < size;) {
        size_t n = size - done < CHUNK ? size - done : CHUNK;
        /* Channel by channel (as capture), the mix summed in the same order as frame by frame. */
        for (size_t f = 0; f < n; f++)
            p->mono[f] = 0;
        for (unsigned c = 0; c < ch; c++) {
            const char *src = area_ptr(&areas[c], offset + done);
            const size_t step = areas[c].step / 8;
            int16_t *s16 = p->s16 + c;
            if (p->format == SND_PCM_FORMAT_FLOAT_LE)
                for (size_t f = 0; f < n; f++, src += step) {
                    const float v = *(const float *)src;
                    s16[f * ch] = to_s16(v * 32768.0f);
                    p->mono[f] += v;
                }
            else
                for (size_t f = 0; f < n; f++, src += step) {
                    const int16_t s = *(const int16_t *)src;
                    s16[f * ch] = s;
                    p->mono[f] += s / 32768.0f;
                }
        }
        for (size_t f = 0; f < n; f++)
            p->mono[f] = p->mono[f] / (float)ch;
        rs_room_playback_write(p->room, n0 + done, p->s16, ch, p->mono, n);
        done += n;
    }
    return (snd_pcm_sframes_t)size;
}

static snd_pcm_sframes_t rs_transfer(snd_pcm_ioplug_t *io, const snd_pcm_channel_area_t *areas,
                                     snd_pcm_uframes_t offset, snd_pcm_uframes_t size)
{
    rs_pcm *p = io->private_data;
    if (io->state == SND_PCM_STATE_DISCONNECTED || is_lost(p))
        return -ENODEV;
    /* The simulator's own work, so that a benchmark can tell it from the application's
     * (the status file's cpu_ns): the input, noise, echo convolution and conversions. Timed
     * with CLOCK_MONOTONIC (the vDSO, ~20 ns), not the thread's CPU clock: that is a system
     * call, and its four reads per period were 2.6 % of roomd's CPU samples in the engine bench
     * (docs/sim-card.md). The transfers do not block, so their wall time is their CPU time
     * unless the thread is preempted inside one. */
    int64_t t0 = rs_now_ns();
    snd_pcm_sframes_t rc = p->stream == RS_CAPTURE ? capture_transfer(p, areas, offset, size)
                                                   : playback_transfer(p, areas, offset, size);
    int64_t t1 = rs_now_ns();
    if (t1 > t0)
        p->cpu_ns += (uint64_t)(t1 - t0);
    return rc;
}

static int rs_hw_params(snd_pcm_ioplug_t *io, snd_pcm_hw_params_t *params)
{
    rs_pcm *p = io->private_data;
    (void)params;
    if (is_lost(p))
        return -ENODEV;
    if (io->format != SND_PCM_FORMAT_S16_LE && io->format != SND_PCM_FORMAT_FLOAT_LE)
        return -EINVAL;
    unsigned max_ch = p->stream == RS_CAPTURE ? ROOMSIM_MAX_CAPTURE_CHANNELS
                                              : ROOMSIM_MAX_PLAYBACK_CHANNELS;
    if (io->channels < 1 || io->channels > max_ch)
        return -EINVAL;
    p->rate = io->rate;
    p->channels = io->channels;
    p->format = io->format;
    p->period = io->period_size;
    p->buffer = io->buffer_size;
    p->stop_threshold = p->buffer;
    p->avail_min = p->period;
    if (p->stream == RS_CAPTURE) {
        /* input_mic_*: only a mono input gets them (checked at open) */
        const rs_config *c = p->cfg;
        p->in_shaped = 0;
        for (unsigned m = 0; m < ROOMSIM_MAX_CAPTURE_CHANNELS; m++) {
            double d = c->input_mic_delay_in_ms ? c->input_mic_delay[m] * p->rate / 1000.0
                                                : c->input_mic_delay[m];
            p->in_delay[m] = p->in.channels == 1 ? llround(d) : 0;
            p->in_gain[m] = p->in.channels == 1 ? (float)c->input_mic_gain[m] : 1.0f;
            if (m < p->channels && (p->in_delay[m] != 0 || p->in_gain[m] != 1.0f))
                p->in_shaped = 1;
        }
    }
    const char *source = p->cfg->scene[0] ? p->cfg->scene : p->cfg->input;
    if (p->stream == RS_CAPTURE && p->in.rate && p->in.rate != p->rate)
        rs_log("%s: file rate %u Hz, stream rate %u Hz: samples are used as they are",
               source, p->in.rate, p->rate);
    if (p->stream == RS_CAPTURE && p->cfg->scene[0] && p->in.channels != p->channels)
        rs_log("%s: the scene has %u mics, the stream %u channels: channel c hears mic c mod %u",
               source, p->in.channels, p->channels, p->in.channels);
    rs_stream_info info = { p->rate, p->channels, snd_pcm_format_name(p->format), p->period,
                            p->buffer };
    return rs_room_stream_setup(p->room, p->stream, &info);
}

static int rs_sw_params(snd_pcm_ioplug_t *io, snd_pcm_sw_params_t *params)
{
    rs_pcm *p = io->private_data;
    snd_pcm_sw_params_get_boundary(params, &p->boundary);
    snd_pcm_sw_params_get_stop_threshold(params, &p->stop_threshold);
    snd_pcm_sw_params_get_avail_min(params, &p->avail_min);
    if (p->avail_min < 1)
        p->avail_min = 1;
    return 0;
}

static int rs_prepare(snd_pcm_ioplug_t *io)
{
    rs_pcm *p = io->private_data;
    if (is_lost(p))
        return -ENODEV;
    p->running = 0;
    if (p->stream == RS_PLAYBACK) {
        int rc = rs_room_playback_prepare(p->room, p->rate);
        if (rc < 0)
            return rc;
        timer_now(p); /* a prepared playback stream is writable */
    } else {
        timer_stop(p);
        drain_timer(p);
    }
    return 0;
}

static int rs_pause(snd_pcm_ioplug_t *io, int enable)
{
    (void)io;
    (void)enable;
    return -ENOSYS;
}

static int rs_close(snd_pcm_ioplug_t *io)
{
    rs_pcm *p = io->private_data;
    if (p->running && p->stream == RS_PLAYBACK) {
        int64_t t0 = rs_now_ns();
        rs_room_playback_stop(p->room);
        int64_t t1 = rs_now_ns();
        if (t1 > t0)
            p->cpu_ns += (uint64_t)(t1 - t0);
    }
    rs_room_release(p->room, p->stream, p->cpu_ns);
    rs_input_close(&p->in);
    close(p->tfd);
    free(p);
    return 0;
}

static void rs_dump(snd_pcm_ioplug_t *io, snd_output_t *out)
{
    rs_pcm *p = io->private_data;
    snd_output_printf(out, "roomsim simulated sound card, room file %s\n",
                      p->cfg->path[0] ? p->cfg->path : "(none: defaults)");
    if (io->pcm && snd_pcm_state(io->pcm) != SND_PCM_STATE_OPEN) {
        snd_output_printf(out, "Its setup is:\n");
        snd_pcm_dump_setup(io->pcm, out);
    }
}

static const snd_pcm_ioplug_callback_t rs_callbacks = {
    .start = rs_start,
    .stop = rs_stop,
    .pointer = rs_pointer,
    .transfer = rs_transfer,
    .close = rs_close,
    .hw_params = rs_hw_params,
    .sw_params = rs_sw_params,
    .prepare = rs_prepare,
    .pause = rs_pause,
    .poll_revents = rs_poll_revents,
    .dump = rs_dump,
};

/* ---- opening ------------------------------------------------------------------------------ */

/* A relative `room` path is looked up next to each file named in ALSA_CONFIG_PATH. */
static void resolve_room_path(const char *room, char *out, size_t len)
{
    snprintf(out, len, "%s", room);
    if (room[0] == '/' || room[0] == '\0')
        return;
    const char *paths = getenv("ALSA_CONFIG_PATH");
    while (paths && *paths) {
        size_t l = strcspn(paths, ": ");
        const char *slash = memrchr(paths, '/', l);
        if (slash) {
            char candidate[PATH_MAX];
            snprintf(candidate, sizeof candidate, "%.*s/%s", (int)(slash - paths), paths, room);
            if (access(candidate, R_OK) == 0) {
                snprintf(out, len, "%s", candidate);
                return;
            }
        }
        paths += l;
        while (*paths == ':' || *paths == ' ')
            paths++;
    }
}

static int set_constraints(rs_pcm *p)
{
    static const unsigned access_list[] = { SND_PCM_ACCESS_RW_INTERLEAVED,
                                            SND_PCM_ACCESS_MMAP_INTERLEAVED };
    static const unsigned format_list[] = { SND_PCM_FORMAT_S16_LE, SND_PCM_FORMAT_FLOAT_LE };
    snd_pcm_ioplug_t *io = &p->io;
    unsigned max_ch = p->stream == RS_CAPTURE ? ROOMSIM_MAX_CAPTURE_CHANNELS
                                              : ROOMSIM_MAX_PLAYBACK_CHANNELS;
    int err;
    if ((err = snd_pcm_ioplug_set_param_list(io, SND_PCM_IOPLUG_HW_ACCESS, 2, access_list)) < 0 ||
        (err = snd_pcm_ioplug_set_param_list(io, SND_PCM_IOPLUG_HW_FORMAT, 2, format_list)) < 0 ||
        (err = snd_pcm_ioplug_set_param_minmax(io, SND_PCM_IOPLUG_HW_CHANNELS, 1, max_ch)) < 0 ||
        (err = snd_pcm_ioplug_set_param_minmax(io, SND_PCM_IOPLUG_HW_RATE, ROOMSIM_MIN_RATE,
                                               ROOMSIM_MAX_RATE)) < 0 ||
        (err = snd_pcm_ioplug_set_param_minmax(io, SND_PCM_IOPLUG_HW_PERIOD_BYTES, 32,
                                               1 << 20)) < 0 ||
        (err = snd_pcm_ioplug_set_param_minmax(io, SND_PCM_IOPLUG_HW_BUFFER_BYTES, 64,
                                               16 << 20)) < 0 ||
        (err = snd_pcm_ioplug_set_param_minmax(io, SND_PCM_IOPLUG_HW_PERIODS, 2, 1024)) < 0)
        return err;
    return 0;
}

SND_PCM_PLUGIN_DEFINE_FUNC(roomsim)
{
    (void)root;
    const char *room = "";
    snd_config_iterator_t i, next;
    snd_config_for_each(i, next, conf) {
        snd_config_t *n = snd_config_iterator_entry(i);
        const char *id;
        if (snd_config_get_id(n, &id) < 0)
            continue;
        if (!strcmp(id, "comment") || !strcmp(id, "type") || !strcmp(id, "hint"))
            continue;
        if (!strcmp(id, "room")) {
            if (snd_config_get_string(n, &room) < 0) {
                SNDERR("roomsim: `room` must be a string (path of a room file)");
                return -EINVAL;
            }
            continue;
        }
        SNDERR("roomsim: unknown parameter %s (known: room)", id);
        return -EINVAL;
    }

    rs_config cfg;
    rs_config_defaults(&cfg);
    const char *env = getenv(ROOMSIM_CONFIG_ENV);
    char path[PATH_MAX];
    resolve_room_path(env && *env ? env : room, path, sizeof path);
    if (path[0]) {
        int rc = rs_config_load(&cfg, path);
        if (rc < 0)
            return rc;
    }

    rs_pcm *p = calloc(1, sizeof *p);
    if (!p)
        return -ENOMEM;
    p->input_on = 1;
    p->stream = stream == SND_PCM_STREAM_CAPTURE ? RS_CAPTURE : RS_PLAYBACK;
    p->tfd = -1;
    int rc = rs_room_acquire(&cfg, p->stream, &p->room);
    if (rc < 0) {
        free(p);
        return rc;
    }
    p->cfg = rs_room_config(p->room);
    if (p->stream == RS_CAPTURE && p->cfg->scene[0]) {
        /* the talkers and noise of the scene, rendered once (docs/sim-card.md, "Scenes") */
        char rendered[PATH_MAX];
        rc = rs_scene_cached_render(p->cfg->scene, rendered, NULL);
        if (rc == 0)
            rc = rs_input_open(&p->in, rendered, RS_FILE_WAV, 1);
        if (rc < 0)
            goto fail;
    } else if (p->stream == RS_CAPTURE && p->cfg->input[0]) {
        rc = rs_input_open(&p->in, p->cfg->input, p->cfg->input_format, p->cfg->input_channels);
        if (rc < 0)
            goto fail;
        if (p->in.channels > 1 && p->cfg->input_mic_line > 0) {
            /* a multi-channel file already holds what each mic hears */
            rs_log("%s:%d: key '%s': only for a mono input, but %s has %u channels "
                   "(remove the key or use a mono input)",
                   p->cfg->path, p->cfg->input_mic_line, p->cfg->input_mic_key, p->cfg->input,
                   p->in.channels);
            rc = -EINVAL;
            goto fail;
        }
    }
    if (p->cfg->noise)
        p->noise_amp = (float)(32768.0 * pow(10.0, p->cfg->noise_dbfs / 20.0));

    p->tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    if (p->tfd < 0) {
        rc = -errno;
        goto fail;
    }
    p->io.version = SND_PCM_IOPLUG_VERSION;
    p->io.name = "roomsim simulated sound card";
    p->io.callback = &rs_callbacks;
    p->io.private_data = p;
    p->io.poll_fd = p->tfd;
    p->io.poll_events = POLLIN; /* a timerfd only becomes readable; revents are translated */
    p->io.flags = SND_PCM_IOPLUG_FLAG_MONOTONIC | SND_PCM_IOPLUG_FLAG_BOUNDARY_WA;
    p->io.mmap_rw = 0;
    rc = snd_pcm_ioplug_create(&p->io, name, stream, mode);
    if (rc < 0)
        goto fail;
    rc = set_constraints(p);
    if (rc < 0) {
        snd_pcm_ioplug_delete(&p->io); /* calls rs_close */
        return rc;
    }
    *pcmp = p->io.pcm;
    return 0;

fail:
    rs_room_release(p->room, p->stream, 0);
    rs_input_close(&p->in);
    if (p->tfd >= 0)
        close(p->tfd);
    free(p);
    return rc;
}

SND_PCM_PLUGIN_SYMBOL(roomsim);
