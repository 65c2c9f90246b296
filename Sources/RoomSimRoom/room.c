/* The room shared by the capture and playback streams of one room file in a process:
 * the echo path (speaker -> impulse response -> per-mic delay and gain, or with a scene the
 * speaker -> each mic's own image-source response), fault state
 * (device loss, control-file commands), the output file and the status file.
 *
 * Rooms are kept in a process-global list keyed by the room file path and live as long as
 * the process (a few hundred bytes each; the echo buffers are freed when no stream is
 * open), so a device loss and the counters survive the close/reopen that a loss forces.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rs_internal.h"

#define CONTROL_INTERVAL_NS 5000000 /* control file checked at most every 5 ms */

typedef struct stream_status {
    int known, open;
    int64_t start_ns, first_start_ns;
    rs_stream_info info;
    unsigned starts, xruns, xruns_injected;
    double skew_ppm;
    uint64_t position;
    /* playback: writes whose first frame was already due (a real card would have played stale
     * buffer contents there: an underrun ALSA cannot see when the pointer moves in whole
     * periods), and the smallest lead of any write over the play position, in µs */
    unsigned late_writes;
    int lead_known;
    double min_lead_us;
    uint64_t cpu_ns;          /* the plugin's own work for this stream, closed opens so far */
} stream_status;

struct rs_room {
    rs_room *next;
    pthread_mutex_t lock;
    char key[PATH_MAX];
    int users[2];
    rs_config cfg;            /* from the opener that started the current session */

    /* faults (persist across sessions) */
    int64_t epoch_ns;         /* first start of any stream: base of lose_at_ms */
    int loss_fired;
    int64_t lost_until_ns, loss_logged_until;
    unsigned losses, control_commands;
    int pending_xrun[2];
    double skew_ppm[2];
    int input_off;            /* control file `input off`: the talker at the mics stops */
    int mics_off;             /* control file `mics off`: the array is unplugged (all zeros) */
    int64_t stalled_from_ns, stalled_until_ns; /* control file `stall <ms>`: the clock stops */
    unsigned stalls;
    int64_t next_control_ns;

    stream_status st[2];
    rs_output out;

    /* echo path: speaker signal x -> conv -> echo ring indexed by speaker index g; one path
       heard by every mic at its own delay and gain, or (a scene) one path per mic */
    rs_conv *conv[RS_MAX_MICS];
    float *echo[RS_MAX_MICS];
    int paths;
    unsigned conv_rate;
    size_t ir_len;
    uint64_t echo_mask;
    uint64_t x_len;           /* speaker samples processed so far */
    float mic_gain[RS_MAX_MICS];
    int64_t mic_delay[RS_MAX_MICS]; /* in speaker samples */
    double delay_ns;
    /* the current (or last) playback run */
    int pb_has_run, pb_running;
    rs_clock pb_clock;
    uint64_t pb_g0, pb_next_g0, pb_run_end;
};

static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static rs_room *rooms;

/* alsa-lib may dlclose plugins (snd_config_update_free_global); the rooms must outlive that. */
static void pin_library(void)
{
    static int pinned;
    if (pinned)
        return;
    Dl_info info;
    if (dladdr((void *)&pin_library, &info) && info.dli_fname)
        if (dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD | RTLD_NODELETE))
            pinned = 1;
}

const rs_config *rs_room_config(const rs_room *room) { return &room->cfg; }

/* ---- status file ----------------------------------------------------------------------- */

