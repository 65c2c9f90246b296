/* Room file parsing: `key = value` lines, `#` comments. Every error names file, line, key. */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rs_internal.h"

void rs_log(const char *fmt, ...)
{
    va_list ap;
    char line[1024];
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    fprintf(stderr, "roomsim: %s\n", line);
}

int64_t rs_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}


void rs_config_defaults(rs_config *c)
{
    memset(c, 0, sizeof *c);
    c->input_format = RS_FILE_AUTO;
    c->input_channels = 1;
    c->output_format = RS_FILE_AUTO;
    c->echo_delay_ms = 1.0;
    c->echo_gain_db = -6.0;
    c->ir_mode = RS_IR_GENERATED;
    c->ir_length_ms = 150.0;
    c->ir_rt60_ms = 250.0;
    c->ir_drr_db = 6.0;
    c->ir_seed = 1;
    for (int i = 0; i < RS_MAX_MICS; i++)
        c->mic_gain[i] = c->input_mic_gain[i] = 1.0;
    c->noise_dbfs = -70.0;
    c->noise_seed = 1;
    c->xrun_at_ms[RS_PLAYBACK] = c->xrun_at_ms[RS_CAPTURE] = -1.0;
    c->lose_at_ms = -1.0;
    c->lose_for_ms = 1000.0;
}

/* ---- value parsers: return NULL on success or a description of what was expected ---- */

typedef struct parse_ctx {
    const char *file;
    int line;
    const char *key;
    char dir[PATH_MAX]; /* directory of the room file, for relative paths */
} parse_ctx;

static const char *parse_number(const char *v, double min, double max, double *out)
{
    static char expected[96];
    char *end;
    errno = 0;
    double d = strtod(v, &end);
    snprintf(expected, sizeof expected, "a number in %g..%g", min, max);
    if (end == v || *end != '\0' || errno != 0 || !isfinite(d) || d < min || d > max)
        return expected;
    *out = d;
    return NULL;
}

static const char *parse_uint(const char *v, unsigned min, unsigned max, unsigned *out)
{
    static char expected[96];
    char *end;
    snprintf(expected, sizeof expected, "an integer in %u..%u", min, max);
    if (!isdigit((unsigned char)v[0]))
        return expected;
    errno = 0;
    unsigned long n = strtoul(v, &end, 10);
    if (*end != '\0' || errno != 0 || n < min || n > max)
        return expected;
    *out = (unsigned)n;
    return NULL;
}

static int is_word(const char *v, const char *const *words)
{
    for (; *words; words++)
        if (strcmp(v, *words) == 0)
            return 1;
    return 0;
}

static const char *const ON[] = { "on", "yes", "true", "1", NULL };
static const char *const OFF[] = { "off", "no", "false", "0", NULL };
static const char *const NONE[] = { "none", "off", "", NULL };

static const char *parse_bool(const char *v, int *out)
{
    if (is_word(v, ON)) { *out = 1; return NULL; }
    if (is_word(v, OFF)) { *out = 0; return NULL; }
    return "on or off";
}

static const char *parse_path(const parse_ctx *ctx, const char *v, char *out, int allow_none)
{
    if (allow_none && is_word(v, NONE)) { out[0] = '\0'; return NULL; }
    if (v[0] == '\0')
        return "a path";
    int n;
    if (v[0] == '/' || ctx->dir[0] == '\0')
        n = snprintf(out, PATH_MAX, "%s", v);
    else
        n = snprintf(out, PATH_MAX, "%s/%s", ctx->dir, v);
    if (n >= PATH_MAX)
        return "a shorter path";
    return NULL;
}

static const char *parse_file_format(const char *v, int *out)
{
    if (strcmp(v, "auto") == 0) { *out = RS_FILE_AUTO; return NULL; }
    if (strcmp(v, "wav") == 0) { *out = RS_FILE_WAV; return NULL; }
    if (strcmp(v, "raw") == 0) { *out = RS_FILE_RAW; return NULL; }
    return "auto, wav or raw";
}

static const char *parse_optional_ms(const char *v, double *out)
{
    if (is_word(v, NONE)) { *out = -1.0; return NULL; }
    return parse_number(v, 0, 86400000.0, out);
}

