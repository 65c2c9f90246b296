// Noise suppression in the spectrum of roomd's echo canceller's residual echo suppressor.
//
// Why here and not webrtc's NS: webrtc-audio-processing 0.3's noise suppressor works on its own
// 10 ms frames with a 16 ms analysis window and adds 7 ms to the capture path at 48 kHz
// (`scripts/bench apm`, apm.delay_ms). The canceller's suppressor already has every block's
// spectrum in a low-delay overlap-add (2 ms); multiplying a noise gain into the same per-bin
// gains costs no delay at all. So when roomd's canceller runs, webrtc's NS is off and this runs.
//
// Per bin k, per 10 ms block, on the residual's power |E_k|² (before any gain):
//   S_k    = a·S_k + (1−a)·|E_k|²                 smoothed power (a = 0.7: ~3 blocks)
//   N_k    = S_k when S_k < N_k, else N_k·r        the noise floor: follows every dip of S at
//                                                   once and rises slowly (r: 2 dB/s) — speech
//                                                   has pauses in every bin, noise has no peaks
//   ξ_k    = β·A_k/(b·N_k) + (1−β)·max(|E_k|²/(b·N_k) − 1, 0)
//                                                   a-priori SNR, decision-directed (β = 0.98;
//                                                   A_k is the last block's cleaned power; b
//                                                   corrects the minimum's low bias, 2 dB)
//   g_k    = max(ξ_k/(1+ξ_k), floor)               Wiener gain, floored by the level
// The floor is the suppression level's (webrtc's NS levels: low −6, moderate −12, high −18,
// very high −21 dB), so the noise that remains keeps its character instead of "breathing".
// While someone talks in a reverberant room the floor rises towards kReverberantFloor (0 dB: the
// noise is left alone under a reverberant talker's words) with the dereverberation's measured
// reverberance r (dereverb.h; 0 for a dry talker, 1 in every
// far-field room of scripts/bench farfield) times `speech`, a block's speech presence (a fifth of
// the 0.3-4 kHz bins 8 dB above the floor with its bias; in within ~30 ms, out over ~200 ms):
// floor = level's·(kReverberantFloor/level's)^(r·speech), in dB a straight line. There a far
// talker stands close to the room's noise and reverberation, and a floor of −18 dB cut into their
// speech more than it took noise away: STOI 0.765 → 0.782 at 3 m, 0.810 → 0.826 at 2.4 m, double
// talk 0.788 → 0.799, the other rooms +0.000 … +0.004; mean PESQ 1.352 → 1.349
// (docs/benchmarks.md, "Far-field capture"). From −3 to 0 dB (2026-11-30): 3 m 0.782 → 0.785 (the
// MVDR anchor's 0.783), 2.4 m 0.826 → 0.830, walking 0.886 → 0.888, mean PESQ 1.354 → 1.339;
// −1.5 and −0.75 dB: 3 m 0.784 / 0.785; `scripts/bench noise` unchanged (its talker is dry). Speech presence because r also reads high in a noisy
// room (noise fills a dry talker's pauses as a reverberant tail would): with r alone the noise
// between words stayed 3.5-6 dB louder (scripts/bench noise, SNR gained: white 21.7 → 18.2 dB,
// pink 21.3 → 15.0); with it 21.7 and 21.3. The canceller passes r only while the far end has
// been quiet for 0.5 s or the room talks over it (kalman_aec.h, ns_reverb: the residual echo's
// tail reads as reverberant, and a raised floor let it through). A dry, quiet talker (close
// talk, the self-test, one mic) keeps the level's floor.

#ifndef ROOM_SPECTRAL_NS_H
#define ROOM_SPECTRAL_NS_H

#include <math.h>
#include <stdlib.h>