static void write_status_locked(rs_room *r)
{
    if (!r->cfg.status[0])
        return;
    char buf[2048];
    size_t n = 0;
    n += snprintf(buf + n, sizeof buf - n, "roomsim version=%d config=%s\n",
                  ROOMSIM_STATUS_VERSION, r->cfg.path[0] ? r->cfg.path : "-");
    static const char *const names[2] = { "playback", "capture" };
    static const int order[2] = { RS_CAPTURE, RS_PLAYBACK };
    for (int i = 0; i < 2; i++) {
        const stream_status *s = &r->st[order[i]];
        if (!s->known)
            continue;
        n += snprintf(buf + n, sizeof buf - n,
                      "%s open=%d start_ns=%lld first_start_ns=%lld rate=%u channels=%u format=%s "
                      "period=%lu buffer=%lu starts=%u xruns=%u xruns_injected=%u skew_ppm=%g "
                      "%s=%llu cpu_ns=%llu",
                      names[order[i]], s->open, (long long)s->start_ns,
                      (long long)s->first_start_ns, s->info.rate, s->info.channels,
                      s->info.format ? s->info.format : "-", s->info.period, s->info.buffer,
                      s->starts, s->xruns, s->xruns_injected, s->skew_ppm,
                      order[i] == RS_CAPTURE ? "input_frame" : "speaker_index",
                      (unsigned long long)s->position, (unsigned long long)s->cpu_ns);
        if (order[i] == RS_PLAYBACK && n < sizeof buf) {
            if (s->lead_known)
                n += snprintf(buf + n, sizeof buf - n, " late_writes=%u min_lead_us=%.0f",
                              s->late_writes, s->min_lead_us);
            else
                n += snprintf(buf + n, sizeof buf - n, " late_writes=%u min_lead_us=-",
                              s->late_writes);
        }
        if (n < sizeof buf)
            n += snprintf(buf + n, sizeof buf - n, "\n");
    }
    int64_t now = rs_now_ns();
    n += snprintf(buf + n, sizeof buf - n,
                  "faults losses=%u lost=%d lost_until_ns=%lld control_commands=%u stalls=%u stalled=%d\n", r->losses,
                  now < r->lost_until_ns, (long long)r->lost_until_ns, r->control_commands, r->stalls,
                  now >= r->stalled_from_ns && now < r->stalled_until_ns);
    if (n >= sizeof buf)
        n = sizeof buf - 1;

    char tmp[PATH_MAX + 16];
    snprintf(tmp, sizeof tmp, "%s.tmp", r->cfg.status);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        rs_log("cannot write status file %s: %s", tmp, strerror(errno));
        return;
    }
    ssize_t w = write(fd, buf, n);
    close(fd);
    if (w != (ssize_t)n || rename(tmp, r->cfg.status) < 0)
        rs_log("cannot write status file %s", r->cfg.status);
}

/* ---- faults ---------------------------------------------------------------------------- */

static void update_loss_locked(rs_room *r, int64_t now)
{
    if (r->loss_fired || r->cfg.lose_at_ms < 0 || r->epoch_ns == 0)
        return;
    int64_t at = r->epoch_ns + (int64_t)(r->cfg.lose_at_ms * 1e6);
    if (now < at)
        return;
    r->loss_fired = 1;
    r->lost_until_ns = at + (int64_t)(r->cfg.lose_for_ms * 1e6);
    r->losses++;
    write_status_locked(r);
}

static int stream_word(const char *w, int *mask)
{
    if (!strcmp(w, "capture")) *mask = 1 << RS_CAPTURE;
    else if (!strcmp(w, "playback")) *mask = 1 << RS_PLAYBACK;
    else if (!strcmp(w, "both")) *mask = 3;
    else return 0;
    return 1;
}

static void run_command_locked(rs_room *r, char *line, int64_t now)
{
    char *words[4] = { 0 };
    int n = 0;
    for (char *save = NULL, *w = strtok_r(line, " \t\r", &save); w && n < 4;
         w = strtok_r(NULL, " \t\r", &save))
        words[n++] = w;
    if (n == 0 || words[0][0] == '#')
        return;
    char *end;
    int mask;
    if (!strcmp(words[0], "xrun") && n <= 2) {
        mask = 3;
        if (n == 2 && !stream_word(words[1], &mask))
            goto bad;
        for (int s = 0; s < 2; s++)
            if ((mask >> s & 1) && r->users[s])
                r->pending_xrun[s] = 1;
    } else if (!strcmp(words[0], "lose") && n == 2) {
        double ms = strtod(words[1], &end);
        if (*end || !(ms >= 0))
            goto bad;
        r->lost_until_ns = now + (int64_t)(ms * 1e6);
        r->losses++;
    } else if (!strcmp(words[0], "stall") && n == 2) {
        double ms = strtod(words[1], &end);
        if (*end || !(ms >= 0))
            goto bad;
        r->stalled_from_ns = now;
        r->stalled_until_ns = now + (int64_t)(ms * 1e6);
        r->stalls++;
    } else if (!strcmp(words[0], "input") && n == 2 && (!strcmp(words[1], "off") || !strcmp(words[1], "on"))) {
        r->input_off = !strcmp(words[1], "off");
    } else if (!strcmp(words[0], "mics") && n == 2 && (!strcmp(words[1], "off") || !strcmp(words[1], "on"))) {
        r->mics_off = !strcmp(words[1], "off");
    } else if (!strcmp(words[0], "skew") && (n == 2 || n == 3)) {
        mask = 1 << RS_CAPTURE;
        if (n == 3 && !stream_word(words[1], &mask))
            goto bad;
        double ppm = strtod(words[n - 1], &end);
        if (*end || !(ppm >= -10000 && ppm <= 10000))
            goto bad;
        for (int s = 0; s < 2; s++)
            if (mask >> s & 1)
                r->skew_ppm[s] = ppm;
    } else {
        goto bad;
    }
    r->control_commands++;
    write_status_locked(r);
    return;
bad:
    rs_log("%s: unknown control command '%s%s%s' (expected: xrun [capture|playback|both], "
           "lose <ms>, stall <ms>, skew [capture|playback] <ppm>, input off|on, mics off|on)",
           r->cfg.control, words[0], n > 1 ? " " : "", n > 1 ? words[1] : "");
}

