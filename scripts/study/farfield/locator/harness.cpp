// The talker locator (Sources/CCaptureChain/talker_locator.h) offline: feeds a 4-channel PCM16
// 48 kHz WAV (44-byte header; roomsim-scene's renderings) block by block with a listen flag per
// 10 ms block from a file (one 0/1 per line: oracle voice activity), prints per block:
// t azimuth locked confidence changes listen. Built by locator.py.
#include <cstdio>
#include <cstdint>
#include <vector>
#include "kalman_aec.h"
#include "talker_locator.h"
// usage: harness mics.wav (4ch PCM16 48k, 44-byte header) -> per 10 ms: t azimuth locked confidence
int main(int argc, char **argv) {
    FILE *f = fopen(argv[1], "rb"); fseek(f, 0, SEEK_END); long n = ftell(f); fseek(f, 44, SEEK_SET);
    std::vector<int16_t> d((n - 44) / 2); fread(d.data(), 2, d.size(), f);
    float xyz[12] = {0.032f,0,0, 0,0.032f,0, -0.032f,0,0, 0,-0.032f,0};
    const char *why; auto *l = roomloc::create(48000, 4, xyz, &why);
    size_t frames = d.size() / 4; std::vector<float> p[4]; for (auto &v : p) v.resize(480);
    const float *ptr[4] = {p[0].data(), p[1].data(), p[2].data(), p[3].data()};
    FILE *lf = fopen(argv[2], "r");
    for (size_t b = 0; b + 480 <= frames; b += 480) {
        double e = 0;
        for (int i = 0; i < 480; i++) for (int m = 0; m < 4; m++) { p[m][i] = d[(b + i) * 4 + m] / 32768.0f; }
        for (int i = 0; i < 480; i++) e += p[0][i] * p[0][i];
        int listen = 0; if (fscanf(lf, "%d", &listen) != 1) listen = 0;
        roomloc::process(l, ptr, listen, 0, nullptr);
        printf("%.2f %.1f %d %.3f %u %d\n", b / 48000.0, l->azimuth_deg, l->locked, l->confidence, l->changes, listen);
    }
}
