/* Scene files: people, noise and the speaker placed in a shoebox room around the mic array, so
 * that the simulated card hears a talker 2 m away in a reverberant room the way the board would
 * (docs/sim-card.md, "Scenes"). Every source reaches every mic through its own image-source
 * impulse response (ism.c). The talkers and noise do not depend on what the application does,
 * so they are rendered once into a multi-channel WAV that the capture stream reads like any
 * input file (kept in .roomsim-cache/ beside the scene); the speaker's echo depends on what is
 * played, so room.c convolves it at run time with the speaker -> mic responses of the scene.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "rs_internal.h"

#define WALK_STEP_S 0.25   /* a walking talker's response is recomputed this often */

/* ---- parsing ------------------------------------------------------------------------------ */

static const char *parse_xyz(const char *v, double out[3], double min, double max)
{
    double p[RS_MAX_MICS];
    int n = 0;
    static __thread char expected[96];
    snprintf(expected, sizeof expected, "three numbers x y z in %g..%g (metres)", min, max);
    if (rs_parse_list(v, min, max, 3, p, &n) || n != 3)
        return expected;
    memcpy(out, p, 3 * sizeof *p);
    return NULL;
}

/* "x y z @ t, x y z @ t, ...": the waypoints of a walking talker, times increasing. */
static const char *parse_path_points(const char *v, rs_scene_talker *t)
{
    static const char *expected =
        "waypoints 'x y z @ seconds' separated by ';', times increasing (at most 16)";
    char buf[1024];
    if (strlen(v) >= sizeof buf)
        return expected;
    strcpy(buf, v);
    int n = 0;
    for (char *save = NULL, *item = strtok_r(buf, ";", &save); item;
         item = strtok_r(NULL, ";", &save)) {
        char *at = strchr(item, '@');
        if (!at || n == RS_SCENE_MAX_POINTS)
            return expected;
        *at = '\0';
        while (*item == ' ' || *item == '\t')
            item++;
        char *e = at;
        while (e > item && (e[-1] == ' ' || e[-1] == '\t'))
            *--e = '\0';
        char *time = at + 1;
        while (*time == ' ' || *time == '\t')
            time++;
        e = time + strlen(time);
        while (e > time && (e[-1] == ' ' || e[-1] == '\t'))
            *--e = '\0';
        if (parse_xyz(item, t->path[n].p, 0, 100) ||
            rs_parse_number(time, 0, 86400, &t->path[n].t) ||
            (n > 0 && !(t->path[n].t > t->path[n - 1].t)))
            return expected;
        n++;
    }
    if (n == 0)
        return expected;
    t->points = n;
    return NULL;
}

/* "talker3_at" -> base "talker", index 2, suffix "_at". 0 when k is not of that form. */
static int numbered(const char *k, const char *base, int max, int *index, const char **suffix)
{
    size_t bl = strlen(base);
    if (strncmp(k, base, bl) != 0 || !(k[bl] >= '1' && k[bl] <= '9'))
        return 0;
    char *end;
    long i = strtol(k + bl, &end, 10);
    if (i < 1 || i > max)
        return 0;
    *index = (int)i - 1;
    *suffix = end;
    return 1;
}