static void check_control_locked(rs_room *r, int64_t now)
{
    if (!r->cfg.control[0] || now < r->next_control_ns)
        return;
    r->next_control_ns = now + CONTROL_INTERVAL_NS;
    int fd = open(r->cfg.control, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    char buf[1024];
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    unlink(r->cfg.control);
    if (n <= 0)
        return;
    buf[n] = '\0';
    for (char *save = NULL, *line = strtok_r(buf, "\n", &save); line;
         line = strtok_r(NULL, "\n", &save))
        run_command_locked(r, line, now);
}

int rs_room_poll_faults(rs_room *r, int stream, int64_t now, int *xrun, double *skew_ppm)
{
    pthread_mutex_lock(&r->lock);
    check_control_locked(r, now);
    update_loss_locked(r, now);
    int lost = now < r->lost_until_ns;
    *xrun = 0;
    if (!lost && r->pending_xrun[stream]) {
        *xrun = 1;
        r->pending_xrun[stream] = 0;
    }
    *skew_ppm = r->skew_ppm[stream];
    pthread_mutex_unlock(&r->lock);
    return lost ? -ENODEV : 0;
}

int64_t rs_room_clock_time(rs_room *r, int64_t now)
{
    pthread_mutex_lock(&r->lock);
    int64_t t = now >= r->stalled_from_ns && now < r->stalled_until_ns ? r->stalled_from_ns : now;
    pthread_mutex_unlock(&r->lock);
    return t;
}

int rs_room_input_on(rs_room *r)
{
    pthread_mutex_lock(&r->lock);
    int on = !r->input_off;
    pthread_mutex_unlock(&r->lock);
    return on;
}

int rs_room_mics_on(rs_room *r)
{
    pthread_mutex_lock(&r->lock);
    int on = !r->mics_off;
    pthread_mutex_unlock(&r->lock);
    return on;
}

int rs_room_is_lost(rs_room *r, int64_t now)
{
    pthread_mutex_lock(&r->lock);
    update_loss_locked(r, now);
    int lost = now < r->lost_until_ns;
    pthread_mutex_unlock(&r->lock);
    return lost;
}

/* ---- sessions ---------------------------------------------------------------------------- */

static void free_echo_locked(rs_room *r)
{
    for (int p = 0; p < RS_MAX_MICS; p++) {
        rs_conv_free(r->conv[p]);
        free(r->echo[p]);
        r->conv[p] = NULL;
        r->echo[p] = NULL;
    }
    r->paths = 0;
    r->conv_rate = 0;
    r->x_len = 0;
    r->pb_has_run = r->pb_running = 0;
    r->pb_g0 = r->pb_next_g0 = r->pb_run_end = 0;
}

int rs_room_acquire(const rs_config *cfg, int stream, rs_room **out)
{
    pin_library();
    pthread_mutex_lock(&registry_lock);
    rs_room *r = rooms;
    while (r && strcmp(r->key, cfg->path) != 0)
        r = r->next;
    if (!r) {
        r = calloc(1, sizeof *r);
        if (!r) {
            pthread_mutex_unlock(&registry_lock);
            return -ENOMEM;
        }
        pthread_mutex_init(&r->lock, NULL);
        snprintf(r->key, sizeof r->key, "%s", cfg->path);
        r->next = rooms;
        rooms = r;
    }
    pthread_mutex_unlock(&registry_lock);

    pthread_mutex_lock(&r->lock);
    int64_t now = rs_now_ns();
    update_loss_locked(r, now);
    if (now < r->lost_until_ns) {
        if (r->loss_logged_until != r->lost_until_ns) /* once per loss */
            rs_log("%s: device lost (simulated) for another %lld ms: open fails",
                   cfg->path[0] ? cfg->path : "roomsim",
                   (long long)(r->lost_until_ns - now) / 1000000);
        r->loss_logged_until = r->lost_until_ns;
        pthread_mutex_unlock(&r->lock);
        return -ENODEV;
    }
    if (r->users[0] + r->users[1] == 0) {
        /* a new session: take this opener's view of the room file */
        r->cfg = *cfg;
        r->skew_ppm[RS_CAPTURE] = cfg->skew_ppm[RS_CAPTURE];
        r->skew_ppm[RS_PLAYBACK] = cfg->skew_ppm[RS_PLAYBACK];
        r->pending_xrun[0] = r->pending_xrun[1] = 0;
    }
    if (stream == RS_PLAYBACK && r->cfg.output[0]) {
        int rc = 0;
        if (strcmp(r->out.path, r->cfg.output) != 0) { /* first time, or another file now */
            rs_output_close(&r->out);
            rc = rs_output_open(&r->out, r->cfg.output, r->cfg.output_format);
        } else {
            rc = rs_output_reopen(&r->out);
        }
        if (rc < 0) {
            pthread_mutex_unlock(&r->lock);
            return rc;
        }
    }
    r->users[stream]++;
    r->st[stream].known = 1;
    r->st[stream].open = 1;
    pthread_mutex_unlock(&r->lock);
    *out = r;
    return 0;
}

void rs_room_release(rs_room *r, int stream, uint64_t cpu_ns)
{
    pthread_mutex_lock(&r->lock);
    r->users[stream]--;
    r->st[stream].open = 0;
    r->st[stream].cpu_ns += cpu_ns;
    if (stream == RS_PLAYBACK)
        rs_output_sync(&r->out);
    write_status_locked(r);
    if (r->users[0] + r->users[1] == 0) {
        free_echo_locked(r);
        rs_output_close(&r->out);
    }
    pthread_mutex_unlock(&r->lock);
}

int rs_room_stream_setup(rs_room *r, int stream, const rs_stream_info *info)
{
    pthread_mutex_lock(&r->lock);
    r->st[stream].info = *info;
    int rc = 0;
    if (stream == RS_PLAYBACK)
        rc = rs_output_set_format(&r->out, info->channels, info->rate);
    pthread_mutex_unlock(&r->lock);
    return rc;
}

void rs_room_stream_started(rs_room *r, int stream, int64_t start_ns, int64_t first_start_ns,
                            double skew_ppm, uint64_t position)
{
    pthread_mutex_lock(&r->lock);
    stream_status *s = &r->st[stream];
    s->start_ns = start_ns;
    s->first_start_ns = first_start_ns;
    s->starts++;
    s->skew_ppm = skew_ppm;
    s->position = position;
    if (r->epoch_ns == 0)
        r->epoch_ns = start_ns;
    write_status_locked(r);
    pthread_mutex_unlock(&r->lock);
}

void rs_room_stream_xrun(rs_room *r, int stream, int injected)
{
    pthread_mutex_lock(&r->lock);
    if (injected)
        r->st[stream].xruns_injected++;
    else
        r->st[stream].xruns++;
    write_status_locked(r);
    pthread_mutex_unlock(&r->lock);
}

void rs_room_playback_lead(rs_room *r, double lead_us)
{
    pthread_mutex_lock(&r->lock);
    stream_status *s = &r->st[RS_PLAYBACK];
    if (!s->lead_known || lead_us < s->min_lead_us) {
        s->min_lead_us = lead_us;
        s->lead_known = 1;
    }
    if (lead_us < 0) {
        s->late_writes++;
        write_status_locked(r);
    }
    pthread_mutex_unlock(&r->lock);
}

/* ---- echo path ----------------------------------------------------------------------------- */

/* The impulse response at `rate`: none (a unit impulse), generated, or from a WAV file. */
static float *make_ir(const rs_config *c, unsigned rate, size_t *len)
{
    float *h;
    if (c->ir_mode == RS_IR_FILE) {
        float *raw;
        size_t n;
        unsigned file_rate;
        if (rs_wav_read_mono(c->ir_file, &raw, &n, &file_rate) < 0)
            return NULL;
        if (file_rate == rate) {
            *len = n;
            return raw;
        }
        /* linear interpolation to the playback rate */
        size_t m = (size_t)((double)n * rate / file_rate);
        if (m == 0)
            m = 1;
        h = malloc(m * sizeof *h);
        for (size_t i = 0; h && i < m; i++) {
            double src = (double)i * file_rate / rate;
            size_t a = (size_t)src;
            double f = src - a;
            h[i] = (float)(raw[a] * (1 - f) + (a + 1 < n ? raw[a + 1] : 0.0f) * f);
        }
        free(raw);
        *len = m;
        return h;
    }
    if (c->ir_mode == RS_IR_NONE) {
        h = malloc(sizeof *h);
        if (h) h[0] = 1.0f;
        *len = 1;
        return h;
    }
    /* generated: direct path (1.0 at tap 0) + exponentially decaying noise, 60 dB down
     * after rt60, scaled to the direct-to-reverberant energy ratio ir_drr_db */
    size_t n = (size_t)llround(c->ir_length_ms * rate / 1000.0);
    if (n < 1)
        n = 1;
    h = calloc(n, sizeof *h);
    if (!h)
        return NULL;
    double decay = log(1000.0) / (c->ir_rt60_ms / 1000.0), energy = 0;
    for (size_t i = 1; i < n; i++) {
        double v = rs_gauss(rs_mix64(((uint64_t)c->ir_seed << 32) ^ i)) * exp(-decay * i / rate);
        h[i] = (float)v;
        energy += v * v;
    }
    double scale = energy > 0 ? sqrt(pow(10.0, -c->ir_drr_db / 10.0) / energy) : 0;
    for (size_t i = 1; i < n; i++)
        h[i] = (float)(h[i] * scale);
    h[0] = 1.0f;
    *len = n;
    return h;
}

/* The scene's speaker -> mic responses at `rate`, one path per mic. */
static int scene_paths_locked(rs_room *r, unsigned rate, size_t *len)
{
    rs_scene scene;
    int rc = rs_scene_load(&scene, r->cfg.scene);
    if (rc < 0)
        return rc;
    size_t n = rs_scene_ir_length(&scene, rate);
    double at[3];
    for (int a = 0; a < 3; a++)
        at[a] = scene.array[a] + scene.speaker[a];
    for (int m = 0; m < scene.mics; m++) {
        float *ir = rs_scene_ir(&scene, at, m, rate, n);
        const float g = (float)rs_scene_mic_gain(&scene, m);
        for (size_t i = 0; ir && g != 1.0f && i < n; i++)
            ir[i] *= g;
        r->conv[m] = ir ? rs_conv_new(ir, n) : NULL;
        free(ir);
        if (!r->conv[m])
            return -ENOMEM;
    }
    r->paths = scene.mics;
    *len = n;
    return 0;
}

int rs_room_playback_prepare(rs_room *r, unsigned rate)
{
    pthread_mutex_lock(&r->lock);
    int rc = 0;
    if (r->cfg.echo && (!r->paths || r->conv_rate != rate)) {
        free_echo_locked(r);
        size_t len = 0;
        double max_delay_s = 0;
        if (r->cfg.scene[0]) {
            rc = scene_paths_locked(r, rate, &len);
            for (int m = 0; m < RS_MAX_MICS; m++) {
                r->mic_delay[m] = 0; /* in the responses */
                r->mic_gain[m] = (float)pow(10.0, r->cfg.echo_gain_db / 20.0);
            }
        } else {
            float *ir = make_ir(&r->cfg, rate, &len);
            for (int m = 0; m < RS_MAX_MICS; m++) {
                double d = r->cfg.mic_delay_in_ms ? r->cfg.mic_delay[m] * rate / 1000.0
                                                  : r->cfg.mic_delay[m];
                r->mic_delay[m] = llround(d);
                r->mic_gain[m] = (float)(r->cfg.mic_gain[m] * pow(10.0, r->cfg.echo_gain_db / 20.0));
                if (d / rate > max_delay_s)
                    max_delay_s = d / rate;
            }
            r->conv[0] = ir ? rs_conv_new(ir, len) : NULL;
            r->paths = 1;
            free(ir);
            if (!r->conv[0])
                rc = -EINVAL;
        }
        /* history for late capture reads: 1 s + delays + the IR. A reader later than that has
           overrun any buffer roomd configures (tens of ms) and arecord's default (0.5 s); each
           extra second is 192 KB at 48 kHz (per path) that stays resident in roomd once written. */
        double need = rate * (1.0 + r->cfg.echo_delay_ms / 1000.0 + max_delay_s) + (double)len;
        uint64_t size = 1;
        while ((double)size < need)
            size <<= 1;
        for (int p = 0; rc == 0 && p < r->paths; p++)
            if (!(r->echo[p] = calloc(size, sizeof(float))))
                rc = -ENOMEM;
        if (rc < 0) {
            rs_log("cannot set up the echo path (%s)",
                   r->cfg.scene[0] ? r->cfg.scene
                   : r->cfg.ir_mode == RS_IR_FILE ? r->cfg.ir_file : "generated impulse response");
            free_echo_locked(r);
            rc = -EINVAL;
        } else {
            r->echo_mask = size - 1;
            r->ir_len = len;
            r->conv_rate = rate;
            r->delay_ns = r->cfg.echo_delay_ms * 1e6;
        }
    }
    r->pb_next_g0 = r->x_len;
    pthread_mutex_unlock(&r->lock);
    return rc;
}

/* Runs count speaker samples (NULL = zeros) through the IR(s) into the echo ring(s). */
static void feed_locked(rs_room *r, const float *mono, size_t count)
{
    static const float zeros[256];
    while (count > 0) {
        size_t n = count < 256 ? count : 256;
        for (int p = 0; p < r->paths; p++) {
            float out[256];
            rs_conv_process(r->conv[p], mono ? mono : zeros, out, n);
            float *echo = r->echo[p];
            for (size_t i = 0; i < n; i++)
                echo[(r->x_len + i) & r->echo_mask] = out[i];
        }
        r->x_len += n;
        count -= n;
        if (mono)
            mono += n;
    }
}

uint64_t rs_room_playback_start(rs_room *r, const rs_clock *clock)
{
    pthread_mutex_lock(&r->lock);
    r->pb_clock = *clock;
    r->pb_g0 = r->pb_next_g0;
    r->pb_has_run = r->pb_running = 1;
    r->pb_run_end = UINT64_MAX;
    uint64_t g0 = r->pb_g0;
    pthread_mutex_unlock(&r->lock);
    return g0;
}

void rs_room_playback_clock(rs_room *r, const rs_clock *clock)
{
    pthread_mutex_lock(&r->lock);
    r->pb_clock = *clock;
    pthread_mutex_unlock(&r->lock);
}

void rs_room_playback_stop(rs_room *r)
{
    pthread_mutex_lock(&r->lock);
    if (r->pb_running && r->paths) {
        /* let the room ring out: the tail of the last sound stays audible */
        feed_locked(r, NULL, r->ir_len);
        r->pb_run_end = r->x_len;
        r->pb_next_g0 = r->x_len;
    }
    r->pb_running = 0;
    rs_output_sync(&r->out);
    pthread_mutex_unlock(&r->lock);
}

void rs_room_playback_write(rs_room *r, uint64_t n, const int16_t *frames, unsigned channels,
                            const float *mono, size_t count)
{
    pthread_mutex_lock(&r->lock);
    if (r->out.f && r->out.channels == channels && rs_output_write(&r->out, frames, count) < 0) {
        rs_log("%s: write failed: playback output stops here", r->out.path);
        rs_output_close(&r->out);
    }
    if (r->paths) {
        uint64_t g = r->pb_next_g0 + n;
        if (g < r->x_len) { /* late (after an underrun): that time has passed */
            uint64_t skip = r->x_len - g;
            if (skip >= count)
                count = 0;
            else {
                mono += skip;
                count -= skip;
            }
        } else if (g > r->x_len) { /* a gap (snd_pcm_forward): silence */
            uint64_t gap = g - r->x_len;
            feed_locked(r, NULL, gap > r->echo_mask ? r->echo_mask : gap);
            r->x_len = g;
        }
        feed_locked(r, mono, count);
    }
    pthread_mutex_unlock(&r->lock);
}

/* llround(x) without the libm call (once per capture frame): the same result for every x. */
static inline int64_t round_half_away(double x)
{
    if (!(fabs(x) < 4.0e18))
        return llround(x);
    int64_t i = (int64_t)x;            /* toward zero */
    double frac = x - (double)i;       /* exact: |x| < 2^52, or x is whole */
    if (frac >= 0.5)
        i++;
    else if (frac <= -0.5)
        i--;
    return i;
}

/* Where, on the speaker's clock, capture frame j hears the speaker: it was recorded at t and
 * hears what was played at t - delay. */
static inline double echo_position(const rs_room *r, const rs_clock *clock, uint64_t j)
{
    double t = rs_clock_time(clock, (double)j) - r->delay_ns;
    return rs_clock_pos(&r->pb_clock, t);
}

void rs_room_capture_echo(rs_room *r, const rs_clock *clock, uint64_t j0, size_t count,
                          unsigned channels, float *acc)
{
    pthread_mutex_lock(&r->lock);
    if (!r->paths || !r->pb_has_run) {
        pthread_mutex_unlock(&r->lock);
        return;
    }
    uint64_t end = r->x_len < r->pb_run_end ? r->x_len : r->pb_run_end;
    uint64_t oldest = r->x_len > r->echo_mask ? r->x_len - r->echo_mask : 0;
    if (count > 1) {
        /* The speaker sample a capture frame hears is k0 + f for the whole run when the mapping
         * rounds to the same offset from f at both ends, away from a rounding boundary: the
         * offset moves monotonically within a run (by the clocks' skew; float noise is ~1e-5
         * sample), so every frame in between rounds alike — the same k as the per-frame loop
         * below, without its clock arithmetic (a division) per frame and its branches per
         * sample. */
        double x0 = echo_position(r, clock, j0), x1 = echo_position(r, clock, j0 + count - 1);
        int64_t k0 = round_half_away(x0), k1 = round_half_away(x1);
        if (k1 - k0 == (int64_t)count - 1 && fabs(x0 - (double)k0) < 0.499 && fabs(x1 - (double)k1) < 0.499) {
            for (unsigned m = 0; m < channels; m++) {
                const int64_t km0 = k0 - r->mic_delay[m];         /* at f = 0 */
                const int64_t g0 = (int64_t)r->pb_g0 + km0;
                int64_t lo = 0, hi = (int64_t)count;
                if (-km0 > lo) lo = -km0;                          /* before the speaker started */
                if ((int64_t)oldest - g0 > lo) lo = (int64_t)oldest - g0; /* too old */
                if ((int64_t)end - g0 < hi) hi = (int64_t)end - g0;       /* not played (yet) */
                const float gain = r->mic_gain[m];
                const float *echo = r->echo[m % (unsigned)r->paths];
                for (int64_t f = lo; f < hi; f++)
                    acc[(size_t)f * channels + m] += echo[(uint64_t)(g0 + f) & r->echo_mask] * gain * 32768.0f;
            }
            pthread_mutex_unlock(&r->lock);
            return;
        }
    }
    for (size_t f = 0; f < count; f++) {
        /* capture sample j was recorded at t; it hears speaker sample k played at t - delay */
        int64_t k = round_half_away(echo_position(r, clock, j0 + f));
        for (unsigned m = 0; m < channels; m++) {
            int64_t km = k - r->mic_delay[m];
            if (km < 0)
                continue; /* before the speaker started */
            uint64_t g = r->pb_g0 + (uint64_t)km;
            if (g >= end || g < oldest)
                continue; /* not played (yet), or too old */
            acc[f * channels + m] += r->echo[m % (unsigned)r->paths][g & r->echo_mask] * r->mic_gain[m] * 32768.0f;
        }
    }
    pthread_mutex_unlock(&r->lock);
}
