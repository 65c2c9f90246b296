// Dereverberation of the beam, in the spectrum of roomd's echo canceller's residual echo
// suppressor (the same low-delay overlap-add as spectral_ns.h: no delay of its own). Chosen by
// the offline causal study in scripts/study/farfield (REPORT.md, docs/audio-engine.md "The beam
// and the dereverberation"): one-channel online WPE below 4 kHz, then late-reverberation
// suppression. Included by kalman_aec.h; everything is allocated in derev_init.
//
// Per 10 ms block, on the residual spectrum E_k (bins k):
//  1. Weighted prediction error (WPE, recursive least squares), bins below 4 kHz: the late
//     reverberation in E_k(t) is predicted from the observations `kDelay` … `kDelay + kTaps − 1`
//     blocks back and subtracted,
//        e = x − gᴴ x̃,   x̃ = [x(t−3) … x(t−8)]
//     with the RLS's weight 1/λ, λ = √(|x|²·|e|²) (the geometric mean of the observed and the
//     dereverberated power: the study's best), floored 40 dB below its running mean; g and the
//     inverse correlation P are updated every 2nd block (forgetting 0.995). Speech, whose
//     structure changes within 30 ms, is not predictable from 30-80 ms ago; its reverberation is.
//  2. Late-reverberation suppression (Lebart; Habets): the late reverberation's power is that of
//     the signal Tl = 50 ms ago, decayed as a room with RT60 0.5 s decays, halved (κ = 0.5):
//        λ_late(t) = κ·e^{−2δ·Tl}·S(t − Tl),   δ = 3·ln 10 / RT60,   S = 0.6·S + 0.4·|e|²
//     and a decision-directed Wiener gain (β 0.9, floor −18 dB) is multiplied into the block's
//     gains. A fixed RT60: the study found 0.5 s for every room within 0.02 PESQ / 0.006 STOI of
//     the true one (0.3-0.8 s rooms). Below 350 Hz the estimate is halved again (κ = 0.25): a
//     voice's lowest harmonics hold for longer than 50 ms, and the model takes what is still
//     sounding for what the room left behind (walking's 189-300 Hz bands' STOI: 0.812, 0.839,
//     0.876 with the late stage at full strength there; 0.821, 0.848, 0.880 as it is now).
//     The far-field scenes with κ 0.25 there and the −18 dB floor, against κ 0.5 everywhere and
//     −12 dB (2026-11-30, one build): PESQ up in every room (mean 1.348 → 1.368), STOI within
//     −0.001 … +0.004 (mean 0.868 → 0.869).
// How reverberant the room is decides how much of both is applied. Dry speech (a talker close to
// the array, or an echo-free test signal) decays as fast as the talker stops, and a fixed room
// model would take the syllables' ends for reverberation (measured: close-talk PESQ 3.98 → 3.06
// with both stages, 3.20 late suppression alone, 3.71 WPE alone). So the decay is measured: in
// bins of 0.5-4 kHz standing 20 dB above their noise floor and falling, the ratio of the power
// now to the smoothed power Tl earlier, whose 10th percentile (tracked per observation) is the
// fastest decay the room allows — a reverberant room's tail fills in what a dry talker's
// pauses leave empty (farfield scenes, RT60 0.3-0.8 s: 0.010-0.027 offline on mic 0; dry espeak
// voices in roomd: 0.0001-0.0017). Both stages — WPE's subtraction and the late estimate — are
// scaled by the reverberance, (that / kReverberantDecay − 0.25) / 0.5 clipped to 0 … 1. It
// starts dry (0): with no evidence of a reverberant room nothing is taken off, and a room's
// reverberation shows within ~1 s of speech.
//
// When the beam turns, WPE's subtraction drops out and fades back in over kSettleBlocks while the
// filter relearns (derev_new_path): what it learnt predicts the reverberation heard through the
// old beam.
//
// Bins whose filter went non-finite or whose correlation grew without bound (digital silence
// for minutes) start afresh: a bad bin costs a little reverberation, never a burst.
#ifndef ROOMD_DEREVERB_H
#define ROOMD_DEREVERB_H

#include <math.h>
#include <stdlib.h>
#include <string.h>