static const char *apply(const rs_kv_ctx *ctx, void *target, const char *k, char *v)
{
    rs_scene *s = target;
    int i;
    const char *suffix;
    if (!strcmp(k, "room")) {
        s->room_line = ctx->line;
        return parse_xyz(v, s->room, 1.0, 100);
    }
    if (!strcmp(k, "rt60_ms")) {
        s->decay_line = ctx->line;
        s->absorption = -1;
        return rs_parse_number(v, 50, 5000, &s->rt60_ms);
    }
    if (!strcmp(k, "absorption")) {
        s->decay_line = ctx->line;
        s->rt60_ms = -1;
        return rs_parse_number(v, 0.01, 1, &s->absorption);
    }
    if (!strcmp(k, "array")) {
        s->array_line = ctx->line;
        return parse_xyz(v, s->array, 0, 100);
    }
    if (!strncmp(k, "mic", 3) && k[3] >= '0' && k[3] <= '7' && k[4] == '\0') {
        s->mic_line[k[3] - '0'] = ctx->line;
        return parse_xyz(v, s->mic[k[3] - '0'], -1, 1);
    }
    if (!strncmp(k, "mic", 3) && k[3] >= '0' && k[3] <= '7' && !strcmp(k + 4, "_gain_db")) {
        s->mic_gain_line[k[3] - '0'] = ctx->line;
        return rs_parse_number(v, -20, 20, &s->mic_gain_db[k[3] - '0']);
    }
    if (!strcmp(k, "speaker")) {
        s->speaker_line = ctx->line;
        return parse_xyz(v, s->speaker, -1, 1);
    }
    if (!strcmp(k, "rate")) return rs_parse_uint(v, ROOMSIM_MIN_RATE, ROOMSIM_MAX_RATE, &s->rate);
    if (!strcmp(k, "duration_s")) return rs_parse_number(v, 0, 3600, &s->duration_s);
    if (!strcmp(k, "ir_ms")) return rs_parse_number(v, 10, 3000, &s->ir_ms);
    if (!strcmp(k, "highpass_hz")) return rs_parse_number(v, 0, 1000, &s->highpass_hz);
    if (numbered(k, "talker", RS_SCENE_MAX_TALKERS, &i, &suffix)) {
        rs_scene_talker *t = &s->talker[i];
        if (!*suffix) {
            t->line = ctx->line;
            return rs_parse_path(ctx, v, t->file, 0);
        }
        if (!strcmp(suffix, "_at")) {
            t->at_line = ctx->line;
            t->points = 1;
            t->path[0].t = 0;
            return parse_xyz(v, t->path[0].p, 0, 100);
        }
        if (!strcmp(suffix, "_path")) {
            t->at_line = ctx->line;
            return parse_path_points(v, t);
        }
        if (!strcmp(suffix, "_start_s")) return rs_parse_number(v, 0, 86400, &t->start_s);
        if (!strcmp(suffix, "_gain_db")) return rs_parse_number(v, -60, 40, &t->gain_db);
        return "";
    }
    if (numbered(k, "noise", RS_SCENE_MAX_NOISES, &i, &suffix)) {
        rs_scene_noise *n = &s->noise[i];
        if (!*suffix) {
            n->line = ctx->line;
            static const char *const kinds[] = { "white", "pink", "brown", "vent", "fan", NULL };
            for (int kd = 0; kinds[kd]; kd++)
                if (!strcmp(v, kinds[kd])) {
                    n->kind = kd;
                    return NULL;
                }
            n->kind = RS_NOISE_FILE;
            const char *err = rs_parse_path(ctx, v, n->file, 0);
            return err ? "white, pink, brown, vent, fan or a WAV file" : NULL;
        }
        if (!strcmp(suffix, "_at")) {
            n->at_line = ctx->line;
            n->diffuse = !strcmp(v, "diffuse");
            return n->diffuse ? NULL : parse_xyz(v, n->at, 0, 100) ? "x y z (metres) or diffuse" : NULL;
        }
        if (!strcmp(suffix, "_snr_db") || !strcmp(suffix, "_dbfs")) {
            n->level_line = ctx->line;
            n->level_is_snr = !strcmp(suffix, "_snr_db");
            return n->level_is_snr ? rs_parse_number(v, -40, 100, &n->level_db)
                                   : rs_parse_number(v, -140, 0, &n->level_db);
        }
        if (!strcmp(suffix, "_seed")) return rs_parse_uint(v, 0, UINT_MAX, &n->seed);
        return "";
    }
    return "";
}

static double calibrate_beta(const rs_scene *s);

static int inside(const rs_scene *s, const double p[3])
{
    for (int a = 0; a < 3; a++)
        if (!(p[a] > 0 && p[a] < s->room[a]))
            return 0;
    return 1;
}

static int fail(const rs_scene *s, int line, const char *key, const char *what)
{
    if (line > 0)
        rs_log("%s:%d: key '%s': %s", s->path, line, key, what);
    else
        rs_log("%s: key '%s' missing: %s", s->path, key, what);
    return -EINVAL;
}

/* Parses and checks; the walls' reflection is found (calibrate_beta: several image sums) only
 * when `calibrate`, since a cached rendering does not need it. */
