// scripts/bench aecdelay: roomd's canceller (Sources/CCaptureChain/kalman_aec.h) offline, on a pure
// delay: how fast its linear filter converges as a function of where the echo's delay falls.
//   aecdelay FAR.f32 DELAY_MS GAIN_DB FROM_S TO_S
// FAR.f32: raw float32 mono at 48 kHz, the far end. The mic is the far end delayed and scaled,
// plus -70 dBFS white noise. Prints the linear filter's ERLE (mic power / linear error power)
// over the blocks from FROM_S to TO_S seconds, as one number.
//
//   aecdelay run FAR.f32 MIC.f32 OUT.f32
// The canceller (48 kHz, moderate suppression, NS at the boards' level) on a far end and a mic
// signal made elsewhere (scripts/bench.d/aecdelay.py dt: the rooms of `scripts/bench
// doubletalk` without the sound card); writes its output. AECDT_NS_OFF=1: noise suppression off.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>
#include "kalman_aec.h"

static std::vector<float> read_f32(const char *path) {
    std::vector<float> x;
    FILE *f = fopen(path, "rb");
    if (!f) { perror(path); exit(1); }
    float v;
    while (fread(&v, sizeof v, 1, f) == 1) x.push_back(v);
    fclose(f);
    return x;
}

// AECDT_PARAMS="name=value,…": Params fields changed for a tuning run.
static void set_params(roomaec::Params *p) {
    const char *env = getenv("AECDT_PARAMS");
    if (!env) return;
    struct { const char *name; float *field; } fields[] = {
        {"transition", &p->transition}, {"p0", &p->p0}, {"alpha", &p->alpha}, {"dt_factor", &p->dt_factor},
        {"p_gain", &p->p_gain}, {"residual_scale", &p->residual_scale}, {"early_scale", &p->early_scale},
        {"early_halving_s", &p->early_halving_s}, {"min_gain_db", &p->min_gain_db}, {"leak_db", &p->leak_db},
        {"newest_gain0", &p->newest_gain[0]}, {"newest_gain1", &p->newest_gain[1]},
        {"grad_window", &p->grad_window}, {"prior_scale", &p->prior_scale}, {"prior_halving_s", &p->prior_halving_s},
    };
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", env);
    for (char *tok = strtok(buf, ","); tok; tok = strtok(nullptr, ",")) {
        char *eq = strchr(tok, '=');
        if (!eq) continue;
        *eq = 0;
        bool found = false;
        if (!strcmp(tok, "grad_window_from")) { p->grad_window_from = atoi(eq + 1); continue; }
        for (auto &f : fields) if (!strcmp(f.name, tok)) { *f.field = (float)atof(eq + 1); found = true; }
        if (!found) { fprintf(stderr, "AECDT_PARAMS: unknown %s\n", tok); exit(2); }
    }
}

static int run_main(int argc, char **argv) {
    if (argc != 5) { fprintf(stderr, "usage: aecdelay run FAR.f32 MIC.f32 OUT.f32\n"); return 2; }
    const int rate = getenv("AECDT_RATE") ? atoi(getenv("AECDT_RATE")) : 48000, H = rate / 100;
    std::vector<float> far = read_f32(argv[2]), mic = read_f32(argv[3]);
    const size_t n = mic.size() / H * H;
    far.resize(n, 0.0f);
    std::vector<float> out(n);
    roomaec::Params prm = roomaec::default_params(rate, 1);
    prm.ns_level = 2;   // the boards' setting (ProcessingSettings.noiseLevel)
    set_params(&prm);
    roomaec::Canceller *a = roomaec::create(prm);
    if (!a) return 1;
    a->ns.on = getenv("AECDT_NS_OFF") == nullptr;
    for (size_t b = 0; b + H <= n; b += H) roomaec::process(a, &far[b], &mic[b], &out[b]);
    roomaec::destroy(a);
    FILE *f = fopen(argv[4], "wb");
    if (!f) { perror(argv[4]); return 1; }
    fwrite(out.data(), sizeof(float), n, f);
    fclose(f);
    return 0;
}

int main(int argc, char **argv) {
    if (argc > 1 && !strcmp(argv[1], "run")) return run_main(argc, argv);
    if (argc != 6) { fprintf(stderr, "usage: aecdelay FAR.f32 DELAY_MS GAIN_DB FROM_S TO_S\n"); return 2; }
    FILE *f = fopen(argv[1], "rb");
    if (!f) { perror(argv[1]); return 1; }
    std::vector<float> far;
    float v;
    while (fread(&v, sizeof v, 1, f) == 1) far.push_back(v);
    fclose(f);
    const int rate = 48000, H = rate / 100;
    const double gain = pow(10, atof(argv[3]) / 20);
    const long d = lround(atof(argv[2]) * rate / 1000), from = lround(atof(argv[4]) * rate), to = lround(atof(argv[5]) * rate);
    const size_t n = far.size() / H * H;
    std::vector<float> mic(n);
    unsigned s = 1;
    for (size_t i = 0; i < n; i++) {
        s = s * 1103515245u + 12345u;
        float noise = ((s >> 9) / 8388608.0f - 1.0f) * 0.000548f;  // uniform, -70 dBFS RMS
        mic[i] = ((long)i >= d ? (float)gain * far[i - d] : 0.0f) + noise;
    }
    roomaec::Params prm = roomaec::default_params(rate, 1);
    set_params(&prm);
    roomaec::Canceller *a = roomaec::create(prm);
    if (!a) return 1;
    std::vector<float> out(H);
    double in = 0, err = 0;
    for (size_t b = 0; b + H <= n; b += H) {
        roomaec::process(a, &far[b], &mic[b], out.data());
        if ((long)b < from || (long)b + H > to) continue;
        const float *e = getenv("AECDELAY_OUTPUT") ? out.data() : a->err;   // the suppressor's output instead
        for (int i = 0; i < H; i++) { in += (double)mic[b + i] * mic[b + i]; err += (double)e[i] * e[i]; }
    }
    roomaec::destroy(a);
    printf("%.2f\n", 10 * log10(in / err));
    return 0;
}