/* A list of 1..RS_MAX_MICS numbers separated by spaces or commas; *count gets how many. */
static const char *parse_list(const char *v, double min, double max, double *out, int *count)
{
    static char expected[128];
    snprintf(expected, sizeof expected, "1..%d numbers in %g..%g separated by spaces or commas",
             RS_MAX_MICS, min, max);
    int n = 0;
    const char *p = v;
    while (*p) {
        while (*p == ' ' || *p == '\t' || *p == ',')
            p++;
        if (!*p)
            break;
        char item[64];
        size_t len = strcspn(p, " \t,");
        if (len >= sizeof item || n == RS_MAX_MICS)
            return expected;
        memcpy(item, p, len);
        item[len] = '\0';
        if (parse_number(item, min, max, &out[n]))
            return expected;
        n++;
        p += len;
    }
    if (n == 0)
        return expected;
    *count = n;
    return NULL;
}

/* Per-mic delays (`ms` = in ms, else in samples): missing entries are 0. */
static const char *parse_delays(const char *v, int ms, double *delay, int *in_ms)
{
    int n = 0;
    double vals[RS_MAX_MICS] = { 0 };
    const char *err = parse_list(v, 0, ms ? 1000 : 192000, vals, &n);
    if (err) return err;
    memcpy(delay, vals, sizeof vals);
    *in_ms = ms;
    return NULL;
}

/* Per-mic linear gains: missing entries repeat the last given gain. */
static const char *parse_gains(const char *v, double *gain)
{
    int n = 0;
    double vals[RS_MAX_MICS] = { 0 };
    const char *err = parse_list(v, 0, 100, vals, &n);
    if (err) return err;
    for (int i = 0; i < RS_MAX_MICS; i++)
        gain[i] = i < n ? vals[i] : vals[n - 1];
    return NULL;
}

/* ---- the key table ------------------------------------------------------------------- */

static const char *apply(const parse_ctx *ctx, rs_config *c, const char *k, const char *v)
{
    double d;
    if (!strcmp(k, "input")) return parse_path(ctx, v, c->input, 1);
    if (!strcmp(k, "input_format")) return parse_file_format(v, &c->input_format);
    if (!strcmp(k, "input_channels")) return parse_uint(v, 1, RS_MAX_MICS, &c->input_channels);
    if (!strcmp(k, "input_end")) {
        if (!strcmp(v, "silence")) { c->input_loop = 0; return NULL; }
        if (!strcmp(v, "loop")) { c->input_loop = 1; return NULL; }
        return "silence or loop";
    }
    if (!strcmp(k, "output")) return parse_path(ctx, v, c->output, 1);
    if (!strcmp(k, "output_format")) return parse_file_format(v, &c->output_format);
    if (!strcmp(k, "echo")) return parse_bool(v, &c->echo);
    if (!strcmp(k, "echo_delay_ms")) return parse_number(v, 0, 2000, &c->echo_delay_ms);
    if (!strcmp(k, "echo_gain_db")) return parse_number(v, -120, 40, &c->echo_gain_db);
    if (!strcmp(k, "ir")) {
        if (!strcmp(v, "generated")) { c->ir_mode = RS_IR_GENERATED; return NULL; }
        if (!strcmp(v, "none")) { c->ir_mode = RS_IR_NONE; return NULL; }
        c->ir_mode = RS_IR_FILE;
        return parse_path(ctx, v, c->ir_file, 0);
    }
    if (!strcmp(k, "ir_length_ms")) return parse_number(v, 0.1, 2000, &c->ir_length_ms);
    if (!strcmp(k, "ir_rt60_ms")) return parse_number(v, 1, 20000, &c->ir_rt60_ms);
    if (!strcmp(k, "ir_drr_db")) return parse_number(v, -40, 80, &c->ir_drr_db);
    if (!strcmp(k, "ir_seed")) return parse_uint(v, 0, UINT_MAX, &c->ir_seed);
    if (!strcmp(k, "mic_delays") || !strcmp(k, "mic_delays_ms"))
        return parse_delays(v, !strcmp(k, "mic_delays_ms"), c->mic_delay, &c->mic_delay_in_ms);
    if (!strcmp(k, "mic_gains")) return parse_gains(v, c->mic_gain);
    if (!strcmp(k, "input_mic_delays") || !strcmp(k, "input_mic_delays_ms") ||
        !strcmp(k, "input_mic_gains")) {
        const char *err = !strcmp(k, "input_mic_gains")
                              ? parse_gains(v, c->input_mic_gain)
                              : parse_delays(v, !strcmp(k, "input_mic_delays_ms"),
                                             c->input_mic_delay, &c->input_mic_delay_in_ms);
        if (err) return err;
        c->input_mic_line = ctx->line;
        snprintf(c->input_mic_key, sizeof c->input_mic_key, "%s", k);
        return NULL;
    }
    if (!strcmp(k, "noise_dbfs")) {
        if (is_word(v, NONE)) { c->noise = 0; return NULL; }
        const char *err = parse_number(v, -200, 0, &d);
        if (err) return "off or a number in -200..0";
        c->noise = 1;
        c->noise_dbfs = d;
        return NULL;
    }
    if (!strcmp(k, "noise_seed")) return parse_uint(v, 0, UINT_MAX, &c->noise_seed);
    if (!strcmp(k, "capture_skew_ppm")) return parse_number(v, -10000, 10000, &c->skew_ppm[RS_CAPTURE]);
    if (!strcmp(k, "playback_skew_ppm")) return parse_number(v, -10000, 10000, &c->skew_ppm[RS_PLAYBACK]);
    if (!strcmp(k, "xrun_at_ms")) {
        const char *err = parse_optional_ms(v, &d);
        if (!err) c->xrun_at_ms[RS_CAPTURE] = c->xrun_at_ms[RS_PLAYBACK] = d;
        return err;
    }
    if (!strcmp(k, "capture_xrun_at_ms")) return parse_optional_ms(v, &c->xrun_at_ms[RS_CAPTURE]);
    if (!strcmp(k, "playback_xrun_at_ms")) return parse_optional_ms(v, &c->xrun_at_ms[RS_PLAYBACK]);
    if (!strcmp(k, "lose_at_ms")) return parse_optional_ms(v, &c->lose_at_ms);
    if (!strcmp(k, "lose_for_ms")) return parse_number(v, 0, 86400000.0, &c->lose_for_ms);
    if (!strcmp(k, "control")) return parse_path(ctx, v, c->control, 1);
    if (!strcmp(k, "status")) return parse_path(ctx, v, c->status, 1);
    return ""; /* unknown key */
}