static int scene_load(rs_scene *s, const char *path, int calibrate)
{
    memset(s, 0, sizeof *s);
    s->rt60_ms = s->absorption = -1;
    s->rate = 48000;
    s->highpass_hz = 50;
    snprintf(s->path, sizeof s->path, "%s", path);
    for (int i = 0; i < RS_SCENE_MAX_NOISES; i++)
        s->noise[i].seed = (unsigned)i + 1;
    int rc = rs_kv_load(path, "scene file", apply, s);
    if (rc < 0)
        return rc;
    char key[32];
    if (!s->room_line)
        return fail(s, 0, "room", "the room's size, x y z in metres");
    if (s->decay_line == 0)
        return fail(s, 0, "rt60_ms", "the reverberation time (or `absorption`)");
    if (!s->array_line)
        return fail(s, 0, "array", "the array centre's position in the room, x y z in metres");
    double centre[3];
    memcpy(centre, s->array, sizeof centre);
    if (!inside(s, centre))
        return fail(s, s->array_line, "array", "outside the room");
    while (s->mics < RS_MAX_MICS && s->mic_line[s->mics])
        s->mics++;
    if (s->mics == 0)
        return fail(s, 0, "mic0", "each mic's position relative to the array centre, x y z in metres");
    for (int m = s->mics; m < RS_MAX_MICS; m++)
        if (s->mic_line[m]) {
            snprintf(key, sizeof key, "mic%d", m);
            return fail(s, s->mic_line[m], key, "mics are numbered from mic0 without gaps");
        }
    for (int m = s->mics; m < RS_MAX_MICS; m++)
        if (s->mic_gain_line[m]) {
            snprintf(key, sizeof key, "mic%d_gain_db", m);
            return fail(s, s->mic_gain_line[m], key, "no such mic (its micN position is not given)");
        }
    for (int m = 0; m < s->mics; m++) {
        double p[3] = { centre[0] + s->mic[m][0], centre[1] + s->mic[m][1], centre[2] + s->mic[m][2] };
        if (!inside(s, p)) {
            snprintf(key, sizeof key, "mic%d", m);
            return fail(s, s->mic_line[m], key, "puts the mic outside the room");
        }
    }
    double spk[3] = { centre[0] + s->speaker[0], centre[1] + s->speaker[1], centre[2] + s->speaker[2] };
    if (!inside(s, spk))
        return fail(s, s->speaker_line, "speaker", "puts the speaker outside the room");
    int talkers = 0;
    for (int i = 0; i < RS_SCENE_MAX_TALKERS; i++) {
        const rs_scene_talker *t = &s->talker[i];
        if (!t->line && !t->at_line)
            continue;
        snprintf(key, sizeof key, "talker%d", i + 1);
        if (!t->line)
            return fail(s, 0, key, "the talker's speech file (mono PCM16 WAV at the scene's rate)");
        if (!t->at_line) {
            snprintf(key, sizeof key, "talker%d_at", i + 1);
            return fail(s, 0, key, "where the talker is (or talkerN_path for one who walks)");
        }
        for (int p = 0; p < t->points; p++)
            if (!inside(s, t->path[p].p)) {
                snprintf(key, sizeof key, "talker%d_%s", i + 1, t->points > 1 ? "path" : "at");
                return fail(s, t->at_line, key, "outside the room");
            }
        talkers++;
    }
    for (int i = 0; i < RS_SCENE_MAX_NOISES; i++) {
        const rs_scene_noise *n = &s->noise[i];
        if (!n->line && !n->at_line && !n->level_line)
            continue;
        snprintf(key, sizeof key, "noise%d", i + 1);
        if (!n->line)
            return fail(s, 0, key, "the noise: white, pink, brown, vent, fan or a WAV file");
        snprintf(key, sizeof key, "noise%d_at", i + 1);
        if (!n->at_line)
            return fail(s, 0, key, "where the noise comes from: x y z, or diffuse");
        if (!n->diffuse && !inside(s, n->at))
            return fail(s, n->at_line, key, "outside the room");
        snprintf(key, sizeof key, "noise%d_snr_db", i + 1);
        if (!n->level_line)
            return fail(s, 0, key, "the noise's level at mic 0 (noiseN_snr_db or noiseN_dbfs)");
        if (n->level_is_snr && talkers == 0)
            return fail(s, n->level_line, key, "an SNR needs a talker (use noiseN_dbfs)");
    }
    s->beta = s->absorption > 0 ? sqrt(1.0 - s->absorption) : calibrate ? calibrate_beta(s) : 0;
    return 0;
}

int rs_scene_load(rs_scene *s, const char *path) { return scene_load(s, path, 1); }