namespace roomaec {

struct NoiseSuppressor {
    int K;
    float *smoothed, *noise, *cleaned;  // K each
    float floor_gain;
    static constexpr float kReverberantFloor = 1.0f;   // 0 dB: the floor at reverberance 1
    // … while the far end plays or has just stopped (the room talking over it): −3 dB, as before
    // the 0 dB floor. With 0 dB then too, the double-talk bench's rev120-loud chain removed 0.14 dB
    // less echo than its canceller (0.045 with −3 dB, the same hour): a double-talk factor below
    // 0.1 in a far-end-only run, or the far end resuming while the raised floor decays, let
    // residual echo through.
    static constexpr float kEchoTimeFloor = 0.708f;
    int k0, k1;          // the bins speech presence is judged over (300 Hz-4 kHz; set by the owner)
    float speech;        // 0 … 1: how much of the raised floor applies (speech present, smoothed)
    long blocks;
    bool on;
};

static void ns_free(NoiseSuppressor *n) {
    free(n->smoothed); free(n->noise); free(n->cleaned);
    n->smoothed = n->noise = n->cleaned = nullptr;
}

static float ns_floor_for_level(int level) {
    return level <= 0 ? 0.5f : level == 1 ? 0.25f : level == 2 ? 0.125f : 0.089f;
}

static bool ns_init(NoiseSuppressor *n, int K, int level) {
    n->K = K;
    n->smoothed = (float *)calloc((size_t)K, sizeof(float));
    n->noise = (float *)calloc((size_t)K, sizeof(float));
    n->cleaned = (float *)calloc((size_t)K, sizeof(float));
    n->floor_gain = ns_floor_for_level(level);
    n->blocks = 0;
    n->on = false;
    n->k0 = n->k1 = 0;  // no speech presence, and so no raised floor, unless the owner sets them
    n->speech = 0;
    return n->smoothed && n->noise && n->cleaned;
}

// Multiplies the noise gain of this block into G (bins below count ≤ K: the output band; the
// state above waits unchanged).
// Fr/Fi is the block's spectrum before any gain; reverberance 0 … 1 (dereverb.h: 0 when it is
// off or held) raises the floor towards `top` (kReverberantFloor, or kEchoTimeFloor while the
// far end's echo may be in the room).
static void ns_apply(NoiseSuppressor *n, const float *Fr, const float *Fi, float *G, int count,
                     float reverberance = 0, float top = NoiseSuppressor::kReverberantFloor) {
    if (!n->on) return;
    // Speech present: at least a fifth of the 0.3-4 kHz bins 8 dB above the noise estimate with
    // its 2 dB bias (6.3 × 1.585);
    // the raised floor follows within ~30 ms and leaves over ~200 ms.
    float floor_gain = n->floor_gain;
    if (n->blocks > 0 && n->k1 > n->k0) {
        int loud = 0;
        for (int k = n->k0; k < n->k1 && k < n->K; k++)
            if (Fr[k] * Fr[k] + Fi[k] * Fi[k] > 6.3f * 1.585f * n->noise[k]) loud++;
        const bool present = loud * 5 >= n->k1 - n->k0;
        n->speech += present ? 0.3f * (1 - n->speech) : -0.05f * n->speech;
    }
    const float r = (reverberance > 1 ? 1 : reverberance) * n->speech;
    if (r > 0 && floor_gain < top)
        floor_gain *= powf(top / floor_gain, r);
    // Chosen with scripts/bench noise over floors −15…−24 dB, biases 0…4 dB, rises 1…4 dB/s,
    // smoothing 0.5…0.85 and β 0.95…0.995: none beat these by more than the runs' noise.
    const float a = 0.7f, rise = 1.0046f /* 2 dB/s */, beta = 0.98f, bias = 1.585f /* 2 dB */;
    const bool first = n->blocks == 0;
    const int K = count < n->K ? count : n->K;
    for (int k = 0; k < K; k++) {
        float pe = Fr[k] * Fr[k] + Fi[k] * Fi[k];
        float s = first ? pe : a * n->smoothed[k] + (1 - a) * pe;
        n->smoothed[k] = s;
        float nk = (first || s < n->noise[k]) ? s : n->noise[k] * rise;
        n->noise[k] = nk;
        float floor_power = bias * nk + 1e-20f;
        float post = pe / floor_power - 1;
        float prio = beta * n->cleaned[k] / floor_power + (1 - beta) * (post > 0 ? post : 0);
        float g = prio / (1 + prio);
        if (g < floor_gain) g = floor_gain;
        n->cleaned[k] = g * g * pe;
        G[k] *= g;
    }
    n->blocks++;
}

}  // namespace roomaec

#endif
