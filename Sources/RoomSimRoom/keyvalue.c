/* `key = value` files (room files and scene files): the line loop, the value parsers both use,
 * and the plugin's log. Every error names file, line and key. */
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

/* ---- value parsers: NULL on success, or a description of what was expected ---------------- */

const char *rs_parse_number(const char *v, double min, double max, double *out)
{
    static __thread char expected[96];
    char *end;
    errno = 0;
    double d = strtod(v, &end);
    snprintf(expected, sizeof expected, "a number in %g..%g", min, max);
    if (end == v || *end != '\0' || errno != 0 || !isfinite(d) || d < min || d > max)
        return expected;
    *out = d;
    return NULL;
}

const char *rs_parse_uint(const char *v, unsigned min, unsigned max, unsigned *out)
{
    static __thread char expected[96];
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

int rs_is_none(const char *v) { return is_word(v, NONE); }

const char *rs_parse_bool(const char *v, int *out)
{
    if (is_word(v, ON)) { *out = 1; return NULL; }
    if (is_word(v, OFF)) { *out = 0; return NULL; }
    return "on or off";
}

const char *rs_parse_path(const rs_kv_ctx *ctx, const char *v, char *out, int allow_none)
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

const char *rs_parse_list(const char *v, double min, double max, int max_count, double *out,
                          int *count)
{
    static __thread char expected[128];
    snprintf(expected, sizeof expected, "1..%d numbers in %g..%g separated by spaces or commas",
             max_count, min, max);
    int n = 0;
    const char *p = v;
    while (*p) {
        while (*p == ' ' || *p == '\t' || *p == ',')
            p++;
        if (!*p)
            break;
        char item[64];
        size_t len = strcspn(p, " \t,");
        if (len >= sizeof item || n == max_count)
            return expected;
        memcpy(item, p, len);
        item[len] = '\0';
        if (rs_parse_number(item, min, max, &out[n]))
            return expected;
        n++;
        p += len;
    }
    if (n == 0)
        return expected;
    *count = n;
    return NULL;
}

/* ---- the line loop -------------------------------------------------------------------------- */

static char *trim(char *s)
{
    while (isspace((unsigned char)*s))
        s++;
    char *e = s + strlen(s);
    while (e > s && isspace((unsigned char)e[-1]))
        *--e = '\0';
    return s;
}

int rs_kv_load(const char *path, const char *what, rs_kv_apply apply, void *target)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        int err = errno;
        rs_log("cannot open %s %s: %s", what, path, strerror(err));
        return -err;
    }
    rs_kv_ctx ctx = { .file = path };
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
        const char *expected = apply(&ctx, target, key, val);
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