double rs_scene_beta(const rs_scene *s) { return s->beta; }

/* The reflection coefficient whose responses decay in rt60 as measured (T20). Eyring's formula
 * is the first guess, but a specular shoebox decays slower than it says (measured 8-38 % slower
 * for 0.3-0.8 s rooms, in agreement with pyroomacoustics: docs/sim-card.md), so the guess is
 * corrected from the decay of a response from a third of the way across the room to the array
 * centre: the decay rate goes with -ln(beta), so ln(beta) is scaled by target / measured until
 * they agree within 1 %. */
static double calibrate_beta(const rs_scene *s)
{
    const double rate = 8000, target = s->rt60_ms / 1000.0;
    double beta = rs_ism_beta_for_rt60(s->room, target);
    const double src[3] = { s->room[0] / 3, s->room[1] / 3, s->room[2] * 2 / 3 };
    size_t n = (size_t)(rate * (1.2 * target + 0.05));
    float *h = malloc(n * sizeof *h);
    if (!h)
        return beta;
    for (int i = 0; i < 6; i++) {
        rs_ism_ir(s->room, beta, src, s->array, rate, h, n);
        if (s->highpass_hz > 0) /* as the responses are used: without it, the sum of the */
            rs_highpass(h, n, s->highpass_hz, rate); /* images' 0 Hz part decays slower */
        double t = rs_ir_t20(h, n, rate);
        if (t <= 0 || fabs(t / target - 1.0) < 0.01)
            break;
        beta = exp(log(beta) * t / target);
        if (beta > 0.9999)
            beta = 0.9999;
    }
    free(h);
    return beta;
}

size_t rs_scene_ir_length(const rs_scene *s, double rate)
{
    double ms = s->ir_ms > 0   ? s->ir_ms
                : s->rt60_ms > 0 ? s->rt60_ms
                                 : rs_ism_rt60_for_beta(s->room, s->beta) * 1000.0;
    /* plus the longest direct path (the room's diagonal) */
    double diag = sqrt(s->room[0] * s->room[0] + s->room[1] * s->room[1] + s->room[2] * s->room[2]);
    ms += diag / RS_SOUND_SPEED * 1000.0;
    if (ms > 3000)
        ms = 3000;
    return (size_t)ceil(ms * rate / 1000.0);
}

float *rs_scene_ir(const rs_scene *s, const double src[3], int mic, double rate, size_t n)
{
    float *h = malloc(n * sizeof *h);
    if (!h)
        return NULL;
    double p[3];
    for (int a = 0; a < 3; a++)
        p[a] = s->array[a] + s->mic[mic][a];
    rs_ism_ir(s->room, rs_scene_beta(s), src, p, rate, h, n);
    if (s->highpass_hz > 0)
        rs_highpass(h, n, s->highpass_hz, rate);
    return h;
}

/* ---- rendering ------------------------------------------------------------------------------ */

/* Where a talker is at scene time t (seconds): piecewise linear between waypoints. */
static void talker_position(const rs_scene_talker *t, double time, double out[3])
{
    const rs_scene_point *pt = t->path;
    if (t->points == 1 || time <= pt[0].t) {
        memcpy(out, pt[0].p, 3 * sizeof(double));
        return;
    }
    for (int i = 1; i < t->points; i++)
        if (time <= pt[i].t) {
            double f = (time - pt[i - 1].t) / (pt[i].t - pt[i - 1].t);
            for (int a = 0; a < 3; a++)
                out[a] = pt[i - 1].p[a] + f * (pt[i].p[a] - pt[i - 1].p[a]);
            return;
        }
    memcpy(out, pt[t->points - 1].p, 3 * sizeof(double));
}

/* A cross-fade weight: 1, except rising linearly from `rise` to `peak` and falling from `peak`
 * to `fall` where those are switched on (sample times). */
typedef struct hat {
    int rises, falls;
    double rise, peak, fall;
} hat;

static double hat_at(const hat *w, double u)
{
    if (w->rises && u < w->peak)
        return u <= w->rise ? 0.0 : (u - w->rise) / (w->peak - w->rise);
    if (w->falls && u > w->peak)
        return u >= w->fall ? 0.0 : (w->fall - u) / (w->fall - w->peak);
    return 1.0;
}

/* out[t] += w(t) * (x * h)(t) for t in [from, to): x is `len` samples long, starting at sample
 * `offset`, zero elsewhere. Feeds the convolver from the response's length before `from`, so the
 * room is already ringing there. */