namespace roomaec {

struct Dereverb {
    static constexpr int kTaps = 6, kDelay = 3, kHistory = kDelay + kTaps;
    static constexpr float kForget = 0.995f, kFloor = 1e-4f /* −40 dB */;
    static constexpr float kLateMs = 50, kRT60 = 0.5f, kKappa = 0.5f, kMinGain = 0.126f /* −18 dB */;
    // κ · kLowKappaScale in the bins k < kLowHz·Nr/rate: centres up to 281 Hz at 48 kHz, 312 Hz
    // at 16 kHz
    static constexpr float kLowHz = 350, kLowKappaScale = 0.5f;
    static constexpr float kReverberantDecay = 0.01f, kDecayQuantile = 0.1f, kDecayStep = 0.03f;
    int K;          // bins the gains cover (the suppressor's)
    int Kw;         // bins WPE works on (below 4 kHz)
    int Nl;         // blocks of the late reverberation's delay
    int Klow;       // bins below kLowHz, whose late estimate is scaled by kLowKappaScale
    float decay;    // κ·e^{−2δ·Tl}
    long blocks;
    bool on;
    bool wpe, late;     // the two stages (both by default; ROOMD_DEREVERB measures each alone)
    // WPE, per bin: P (kTaps² complex, row-major), g (kTaps), the last kHistory observations
    // (ring, slot (head + j) % kHistory is j + 1 blocks back), the running mean power
    float *Pr, *Pi, *gr, *gi, *hr, *hi, *pmean;
    int head;
    // late reverberation, per bin: smoothed power ring (Nl + 1 blocks), last cleaned power
    float *S, *prev;
    int shead;
    // the room's decay (see above): the observation's smoothed power ring (before WPE), its noise
    // floor, the decay ratio's tracked quantile (natural log), the bins it is measured over
    float *Sx, *xfloor;
    float qlog;
    int kq0, kq1;
    float reverberance;   // min(1, exp(qlog) / kReverberantDecay): what both stages are scaled by
    int settled;          // blocks since the signal's room changed (a beam switch: derev_new_path)
};

// Blocks over which WPE's subtraction comes back after the beam turns (derev_new_path): 1 s, a
// quarter of the RLS's memory (forgetting 0.995 every 2nd block: ~200 updates, ~4 s); measured
// against 0.5 s in the far-field scenes (walking 0.896 against 0.894).
static constexpr int kSettleBlocks = 100;

// The signal now comes through another beam: its reverberation is another filter of the room,
// which the prediction learnt through the last beam does not fit.
static inline void derev_new_path(Dereverb *d) { d->settled = 0; }

// How much of WPE's subtraction applies now: 0 right after a new path, 1 once settled.
static inline float derev_settle(const Dereverb *d) {
    return d->settled >= kSettleBlocks ? 1.0f : (float)d->settled / kSettleBlocks;
}

static void derev_free(Dereverb *d) {
    float *b[] = {d->Pr, d->Pi, d->gr, d->gi, d->hr, d->hi, d->pmean, d->S, d->prev, d->Sx, d->xfloor};
    for (float *p : b) free(p);
    memset(d, 0, sizeof *d);
}

static void derev_reset_bin(Dereverb *d, int k) {
    const int T = Dereverb::kTaps;
    float *pr = d->Pr + (size_t)k * T * T, *pi = d->Pi + (size_t)k * T * T;
    memset(pr, 0, sizeof(float) * T * T);
    memset(pi, 0, sizeof(float) * T * T);
    for (int i = 0; i < T; i++) pr[i * T + i] = 1;
    memset(d->gr + (size_t)k * T, 0, sizeof(float) * T);
    memset(d->gi + (size_t)k * T, 0, sizeof(float) * T);
}

// K bins of Nr-point spectra at `rate`, hop `hop` samples.
static bool derev_init(Dereverb *d, int K, int Nr, int rate, int hop) {
    memset(d, 0, sizeof *d);
    d->K = K;
    int kw = (int)(4000.0f * Nr / rate) + 1;
    d->Kw = kw < K ? kw : K;
    const int kl = (int)(Dereverb::kLowHz * Nr / rate);
    d->Klow = kl < K ? kl : K;
    const float block_s = (float)hop / rate;
    d->Nl = (int)lroundf(Dereverb::kLateMs / 1000 / block_s);
    if (d->Nl < 1) d->Nl = 1;
    const float delta = 3 * logf(10) / Dereverb::kRT60;
    d->decay = Dereverb::kKappa * expf(-2 * delta * d->Nl * block_s);
    const int T = Dereverb::kTaps, H = Dereverb::kHistory, W = d->Kw;
    d->Pr = (float *)calloc((size_t)W * T * T, sizeof(float));
    d->Pi = (float *)calloc((size_t)W * T * T, sizeof(float));
    d->gr = (float *)calloc((size_t)W * T, sizeof(float));
    d->gi = (float *)calloc((size_t)W * T, sizeof(float));
    d->hr = (float *)calloc((size_t)W * H, sizeof(float));
    d->hi = (float *)calloc((size_t)W * H, sizeof(float));
    d->pmean = (float *)calloc((size_t)W, sizeof(float));
    d->S = (float *)calloc((size_t)K * (d->Nl + 1), sizeof(float));
    d->prev = (float *)calloc((size_t)K, sizeof(float));
    d->Sx = (float *)calloc((size_t)K * (d->Nl + 1), sizeof(float));
    d->xfloor = (float *)calloc((size_t)K, sizeof(float));
    if (!d->Pr || !d->Pi || !d->gr || !d->gi || !d->hr || !d->hi || !d->pmean || !d->S || !d->prev
        || !d->Sx || !d->xfloor) { derev_free(d); return false; }
    d->kq0 = (int)(500.0f * Nr / rate);
    d->kq1 = d->Kw;
    d->qlog = logf(0.25f * Dereverb::kReverberantDecay);   // dry until the room shows otherwise
    d->reverberance = 0;
    d->settled = kSettleBlocks;
    for (int k = 0; k < W; k++) derev_reset_bin(d, k);
    d->wpe = d->late = true;
    return true;
}

// One bin's WPE step: x (this block's observation) → its dereverberated value.
static inline void wpe_bin(Dereverb *d, int k, bool update, float &xr, float &xi) {
    const int T = Dereverb::kTaps, H = Dereverb::kHistory;
    float *pr = d->Pr + (size_t)k * T * T, *pi = d->Pi + (size_t)k * T * T;
    float *gr = d->gr + (size_t)k * T, *gi = d->gi + (size_t)k * T;
    const float *hr = d->hr + (size_t)k * H, *hi = d->hi + (size_t)k * H;
    // x̃: blocks kDelay … kDelay + T − 1 back
    float tr[Dereverb::kTaps], ti[Dereverb::kTaps];
    float tx = 0;
    for (int j = 0; j < T; j++) {
        const int slot = (d->head + Dereverb::kDelay - 1 + j) % H;
        tr[j] = hr[slot]; ti[j] = hi[slot];
        tx += tr[j] * tr[j] + ti[j] * ti[j];
    }
    // e = x − gᴴ x̃
    float pr_ = 0, pi_ = 0;
    for (int j = 0; j < T; j++) { pr_ += gr[j] * tr[j] + gi[j] * ti[j]; pi_ += gr[j] * ti[j] - gi[j] * tr[j]; }
    const float er = xr - pr_, ei = xi - pi_;
    const float x2 = xr * xr + xi * xi, e2 = er * er + ei * ei;
    const float p = sqrtf(x2 * e2);
    d->pmean[k] = 0.99f * d->pmean[k] + 0.01f * p;
    if (update && tx > 0 && p > 0) {
        const float lam = fmaxf(p, Dereverb::kFloor * d->pmean[k]);
        // u = P x̃, den = α λ + x̃ᴴ u, k = u / den, P = (P − k uᴴ) / α, g += k e*
        float ur[Dereverb::kTaps], ui[Dereverb::kTaps];
        float den = Dereverb::kForget * lam;
        for (int i = 0; i < T; i++) {
            float sr = 0, si = 0;
            for (int j = 0; j < T; j++) {
                const float ar = pr[i * T + j], ai = pi[i * T + j];
                sr += ar * tr[j] - ai * ti[j]; si += ar * ti[j] + ai * tr[j];
            }
            ur[i] = sr; ui[i] = si;
            den += tr[i] * sr + ti[i] * si;   // Re(x̃ᵢ* uᵢ); the sum is real for Hermitian P
        }
        const float inv = 1 / den, ia = 1 / Dereverb::kForget;
        bool finite = isfinite(inv) && den > 0;
        for (int i = 0; finite && i < T; i++) {
            const float kr = ur[i] * inv, ki = ui[i] * inv;
            // P_ij −= k_i u_j*, kept Hermitian by computing j ≥ i and mirroring
            for (int j = i; j < T; j++) {
                const float nr = (pr[i * T + j] - (kr * ur[j] + ki * ui[j])) * ia;
                const float ni = (pi[i * T + j] - (ki * ur[j] - kr * ui[j])) * ia;
                pr[i * T + j] = nr; pi[i * T + j] = ni;
                pr[j * T + i] = nr; pi[j * T + i] = -ni;
            }
            pi[i * T + i] = 0;
            gr[i] += kr * er + ki * ei;   // k e*
            gi[i] += ki * er - kr * ei;
        }
        float trace = 0;
        for (int i = 0; i < T; i++) trace += pr[i * T + i];
        if (!finite || !isfinite(trace) || trace > 1e12f || !isfinite(gr[0] + gi[0])) derev_reset_bin(d, k);
    }
    xr = er; xi = ei;
}

// One block: the residual spectrum Fr/Fi (bins < count) is dereverberated in place and the late
// reverberation's gain multiplied into G.
static void derev_apply(Dereverb *d, float *Fr, float *Fi, float *G, int count) {
    if (!d->on) return;
    const int H = Dereverb::kHistory, K = count < d->K ? count : d->K;
    const bool update = (d->blocks & 1) == 0;
    const int L = d->Nl + 1;
    const int now = d->shead, old = (d->shead + 1) % L;   // old: Nl blocks back (written Nl blocks ago)
    // 0. How fast the room lets sound decay, from the observation before any dereverberation.
    {
        const float step = Dereverb::kDecayStep, tau = Dereverb::kDecayQuantile;
        for (int k = d->kq0; k < d->kq1 && k < K; k++) {
            const float x2 = Fr[k] * Fr[k] + Fi[k] * Fi[k];
            const float s_prev = d->Sx[(size_t)((now + L - 1) % L) * d->K + k];
            const float s = 0.6f * s_prev + 0.4f * x2;
            d->Sx[(size_t)now * d->K + k] = s;
            d->xfloor[k] = d->xfloor[k] <= 0 || s < d->xfloor[k] ? s : d->xfloor[k] * 1.002f;
            const float s_old = d->Sx[(size_t)old * d->K + k];
            if (d->blocks > L && s_old > 100 * d->xfloor[k] && x2 < s_old && x2 > 0) {
                const float q = logf(x2 / s_old);
                d->qlog += q < d->qlog ? -step * (1 - tau) : step * tau;
            }
        }
        const float r = (expf(d->qlog) / Dereverb::kReverberantDecay - 0.25f) / 0.5f;
        d->reverberance = r < 0 ? 0 : r > 1 ? 1 : r;
    }
    const float beta = d->reverberance;
    const float beta_wpe = beta * derev_settle(d);
    if (d->settled < kSettleBlocks) d->settled++;
    // 1. WPE below 4 kHz; the history takes the observations before dereverberation.
    const int newest = (d->head + H - 1) % H;   // becomes "1 block back" for the next block
    for (int k = 0; d->wpe && k < d->Kw && k < K; k++) {
        const float xr = Fr[k], xi = Fi[k];
        wpe_bin(d, k, update, Fr[k], Fi[k]);
        Fr[k] = xr + beta_wpe * (Fr[k] - xr);   // as much of the prediction taken off as the room is reverberant
        Fi[k] = xi + beta_wpe * (Fi[k] - xi);
        d->hr[(size_t)k * H + newest] = xr;
        d->hi[(size_t)k * H + newest] = xi;
    }
    d->head = newest;
    if (!d->late) { d->shead = old; d->blocks++; return; }
    // 2. Late reverberation.
    const float decay = d->decay * beta, decay_low = decay * Dereverb::kLowKappaScale;
    for (int k = 0; k < K; k++) {
        const float y2 = Fr[k] * Fr[k] + Fi[k] * Fi[k];
        const float s_prev = d->S[(size_t)((now + L - 1) % L) * d->K + k];
        d->S[(size_t)now * d->K + k] = 0.6f * s_prev + 0.4f * y2;
        const float late = (k < d->Klow ? decay_low : decay) * d->S[(size_t)old * d->K + k] + 1e-20f;
        const float post = y2 / late - 1;
        float xi = 0.9f * d->prev[k] / late + 0.1f * (post > 0 ? post : 0);
        if (xi < 0.00316f) xi = 0.00316f;   // −25 dB
        float g = xi / (1 + xi);
        if (g < Dereverb::kMinGain) g = Dereverb::kMinGain;
        d->prev[k] = g * g * y2;
        G[k] *= g;
    }
    d->shead = old;
    d->blocks++;
}

}  // namespace roomaec

#endif
