// scripts/bench aecdelay: roomd's canceller (Sources/CWebRTCAPM/kalman_aec.h) offline, on a pure
// delay: how fast its linear filter converges as a function of where the echo's delay falls.
//   aecdelay FAR.f32 DELAY_MS GAIN_DB FROM_S TO_S
// FAR.f32: raw float32 mono at 48 kHz, the far end. The mic is the far end delayed and scaled,
// plus -70 dBFS white noise. Prints the linear filter's ERLE (mic power / linear error power)
// over the blocks from FROM_S to TO_S seconds, as one number.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>
#include "kalman_aec.h"

int main(int argc, char **argv) {
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
    roomaec::Canceller *a = roomaec::create(roomaec::default_params(rate, 1));
    if (!a) return 1;
    std::vector<float> out(H);
    double in = 0, err = 0;
    for (size_t b = 0; b + H <= n; b += H) {
        roomaec::process(a, &far[b], &mic[b], out.data());
        if ((long)b < from || (long)b + H > to) continue;
        for (int i = 0; i < H; i++) { in += (double)mic[b + i] * mic[b + i]; err += (double)a->err[i] * a->err[i]; }
    }
    roomaec::destroy(a);
    printf("%.2f\n", 10 * log10(in / err));
    return 0;
}