static int convolve_span(const float *h, size_t hlen, const float *x, size_t len, long offset,
                         float *out, size_t from, size_t to, const hat *w)
{
    rs_conv *c = rs_conv_new(h, hlen);
    if (!c)
        return -ENOMEM;
    enum { CHUNK = 4096 };
    float in[CHUNK], y[CHUNK];
    size_t t = from > hlen ? from - hlen : 0;
    while (t < to) {
        size_t n = to - t < CHUNK ? to - t : CHUNK;
        for (size_t i = 0; i < n; i++) {
            long k = (long)(t + i) - offset;
            in[i] = k >= 0 && (size_t)k < len ? x[k] : 0.0f;
        }
        rs_conv_process(c, in, y, n);
        for (size_t i = 0; i < n; i++) {
            size_t u = t + i;
            if (u >= from)
                out[u] += (float)(hat_at(w, (double)u) * y[i]);
        }
        t += n;
    }
    rs_conv_free(c);
    return 0;
}

/* Adds the talker's sound at every mic: one response per mic for a talker who sits; for one
 * who walks, responses every WALK_STEP_S along the path, cross-faded (each weighted by a hat
 * that peaks at its own time and reaches the neighbours' peaks). */
/* A talker's speech file at the scene's rate, its gain applied. malloc'ed; NULL after a message. */
static float *load_talker(const rs_scene *s, const rs_scene_talker *t, size_t *len)
{
    float *x;
    unsigned rate;
    if (rs_wav_read_mono(t->file, &x, len, &rate) < 0)
        return NULL;
    if (rate != s->rate) {
        rs_log("%s: talker file %s is %u Hz, the scene renders at %u Hz (convert it, or set `rate`)",
               s->path, t->file, rate, s->rate);
        free(x);
        return NULL;
    }
    float gain = (float)pow(10.0, t->gain_db / 20.0);
    for (size_t i = 0; i < *len; i++)
        x[i] *= gain;
    return x;
}

static int render_talker(const rs_scene *s, const rs_scene_talker *t, const float *x, size_t len,
                         float **mics, size_t frames, size_t hlen)
{
    const long offset = lround(t->start_s * s->rate);
    /* the times (in samples) at which a response is computed */
    double times[1024];
    int steps = 1;
    times[0] = t->path[0].t * s->rate;
    if (t->points > 1) {
        double t0 = t->path[0].t, t1 = t->path[t->points - 1].t;
        steps = (int)ceil((t1 - t0) / WALK_STEP_S) + 1;
        if (steps > 1024)
            steps = 1024;
        for (int k = 0; k < steps; k++)
            times[k] = (t0 + (t1 - t0) * k / (steps - 1)) * s->rate;
    }
    int rc = 0;
    for (int k = 0; k < steps && rc == 0; k++) {
        double pos[3];
        talker_position(t, times[k] / s->rate, pos);
        const hat w = { k > 0, k + 1 < steps, k > 0 ? times[k - 1] : 0, times[k],
                        k + 1 < steps ? times[k + 1] : 0 };
        size_t from = w.rises ? (size_t)floor(w.rise) : 0;
        size_t to = w.falls ? (size_t)ceil(w.fall) + 1 : frames;
        if (to > frames)
            to = frames;
        for (int m = 0; m < s->mics && rc == 0 && from < to; m++) {
            float *h = rs_scene_ir(s, pos, m, s->rate, hlen);
            if (!h)
                return -ENOMEM;
            rc = convolve_span(h, hlen, x, len, offset, mics[m], from, to, &w);
            free(h);
        }
    }
    return rc;
}

