/* Room file keys (the line loop and value parsers: keyvalue.c). Every error names file, line, key. */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rs_internal.h"

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

static const char *parse_file_format(const char *v, int *out)
{
    if (strcmp(v, "auto") == 0) { *out = RS_FILE_AUTO; return NULL; }
    if (strcmp(v, "wav") == 0) { *out = RS_FILE_WAV; return NULL; }
    if (strcmp(v, "raw") == 0) { *out = RS_FILE_RAW; return NULL; }
    return "auto, wav or raw";
}

static const char *parse_optional_ms(const char *v, double *out)
{
    if (rs_is_none(v)) { *out = -1.0; return NULL; }
    return rs_parse_number(v, 0, 86400000.0, out);
}

/* Per-mic delays (`ms` = in ms, else in samples): missing entries are 0. */
static const char *parse_delays(const char *v, int ms, double *delay, int *in_ms)
{
    int n = 0;
    double vals[RS_MAX_MICS] = { 0 };
    const char *err = rs_parse_list(v, 0, ms ? 1000 : 192000, RS_MAX_MICS, vals, &n);
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
    const char *err = rs_parse_list(v, 0, 100, RS_MAX_MICS, vals, &n);
    if (err) return err;
    for (int i = 0; i < RS_MAX_MICS; i++)
        gain[i] = i < n ? vals[i] : vals[n - 1];
    return NULL;
}

/* ---- the key table ------------------------------------------------------------------- */

/* Keys a scene file replaces: the talker's input and the shape of the echo path. */
static int scene_replaces(const char *k, const char *v)
{
    if (!strcmp(k, "input"))
        return !rs_is_none(v);
    static const char *const keys[] = { "input_format", "input_channels", "input_mic_delays",
                                        "input_mic_delays_ms", "input_mic_gains", "ir",
                                        "ir_length_ms", "ir_rt60_ms", "ir_drr_db", "ir_seed",
                                        "mic_delays", "mic_delays_ms", "mic_gains", NULL };
    for (const char *const *key = keys; *key; key++)
        if (!strcmp(k, *key))
            return 1;
    return 0;
}

static const char *apply_key(const rs_kv_ctx *ctx, rs_config *c, const char *k, const char *v);

static const char *apply(const rs_kv_ctx *ctx, void *target, const char *k, char *v)
{
    rs_config *c = target;
    const char *err = apply_key(ctx, c, k, v);
    if (!err && !strcmp(k, "scene"))
        c->scene_line = ctx->line;
    else if (!err && c->scene_conflict_line == 0 && scene_replaces(k, v)) {
        c->scene_conflict_line = ctx->line;
        snprintf(c->scene_conflict_key, sizeof c->scene_conflict_key, "%s", k);
    }
    return err;
}

