// scripts/bench arraycost: what each stage of roomd's capture chain costs per 10 ms block on this
// machine, timed offline (no sound card, no other thread): the beam (array_beam.h, 4 mics of
// board/sim), the canceller on it (kalman_aec.h) with and without the dereverberation
// (dereverb.h), a switch of echo-path bank, and the talker locator (talker_locator.h) listening.
// Inputs are white noise (mics) and noise (far end) at speech-like levels; the work per block does
// not depend on the signal. Prints JSON lines: chain.stage_us per stage (median over 3000 blocks,
// after 300 blocks of warm-up).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>
#include "kalman_aec.h"
#include "talker_locator.h"
#include "array_beam.h"

static float noise(unsigned &s) { s = s * 1664525u + 1013904223u; return ((int)(s >> 8) - (1 << 23)) / (float)(1 << 23); }

template <class F> static double median_us(int blocks, F &&step) {
    std::vector<double> t;
    for (int b = 0; b < blocks + 300; b++) {
        auto a = std::chrono::steady_clock::now();
        step(b);
        auto z = std::chrono::steady_clock::now();
        if (b >= 300) t.push_back(std::chrono::duration<double, std::micro>(z - a).count());
    }
    std::nth_element(t.begin(), t.begin() + t.size() / 2, t.end());
    return t[t.size() / 2];
}

static void print(const char *stage, double us, const char *what) {
    printf("{\"bench\": \"arraycost\", \"metric\": \"chain.stage_us\", \"stage\": \"%s\", \"value\": %.1f, \"unit\": \"us per 10 ms block\", \"rate\": 48000, \"measure\": \"%s\"}\n", stage, us, what);
}

int main() {
    const int rate = 48000, H = 480, M = 4, blocks = 3000;
    const float xyz[] = {0.032f, 0, 0, 0, 0.032f, 0, -0.032f, 0, 0, 0, -0.032f, 0};
    unsigned seed = 1;
    std::vector<std::vector<float>> mic(M, std::vector<float>(H));
    std::vector<float> far(H), beam_out(H), out(H);
    const float *planes[M];
    for (int m = 0; m < M; m++) planes[m] = mic[m].data();
    auto fill = [&]() {
        for (int i = 0; i < H; i++) far[i] = 0.05f * noise(seed);
        for (int m = 0; m < M; m++) for (int i = 0; i < H; i++) mic[m][i] = 0.02f * noise(seed) + 0.3f * far[i];
    };
    roomaec::Params prm = roomaec::default_params(rate, 1);
    prm.ns_level = 2;
    roombeam::Beam *beam = roombeam::create(rate, M, xyz, H, 1024, rate / 500);
    const auto designed = std::chrono::steady_clock::now();
    roombeam::Beam *adaptive = roombeam::create(rate, M, xyz, H, 1024, rate / 500, true);
    const double design_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - designed).count();
    roomaec::Canceller *plain = roomaec::create(prm);
    roomaec::Canceller *banked = roomaec::create(prm, roombeam::kBeams + 1);
    const char *why = nullptr;
    roomloc::Locator *loc = roomloc::create(rate, M, xyz, &why);
    if (!beam || !adaptive || !plain || !banked || !loc) { fprintf(stderr, "arraycost: create failed\n"); return 1; }
    plain->ns.on = banked->ns.on = true;
    roomaec::set_band(plain, 8000); roomaec::set_band(banked, 8000);
    roombeam::steer(beam, 5);
    print("beam", median_us(blocks, [&](int) { fill(); roombeam::process(beam, planes, beam_out.data()); }),
          "4 mics: analysis, one beam (24 + mic 0 designed at start), synthesis");
    roombeam::steer(adaptive, 5);
    print("beam_adaptive", median_us(blocks, [&](int) { fill(); roombeam::process(adaptive, planes, beam_out.data()); }),
          (std::string("the same with the adaptive choice: cross-spectra of 4 mics, 8 bins of the beam in use x ")
           + std::to_string(roombeam::kCandidates) + " designs revisited").c_str());
    adaptive->room_quiet = 1;
    print("beam_adaptive_quiet", median_us(blocks, [&](int) { fill(); roombeam::process(adaptive, planes, beam_out.data()); }),
          "the same in a block nobody talks in: the room's noise averaged too (what the echo-time design is chosen by)");
    adaptive->fixed_echo_design = true;   // computed in full, nothing changed
    print("echo_design_choice", median_us(blocks, [&](int b) { roombeam::choose_echo_design(adaptive, b % roombeam::kBeams); }),
          "choosing a beam's echo-time design over the room's noise (once per beam taken up with a new echo path)");
    printf("{\"bench\": \"arraycost\", \"metric\": \"chain.beam_design_ms\", \"value\": %.1f, \"unit\": \"ms\", "
           "\"measure\": \"designing the adaptive beam's %d x %d designs at start (once per engine start)\"}\n", design_ms,
           roombeam::kCandidates, roombeam::kBeams);
    print("canceller", median_us(blocks, [&](int) { fill(); roomaec::process(plain, far.data(), mic[0].data(), out.data()); }),
          "roomd's canceller with NS, 8 kHz output band (wideband speech), dereverberation off");
    banked->derev.on = true;
    print("canceller_dereverb", median_us(blocks, [&](int) { fill(); roomaec::process(banked, far.data(), mic[0].data(), out.data()); }),
          "the same with the dereverberation (WPE below 4 kHz + late-reverb gains) on");
    print("bank_switch", median_us(blocks, [&](int b) { roomaec::select_bank(banked, b % 2 ? 3 : 4); }),
          "moving the canceller to another beam's echo path (once per talker change)");
    print("locator_listening", median_us(blocks, [&](int) { fill(); roomloc::process(loc, planes, 1, 0, nullptr); }),
          "the talker locator on a block it listens to (4 spectra, 72 directions)");
    print("locator_idle", median_us(blocks, [&](int) { fill(); roomloc::process(loc, planes, 0, 0, nullptr); }),
          "the talker locator on a block it does not listen to (mic 0's noise floor)");
    print("fill", median_us(blocks, [&](int) { fill(); }), "making the test signal (subtract from each stage above)");
    roombeam::destroy(beam); roombeam::destroy(adaptive); roomaec::destroy(plain); roomaec::destroy(banked); roomloc::destroy(loc);
    return 0;
}