/* One noise signal, deterministic in (kind, seed): n samples at `rate`. */
static float *noise_signal(const rs_scene *s, const rs_scene_noise *nz, unsigned seed, size_t n)
{
    float *x = calloc(n ? n : 1, sizeof *x);
    if (!x)
        return NULL;
    const double rate = s->rate;
    if (nz->kind == RS_NOISE_FILE) {
        float *f;
        size_t len;
        unsigned r;
        if (rs_wav_read_mono(nz->file, &f, &len, &r) < 0 || len == 0) {
            free(x);
            return NULL;
        }
        for (size_t i = 0; i < n; i++) /* looped, each diffuse copy from its own place */
            x[i] = f[(i + (size_t)seed * 7919u * 13u) % len];
        free(f);
        return x;
    }
    /* pink: Paul Kellet's three-pole approximation of a -3 dB/octave slope */
    double b0 = 0, b1 = 0, b2 = 0, brown = 0, lp = 0;
    const double lp_a = exp(-2.0 * M_PI * 800.0 / rate); /* vent: pink with the highs rolled off */
    double hum_phase = 0;
    for (size_t i = 0; i < n; i++) {
        double w = rs_gauss(rs_mix64(((uint64_t)seed << 40) ^ (uint64_t)nz->kind << 32 ^ i));
        b0 = 0.99765 * b0 + w * 0.0990460;
        b1 = 0.96300 * b1 + w * 0.2965164;
        b2 = 0.57000 * b2 + w * 1.0526913;
        double pink = b0 + b1 + b2 + w * 0.1848;
        brown = 0.998 * brown + w * 0.05;
        double v;
        switch (nz->kind) {
        case RS_NOISE_WHITE: v = w; break;
        case RS_NOISE_PINK: v = pink; break;
        case RS_NOISE_BROWN: v = brown; break;
        case RS_NOISE_VENT: lp = lp_a * lp + (1 - lp_a) * pink; v = lp + 0.15 * pink; break;
        default: /* fan: broadband whoosh plus the blade-pass tone and its harmonics */
            hum_phase += 2.0 * M_PI * 110.0 / rate;
            v = 0.6 * pink + 0.5 * sin(hum_phase) + 0.25 * sin(2 * hum_phase + 0.3) +
                0.12 * sin(3 * hum_phase + 1.1);
            break;
        }
        x[i] = (float)v;
    }
    return x;
}

static double power_of(const float *x, size_t n)
{
    double e = 0;
    for (size_t i = 0; i < n; i++)
        e += (double)x[i] * x[i];
    return n ? e / n : 0;
}

/* Active level: the mean power of the 20 ms frames within 30 dB of the loudest one (pauses
 * between words do not dilute it). */
static double active_power(const float *x, size_t n, unsigned rate)
{
    size_t fl = rate / 50, frames = n / fl;
    if (frames == 0)
        return power_of(x, n);
    double *p = malloc(frames * sizeof *p), max = 0;
    if (!p)
        return power_of(x, n);
    for (size_t f = 0; f < frames; f++) {
        p[f] = power_of(x + f * fl, fl);
        if (p[f] > max)
            max = p[f];
    }
    double sum = 0;
    size_t count = 0;
    for (size_t f = 0; f < frames; f++)
        if (p[f] > max * 1e-3) {
            sum += p[f];
            count++;
        }
    free(p);
    return count ? sum / count : 0;
}

/* The eight places diffuse noise comes from: near the room's corners, 0.4 m from the walls. */
static void diffuse_place(const rs_scene *s, int i, double out[3])
{
    for (int a = 0; a < 3; a++) {
        double inset = s->room[a] > 1.0 ? 0.4 : s->room[a] / 4;
        out[a] = (i >> a & 1) ? s->room[a] - inset : inset;
    }
}

static int render_noise(const rs_scene *s, const rs_scene_noise *nz, float **acc, size_t frames,
                        size_t hlen)
{
    /* the noise starts a response's length before frame 0, so the room is full of it there */
    const size_t total = frames + hlen;
    float *y = malloc(total * sizeof *y);
    if (!y)
        return -ENOMEM;
    int places = nz->diffuse ? 8 : 1, rc = 0;
    for (int p = 0; p < places && rc == 0; p++) {
        double at[3];
        if (nz->diffuse)
            diffuse_place(s, p, at);
        else
            memcpy(at, nz->at, sizeof at);
        float *x = noise_signal(s, nz, nz->seed * 16u + (unsigned)p, total);
        if (!x) {
            rc = -ENOMEM;
            break;
        }
        for (int m = 0; m < s->mics && rc == 0; m++) {
            float *h = rs_scene_ir(s, at, m, s->rate, hlen);
            if (!h) {
                rc = -ENOMEM;
                break;
            }
            const hat whole = { 0 };
            memset(y, 0, total * sizeof *y);
            rc = convolve_span(h, hlen, x, total, 0, y, 0, total, &whole);
            for (size_t f = 0; f < frames; f++)
                acc[m][f] += y[hlen + f];
            free(h);
        }
        free(x);
    }
    free(y);
    return rc;
}