static const char *apply_key(const rs_kv_ctx *ctx, rs_config *c, const char *k, const char *v)
{
    double d;
    if (!strcmp(k, "input")) return rs_parse_path(ctx, v, c->input, 1);
    if (!strcmp(k, "scene")) return rs_parse_path(ctx, v, c->scene, 1);
    if (!strcmp(k, "input_format")) return parse_file_format(v, &c->input_format);
    if (!strcmp(k, "input_channels")) return rs_parse_uint(v, 1, RS_MAX_MICS, &c->input_channels);
    if (!strcmp(k, "input_end")) {
        if (!strcmp(v, "silence")) { c->input_loop = 0; return NULL; }
        if (!strcmp(v, "loop")) { c->input_loop = 1; return NULL; }
        return "silence or loop";
    }
    if (!strcmp(k, "output")) return rs_parse_path(ctx, v, c->output, 1);
    if (!strcmp(k, "output_format")) return parse_file_format(v, &c->output_format);
    if (!strcmp(k, "echo")) return rs_parse_bool(v, &c->echo);
    if (!strcmp(k, "echo_delay_ms")) return rs_parse_number(v, 0, 2000, &c->echo_delay_ms);
    if (!strcmp(k, "echo_gain_db")) return rs_parse_number(v, -120, 40, &c->echo_gain_db);
    if (!strcmp(k, "ir")) {
        if (!strcmp(v, "generated")) { c->ir_mode = RS_IR_GENERATED; return NULL; }
        if (!strcmp(v, "none")) { c->ir_mode = RS_IR_NONE; return NULL; }
        c->ir_mode = RS_IR_FILE;
        return rs_parse_path(ctx, v, c->ir_file, 0);
    }
    if (!strcmp(k, "ir_length_ms")) return rs_parse_number(v, 0.1, 2000, &c->ir_length_ms);
    if (!strcmp(k, "ir_rt60_ms")) return rs_parse_number(v, 1, 20000, &c->ir_rt60_ms);
    if (!strcmp(k, "ir_drr_db")) return rs_parse_number(v, -40, 80, &c->ir_drr_db);
    if (!strcmp(k, "ir_seed")) return rs_parse_uint(v, 0, UINT_MAX, &c->ir_seed);
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
        if (rs_is_none(v)) { c->noise = 0; return NULL; }
        const char *err = rs_parse_number(v, -200, 0, &d);
        if (err) return "off or a number in -200..0";
        c->noise = 1;
        c->noise_dbfs = d;
        return NULL;
    }
    if (!strcmp(k, "noise_seed")) return rs_parse_uint(v, 0, UINT_MAX, &c->noise_seed);
    if (!strcmp(k, "capture_skew_ppm")) return rs_parse_number(v, -10000, 10000, &c->skew_ppm[RS_CAPTURE]);
    if (!strcmp(k, "playback_skew_ppm")) return rs_parse_number(v, -10000, 10000, &c->skew_ppm[RS_PLAYBACK]);
    if (!strcmp(k, "xrun_at_ms")) {
        const char *err = parse_optional_ms(v, &d);
        if (!err) c->xrun_at_ms[RS_CAPTURE] = c->xrun_at_ms[RS_PLAYBACK] = d;
        return err;
    }
    if (!strcmp(k, "capture_xrun_at_ms")) return parse_optional_ms(v, &c->xrun_at_ms[RS_CAPTURE]);
    if (!strcmp(k, "playback_xrun_at_ms")) return parse_optional_ms(v, &c->xrun_at_ms[RS_PLAYBACK]);
    if (!strcmp(k, "lose_at_ms")) return parse_optional_ms(v, &c->lose_at_ms);
    if (!strcmp(k, "lose_for_ms")) return rs_parse_number(v, 0, 86400000.0, &c->lose_for_ms);
    if (!strcmp(k, "control")) return rs_parse_path(ctx, v, c->control, 1);
    if (!strcmp(k, "status")) return rs_parse_path(ctx, v, c->status, 1);
    return ""; /* unknown key */
}

/* A scene places the talkers and the speaker itself: a room file that also gives the input or
 * the echo path's shape is ambiguous, so it is refused rather than one of them ignored. */
static int check_scene_conflicts(const rs_config *c)
{
    if (!c->scene[0] || c->scene_conflict_line == 0)
        return 0;
    rs_log("%s:%d: key '%s': the scene (line %d) places the talkers and the speaker, which this "
           "key would also set (remove one of them; docs/sim-card.md, \"Scenes\")",
           c->path, c->scene_conflict_line, c->scene_conflict_key, c->scene_line);
    return -EINVAL;
}

int rs_config_load(rs_config *c, const char *path)
{
    /* the canonical path names the room: every spelling of it opens the same room */
    if (!realpath(path, c->path))
        snprintf(c->path, sizeof c->path, "%s", path);
    int rc = rs_kv_load(path, "room file", apply, c);
    if (rc < 0)
        return rc;
    return check_scene_conflicts(c);
}
