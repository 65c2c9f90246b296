/* roomsim-scene: what the simulated card makes of a scene file, outside ALSA. It renders the
 * mics' signal (the same rendering and cache the card uses), writes the impulse responses for
 * checking them against another implementation, and prints the geometry as JSON (each source's
 * true direction and distance, for the benches' localization error). docs/sim-card.md, "Scenes".
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "rs_internal.h"

static int usage(void)
{
    fprintf(stderr,
            "usage: roomsim-scene SCENE [--render FILE.wav | --no-render] [--irs DIR]\n"
            "  prints the scene as JSON (sources, directions, distances, direct-path delays);\n"
            "  renders what the mics hear into the scene's cache, as the card does (default),\n"
            "  or into FILE.wav; --irs writes every source's response to every mic as\n"
            "  DIR/<source>-mic<m>.wav (32-bit float, the scene's rate)\n");
    return 2;
}

static int write_float_wav(const char *path, const float *x, size_t n, unsigned rate)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return -errno;
    unsigned char h[44];
    uint32_t data = (uint32_t)(n * 4);
    memcpy(h, "RIFF", 4);
    uint32_t v = 36 + data;
    memcpy(h + 4, &v, 4);
    memcpy(h + 8, "WAVEfmt ", 8);
    v = 16;
    memcpy(h + 16, &v, 4);
    uint16_t fmt = 3, ch = 1, align = 4, bits = 32;
    memcpy(h + 20, &fmt, 2);
    memcpy(h + 22, &ch, 2);
    memcpy(h + 24, &rate, 4);
    v = rate * 4;
    memcpy(h + 28, &v, 4);
    memcpy(h + 32, &align, 2);
    memcpy(h + 34, &bits, 2);
    memcpy(h + 36, "data", 4);
    memcpy(h + 40, &data, 4);
    int ok = fwrite(h, 1, 44, f) == 44 && fwrite(x, 4, n, f) == n;
    return fclose(f) == 0 && ok ? 0 : -EIO;
}

/* One source: its direction and distance from the array centre, and each mic's direct delay. */
static void print_source(const rs_scene *s, const char *name, const double p[3], int first)
{
    double d[3] = { p[0] - s->array[0], p[1] - s->array[1], p[2] - s->array[2] };
    double horizontal = hypot(d[0], d[1]);
    printf("%s{\"name\":\"%s\",\"x\":%.3f,\"y\":%.3f,\"z\":%.3f,\"azimuth_deg\":%.2f,"
           "\"elevation_deg\":%.2f,\"distance_m\":%.3f,\"delays_samples\":[",
           first ? "" : ",", name, p[0], p[1], p[2], atan2(d[1], d[0]) * 180.0 / M_PI,
           atan2(d[2], horizontal) * 180.0 / M_PI, sqrt(d[0] * d[0] + d[1] * d[1] + d[2] * d[2]));
    for (int m = 0; m < s->mics; m++) {
        double q[3] = { s->array[0] + s->mic[m][0], s->array[1] + s->mic[m][1], s->array[2] + s->mic[m][2] };
        double r = sqrt((p[0] - q[0]) * (p[0] - q[0]) + (p[1] - q[1]) * (p[1] - q[1]) + (p[2] - q[2]) * (p[2] - q[2]));
        printf("%s%.3f", m ? "," : "", r / RS_SOUND_SPEED * s->rate);
    }
    printf("]}");
}

static int write_irs(const rs_scene *s, const char *dir, const char *name, const double p[3])
{
    size_t n = rs_scene_ir_length(s, s->rate);
    for (int m = 0; m < s->mics; m++) {
        float *h = rs_scene_ir(s, p, m, s->rate, n);
        if (!h)
            return -ENOMEM;
        char path[PATH_MAX];
        snprintf(path, sizeof path, "%s/%s-mic%d.wav", dir, name, m);
        int rc = write_float_wav(path, h, n, s->rate);
        free(h);
        if (rc < 0) {
            fprintf(stderr, "roomsim-scene: cannot write %s: %s\n", path, strerror(-rc));
            return rc;
        }
    }
    return 0;
}