int rs_scene_render(const rs_scene *s, const char *wav_path, rs_scene_report *report)
{
    memset(report, 0, sizeof *report);
    const size_t hlen = rs_scene_ir_length(s, s->rate);
    float *speech_of[RS_SCENE_MAX_TALKERS] = { 0 };
    size_t speech_len[RS_SCENE_MAX_TALKERS] = { 0 };
    size_t frames = 0;
    for (int i = 0; i < RS_SCENE_MAX_TALKERS; i++) {
        const rs_scene_talker *t = &s->talker[i];
        if (!t->line)
            continue;
        if (!(speech_of[i] = load_talker(s, t, &speech_len[i]))) {
            for (int k = 0; k < i; k++)
                free(speech_of[k]);
            return -EINVAL;
        }
        size_t end = (size_t)llround(t->start_s * s->rate) + speech_len[i] + hlen;
        if (end > frames)
            frames = end;
    }
    if (s->duration_s > 0)
        frames = (size_t)llround(s->duration_s * s->rate);
    else if (frames == 0)
        frames = s->rate * 10u; /* noise only: 10 s, looped by the card */
    report->seconds = (double)frames / s->rate;
    float *mic[RS_MAX_MICS] = { 0 }, *noise[RS_MAX_MICS] = { 0 };
    int rc = 0;
    for (int m = 0; m < s->mics; m++) {
        mic[m] = calloc(frames, sizeof(float));
        noise[m] = calloc(frames, sizeof(float));
        if (!mic[m] || !noise[m])
            rc = -ENOMEM;
    }
    for (int i = 0; rc == 0 && i < RS_SCENE_MAX_TALKERS; i++)
        if (speech_of[i])
            rc = render_talker(s, &s->talker[i], speech_of[i], speech_len[i], mic, frames, hlen);
    for (int i = 0; i < RS_SCENE_MAX_TALKERS; i++)
        free(speech_of[i]);
    double speech = 0;
    if (rc == 0) {
        speech = active_power(mic[0], frames, s->rate) * 32768.0 * 32768.0;
        report->speech_dbfs = speech > 0 ? 10 * log10(speech / (32768.0 * 32768.0)) : 0;
    }
    for (int i = 0; rc == 0 && i < RS_SCENE_MAX_NOISES; i++) {
        const rs_scene_noise *nz = &s->noise[i];
        if (!nz->line)
            continue;
        for (int m = 0; m < s->mics; m++)
            memset(noise[m], 0, frames * sizeof(float));
        rc = render_noise(s, nz, noise, frames, hlen);
        if (rc < 0)
            break;
        double p = power_of(noise[0], frames) * 32768.0 * 32768.0; /* in int16 units² */
        double want = nz->level_is_snr ? speech / pow(10.0, nz->level_db / 10.0)
                                       : pow(10.0, nz->level_db / 10.0) * 32768.0 * 32768.0;
        float g = p > 0 ? (float)sqrt(want / p) : 0.0f;
        for (int m = 0; m < s->mics; m++)
            for (size_t f = 0; f < frames; f++)
                mic[m][f] += g * noise[m][f];
        report->noise_dbfs[i] = want > 0 ? 10 * log10(want / (32768.0 * 32768.0)) : -200;
    }
    /* a mic's sensitivity scales all it hears, after the noise was set against mic 0's nominal talk */
    for (int m = 0; rc == 0 && m < s->mics; m++) {
        const float g = (float)rs_scene_mic_gain(s, m);
        for (size_t f = 0; g != 1.0f && f < frames; f++)
            mic[m][f] *= g;
    }
    rs_output out = { 0 };
    if (rc == 0 && (rc = rs_output_open(&out, wav_path, RS_FILE_WAV)) == 0 &&
        (rc = rs_output_set_format(&out, (unsigned)s->mics, s->rate)) == 0) {
        int16_t block[1024 * RS_MAX_MICS];
        for (size_t f0 = 0; f0 < frames && rc == 0; f0 += 1024) {
            size_t n = frames - f0 < 1024 ? frames - f0 : 1024;
            for (size_t f = 0; f < n; f++)
                for (int m = 0; m < s->mics; m++) {
                    float v = mic[m][f0 + f] * 32768.0f;
                    if (v > 32767.0f || v < -32768.0f) {
                        report->clipped++;
                        v = v > 0 ? 32767.0f : -32768.0f;
                    }
                    block[f * (size_t)s->mics + (size_t)m] = (int16_t)lrintf(v);
                }
            rc = rs_output_write(&out, block, n);
        }
        rs_output_sync(&out);
        rs_output_close(&out);
    }
    for (int m = 0; m < s->mics; m++) {
        free(mic[m]);
        free(noise[m]);
    }
    return rc;
}