static char *trim(char *s)
{
    while (isspace((unsigned char)*s))
        s++;
    char *e = s + strlen(s);
    while (e > s && isspace((unsigned char)e[-1]))
        *--e = '\0';
    return s;
}

int rs_config_load(rs_config *c, const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        int err = errno;
        rs_log("cannot open room file %s: %s", path, strerror(err));
        return -err;
    }
    parse_ctx ctx = { .file = path };
    /* the canonical path names the room: every spelling of it opens the same room */
    if (!realpath(path, c->path))
        snprintf(c->path, sizeof c->path, "%s", path);
    const char *slash = strrchr(path, '/');
    if (slash)
        snprintf(ctx.dir, sizeof ctx.dir, "%.*s", (int)(slash - path), path);
    if (slash == path)
        snprintf(ctx.dir, sizeof ctx.dir, "/");

    char buf[PATH_MAX + 256];
    int rc = 0;
    while (fgets(buf, sizeof buf, f)) {
        ctx.line++;
        if (!strchr(buf, '\n') && !feof(f)) {
            rs_log("%s:%d: line too long", path, ctx.line);
            rc = -EINVAL;
            break;
        }
        char *hash = strchr(buf, '#');
        if (hash)
            *hash = '\0';
        char *line = trim(buf);
        if (!*line)
            continue;
        char *eq = strchr(line, '=');
        if (!eq) {
            rs_log("%s:%d: expected `key = value`, got '%s'", path, ctx.line, line);
            rc = -EINVAL;
            break;
        }
        *eq = '\0';
        char *key = trim(line), *val = trim(eq + 1);
        size_t vl = strlen(val);
        if (vl >= 2 && val[0] == '"' && val[vl - 1] == '"') { /* optional quotes */
            val[vl - 1] = '\0';
            val++;
        }
        ctx.key = key;
        const char *expected = apply(&ctx, c, key, val);
        if (expected && !*expected) {
            rs_log("%s:%d: unknown key '%s'", path, ctx.line, key);
            rc = -EINVAL;
            break;
        }
        if (expected) {
            rs_log("%s:%d: key '%s': bad value '%s' (expected %s)", path, ctx.line, key, val,
                   expected);
            rc = -EINVAL;
            break;
        }
    }
    fclose(f);
    return rc;
}