int main(int argc, char **argv)
{
    const char *scene_path = NULL, *render = NULL, *irs = NULL;
    int no_render = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--render") && i + 1 < argc) render = argv[++i];
        else if (!strcmp(argv[i], "--irs") && i + 1 < argc) irs = argv[++i];
        else if (!strcmp(argv[i], "--no-render")) no_render = 1;
        else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) return usage(), 0;
        else if (argv[i][0] == '-' || scene_path) {
            fprintf(stderr, "roomsim-scene: unexpected argument '%s'\n", argv[i]);
            return usage();
        } else scene_path = argv[i];
    }
    if (!scene_path)
        return usage();
    rs_scene s;
    if (rs_scene_load(&s, scene_path) < 0)
        return 1;
    double beta = rs_scene_beta(&s);
    printf("{\"scene\":\"%s\",\"rate\":%u,\"mics\":%d,\"beta\":%.5f,\"absorption\":%.5f,"
           "\"rt60_eyring_ms\":%.1f,\"ir_samples\":%zu,\"sources\":[",
           scene_path, s.rate, s.mics, beta, 1.0 - beta * beta,
           rs_ism_rt60_for_beta(s.room, beta) * 1000.0, rs_scene_ir_length(&s, s.rate));
    double spk[3] = { s.array[0] + s.speaker[0], s.array[1] + s.speaker[1], s.array[2] + s.speaker[2] };
    print_source(&s, "speaker", spk, 1);
    char name[64];
    for (int i = 0; i < RS_SCENE_MAX_TALKERS; i++) {
        const rs_scene_talker *t = &s.talker[i];
        if (!t->line)
            continue;
        for (int p = 0; p < t->points; p++) {
            if (t->points == 1)
                snprintf(name, sizeof name, "talker%d", i + 1);
            else
                snprintf(name, sizeof name, "talker%d@%g", i + 1, t->path[p].t);
            print_source(&s, name, t->path[p].p, 0);
        }
    }
    for (int i = 0; i < RS_SCENE_MAX_NOISES; i++)
        if (s.noise[i].line && !s.noise[i].diffuse) {
            snprintf(name, sizeof name, "noise%d", i + 1);
            print_source(&s, name, s.noise[i].at, 0);
        }
    printf("]");
    int rc = 0;
    if (irs) {
        mkdir(irs, 0755);
        rc = write_irs(&s, irs, "speaker", spk);
        for (int i = 0; rc == 0 && i < RS_SCENE_MAX_TALKERS; i++)
            if (s.talker[i].line) {
                snprintf(name, sizeof name, "talker%d", i + 1);
                rc = write_irs(&s, irs, name, s.talker[i].path[0].p);
            }
        for (int i = 0; rc == 0 && i < RS_SCENE_MAX_NOISES; i++)
            if (s.noise[i].line && !s.noise[i].diffuse) {
                snprintf(name, sizeof name, "noise%d", i + 1);
                rc = write_irs(&s, irs, name, s.noise[i].at);
            }
    }
    if (rc == 0 && (render || !no_render)) {
        /* into FILE, or into the cache the card reads (the levels only when rendered now) */
        char out[PATH_MAX];
        rs_scene_report report;
        rc = render ? rs_scene_render(&s, render, &report) : rs_scene_cached_render(scene_path, out, &report);
        if (rc == 0) {
            printf(",\"rendered\":\"%s\"", render ? render : out);
            if (report.seconds > 0) {
                printf(",\"seconds\":%.3f,\"speech_dbfs\":%.2f,\"clipped\":%llu,\"noise_dbfs\":[",
                       report.seconds, report.speech_dbfs, (unsigned long long)report.clipped);
                int first = 1;
                for (int i = 0; i < RS_SCENE_MAX_NOISES; i++)
                    if (s.noise[i].line) {
                        printf("%s%.2f", first ? "" : ",", report.noise_dbfs[i]);
                        first = 0;
                    }
                printf("]");
            }
        }
    }
    printf("}\n");
    if (rc < 0)
        fprintf(stderr, "roomsim-scene: %s: %s\n", scene_path, strerror(-rc));
    return rc < 0 ? 1 : 0;
}