/* ---- the cache ------------------------------------------------------------------------------ */

static uint64_t fnv(uint64_t h, const void *data, size_t n)
{
    const unsigned char *p = data;
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}

static uint64_t hash_file_identity(uint64_t h, const char *path)
{
    struct stat st;
    h = fnv(h, path, strlen(path));
    if (stat(path, &st) == 0) {
        h = fnv(h, &st.st_size, sizeof st.st_size);
        h = fnv(h, &st.st_mtim, sizeof st.st_mtim);
    }
    return h;
}

int rs_scene_cached_render(const char *path, char out[PATH_MAX], rs_scene_report *rendered)
{
    rs_scene s;
    int rc = scene_load(&s, path, 0); /* checked; calibrated below only if it must be rendered */
    if (rc < 0)
        return rc;
    /* the key: the scene file's bytes, its sound files' identities, the renderer's version */
    uint64_t h = 0xcbf29ce484222325ull;
    unsigned version = RS_SCENE_VERSION;
    h = fnv(h, &version, sizeof version);
    FILE *f = fopen(path, "rb");
    if (!f)
        return -errno;
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0)
        h = fnv(h, buf, n);
    fclose(f);
    for (int i = 0; i < RS_SCENE_MAX_TALKERS; i++)
        if (s.talker[i].line)
            h = hash_file_identity(h, s.talker[i].file);
    for (int i = 0; i < RS_SCENE_MAX_NOISES; i++)
        if (s.noise[i].line && s.noise[i].kind == RS_NOISE_FILE)
            h = hash_file_identity(h, s.noise[i].file);

    char dir[PATH_MAX];
    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    if (slash)
        snprintf(dir, sizeof dir, "%.*s/.roomsim-cache", (int)(slash - path), path);
    else
        snprintf(dir, sizeof dir, ".roomsim-cache");
    if (mkdir(dir, 0755) < 0 && errno != EEXIST) {
        rc = -errno;
        rs_log("%s: cannot make the scene cache %s: %s", path, dir, strerror(errno));
        return rc;
    }
    if ((size_t)snprintf(out, PATH_MAX, "%s/%s-%016llx.wav", dir, base, (unsigned long long)h) >= PATH_MAX)
        return -ENAMETOOLONG;
    if (rendered)
        memset(rendered, 0, sizeof *rendered);
    if (access(out, R_OK) == 0)
        return 0;

    char tmp[PATH_MAX + 32];
    snprintf(tmp, sizeof tmp, "%s.%d.tmp", out, (int)getpid());
    int64_t t0 = rs_now_ns();
    if (s.absorption <= 0)
        s.beta = calibrate_beta(&s);
    rs_scene_report report;
    rc = rs_scene_render(&s, tmp, &report);
    if (rc == 0 && rendered)
        *rendered = report;
    if (rc < 0) {
        unlink(tmp);
        return rc;
    }
    if (rename(tmp, out) < 0) {
        rc = -errno;
        unlink(tmp);
        return rc;
    }
    rs_log("%s: rendered %.1f s for %d mics in %.1f s into %s%s", path, report.seconds, s.mics,
           (double)(rs_now_ns() - t0) / 1e9, out, report.clipped ? " (some samples clipped)" : "");
    /* earlier renderings of this scene file are stale now */
    DIR *d = opendir(dir);
    if (d) {
        size_t bl = strlen(base);
        const char *mine = strrchr(out, '/') + 1;
        for (struct dirent *e; (e = readdir(d));)
            if (!strncmp(e->d_name, base, bl) && e->d_name[bl] == '-' && strcmp(e->d_name, mine) &&
                strlen(e->d_name) == strlen(mine) && !strstr(e->d_name, ".tmp")) {
                char old[PATH_MAX + 300];
                snprintf(old, sizeof old, "%s/%s", dir, e->d_name);
                unlink(old);
            }
        closedir(d);
    }
    return 0;
}
