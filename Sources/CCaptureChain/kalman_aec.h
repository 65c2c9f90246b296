// roomd's acoustic echo canceller: a partitioned-block frequency-domain adaptive filter whose
// step size comes from a diagonal Kalman model of the echo path (a per-bin, per-partition error
// covariance), followed by a residual echo suppressor whose residual estimate is that covariance.
// Written for roomd (docs/echo-canceller.md, "Double talk"); included once, by apm_shim.cpp, so the
// shim stays one translation unit. Plain C++ with C-style memory: everything is allocated in
// kaec_create, the per-block path allocates nothing.
//
// Per 10 ms block of H samples (overlap-save, FFT size N = 4H rounded up to a power of two):
//   X_p      spectrum of the far end (last N samples) p blocks ago, p < P (P·H ≥ tail)
//   Ŷ = Σ W_p X_p, ŷ = last H samples of IFFT(Ŷ), e = mic − ŷ, E = FFT([0 … 0, e])
//   R = (H/N) Σ |X_p|² P_p                      expected |E|² due to the filter's own error
//   Ψ = α Ψ + (1−α) |E|²                        error power (near end + noise + residual)
//   μ_p = d · P_p / (R + Ψ)                     Kalman gain; d < 1 when the block's error is far
//                                               above what the filter's error explains (double talk)
//   W_p += (H/N) μ_p X_p* E;  one partition per block is constrained to N−H+1 taps; for p ≥ 1
//                                the update is tapered in time (Params.grad_window: a Hann of
//                                period N, 3 taps in frequency), so every tap learns alike
//   P_p = A² max(0, 1 − g (H/N)² μ_p |X_p|²) P_p + (1−A²) |W_p|²
// Residual echo suppression on the error, in a low-delay weighted overlap-add (analysis window of
// N/2 samples, synthesis over the last H+D: D samples of delay, 2 ms): per bin
//   G = max(g_min, 1 − c·κ·(R + ε|Ŷ|²) / |E_w|²)
// where κ calibrates the model's R against the true residual (measured: R overestimates it by
// 10-20 dB, κ = 0.1 at moderate suppression). Above the linear band (12 kHz) the suppressor
// applies the mean gain of 6-12 kHz.
// Output band (set_band): what the codec sends. Above it nothing reaches a listener, so the
// filter neither adapts nor estimates there (wideband speech: 8 kHz, a third of the linear
// band's bins) and the suppressor zeroes it instead of leaving that band's echo in roomd's own
// output. Default: the whole band, as before.
#ifndef ROOMD_KALMAN_AEC_H
#define ROOMD_KALMAN_AEC_H

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "room_fft.h"

#include "spectral_ns.h"
#include "dereverb.h"

// x86-64: the hot functions are also compiled for AVX2 and picked at load time (an ifunc), as the
// baseline target has only 4-wide SSE2 vectors. AVX2 without FMA: no contraction, so the output
// is bit-identical to the SSE2 build's; only the vector width changes (standalone, 3000 blocks on
// the 2-core VM: 48 -> 35 us per 10 ms block). Other targets (arm64: NEON) as before.
// Sanitizer builds (scripts/sanitize) keep only the baseline: this code is linked into the
// executables, so the dynamic loader runs the ifunc's resolver while relocating them, before the
// sanitizer runtime is initialised, and the instrumented resolver crashed there (SIGSEGV in
// __tsan_func_entry before main). Same results either way (see above), only slower.
#if defined(__has_feature)
#if __has_feature(thread_sanitizer) || __has_feature(address_sanitizer)
#define ROOMAEC_SANITIZED 1
#endif
#endif
#if defined(__x86_64__) && defined(__clang__) && defined(__linux__) && !defined(ROOMAEC_SANITIZED)
#define ROOMAEC_HOT __attribute__((target_clones("avx2", "default")))
#else
#define ROOMAEC_HOT
#endif

namespace roomaec {

// A low-delay analysis/synthesis pair for frames of Nr samples, hop H, output delay D: the
// analysis window wa rises over Nr − D and falls over D; the product wa·ws rises over D, is 1
// over H − D and falls over D at the end of the frame, so consecutive frames sum to 1 and the
// output lags the input by D samples. Shared by the suppressor and the beam (array_beam.h), so
// both delay the signal alike.
static void lowdelay_windows(int Nr, int H, int D, float *wa, float *ws) {
    int S = H + D, L = Nr - D;
    for (int i = 0; i < L; i++) wa[i] = (float)sin(0.5 * M_PI * (i + 0.5) / L);
    for (int i = 0; i < D; i++) wa[L + i] = (float)cos(0.5 * M_PI * (i + 0.5) / D);
    for (int i = 0; i < Nr; i++) {
        double prod = 0;
        int j = i - (Nr - S);
        if (j >= 0) {
            if (j < D) { double r = sin(0.5 * M_PI * (j + 0.5) / D); prod = r * r; }
            else if (j < S - D) prod = 1;
            else { double r = sin(0.5 * M_PI * (j - (S - D) + 0.5) / D); prod = 1 - r * r; }
        }
        ws[i] = prod > 0 ? (float)(prod / wa[i]) : 0;
    }
}

// ---- the canceller ----

struct Params {
    int rate;
    float tail_ms;        // echo path covered (system delay + room), default 300
    float transition;     // A: per-block echo path change model, 0.9999
    float p0;             // initial error covariance, 0.1
    float alpha;          // smoothing of the error power, 0.5
    float dt_factor;      // double-talk step reduction, 0.6 (0 = off; was 1 before the tapered gradient)
    float p_gain;         // covariance update gain, 1.5
    float residual_scale; // κ: calibration of the residual estimate (suppression level)
    float early_scale;    // κ at the start, while the filter has heard little far end: 2
    float early_halving_s;// … halved every this many seconds of far-end activity: 1.4 (0.7 until
                          // 2026-11-25: the 80 ms rooms' echo-only output had 100 ms windows at
                          // -51.5 / -59.1 dBFS just after 5 s; now -57.1 / -62.2, double talk
                          // unchanged; 2.0 reached -60.1 but cost rev120-loud 0.07 PESQ: docs)
    // The residual estimate's floor while the filter is new: prior_scale × the residual the
    // prior alone predicts (p0 · Σ_p |X_p|², as if nothing had been learnt), halved every
    // prior_halving_s of far-end activity and dropped below 1 % (~2 s). Why: the covariance
    // collapses within the first few far-end blocks in the bins where the far end is loudest,
    // though the filter there has learnt ~1-4 dB of the echo, so the first loud vowels passed
    // in 1-3 bins at gains of 0.2-0.6 (−18 dB overall instead of the floor's −30), and the far
    // end heard itself at the start of a call (`scripts/bench call`: A's own voice back at −43
    // instead of −54 dB in 7 of 17 runs). `scripts/bench aecdelay`, the loudest 20 ms of
    // the first second, worst of 60 starts, against the far end: −28.0 → −36.0 dB at the sim's
    // −10 dB echo, −16.7 → −32.3 at −7, +4.5 → −10.6 at 0. What it costs a talker in double
    // talk: docs/echo-canceller.md, "The first second".
    float prior_scale;    // 100
    float prior_halving_s;// 0.15: above the prior for ~1 s of far end
    float min_gain_db;    // floor of the suppressor's gain, -30
    float leak_db;        // ε: share of the echo estimate always counted as residual, -40
    float linear_hz;      // upper edge of the linear filter, 12000
    int ns_level;         // noise suppression level (spectral_ns.h), 0 low … 3 very high
    // Update gain of the two newest partitions, × 2.0 and × 1.3. A partition spans N − H taps
    // but starts H after the previous one, so a delay is learned by every partition covering
    // it: one below H, two below 2H, three or four beyond. Echo at the short delays a table
    // appliance has (10 ms + headroom + a few ms in roomd) was learned by fewer partitions and
    // so more slowly: linear ERLE over 5-10 s, `scripts/bench aecdelay`, 25.7-37.0 dB at 2-22 ms
    // before, 32.5-38.8 dB with these (best of 6 settings tried; no delay got worse by > 0.2 dB).
    float newest_gain[2];
    // Tapered gradient (0 = off): the update of every partition from grad_window_from on is
    // weighted in time by a Hann window of period N whose zero lies in the middle of the taps
    // a partition cannot learn (N − H … N: the circular wrap), and scaled by grad_window.
    // Partitions overlap (each spans N − H taps, they start H apart), so without it a tap is
    // learned by as many partitions as cover it — 3 or 4 at 48 kHz, by where the echo's delay
    // falls in a block — and so is the speed of learning. The Hann windows of all partitions,
    // H apart, sum to N/(2H) within 1 %: every delay learns at the same speed, and the step
    // per tap is grad_window/2 × the Kalman gain at any rate (docs/echo-canceller.md, "Surprise").
    float grad_window;    // 1.75 (1.5-2 measured alike; 1.25 and below learn too slowly)
    int grad_window_from; // 1: partition 0 (alone below 10 ms) keeps its untapered update and newest_gain
};

static Params default_params(int rate, int suppression) {
    Params p;
    p.rate = rate; p.tail_ms = 300; p.transition = 0.9999f; p.p0 = 0.1f; p.alpha = 0.5f;
    p.dt_factor = 0.6f; p.p_gain = 1.5f;
    p.residual_scale = suppression <= 0 ? 0.05f : suppression == 1 ? 0.1f : 0.25f;
    p.early_scale = 2; p.early_halving_s = 1.4f;
    p.prior_scale = 100; p.prior_halving_s = 0.15f;
    // ROOMD_AEC_PRIOR_SCALE (a measurement override, read once per canceller): another prior_scale,
    // 0 = no floor (docs/echo-canceller.md, "The first second")
    if (const char *e = getenv("ROOMD_AEC_PRIOR_SCALE")) {
        char *end = nullptr;
        const float v = strtof(e, &end);
        if (end != e && *end == 0 && v >= 0 && v <= 1e4f) p.prior_scale = v;
    }
    p.min_gain_db = -30; p.leak_db = -40; p.linear_hz = 12000;
    p.ns_level = 1;
    p.newest_gain[0] = 2.0f; p.newest_gain[1] = 1.3f;
    p.grad_window = 1.75f; p.grad_window_from = 1;
    return p;
}

struct Canceller {
    Params prm;
    int H, N, K, Klin, P, Nr, Kr, D, Kdt;
    int KLa;                     // linear bins in use now (≤ Klin): the output band's (set_band)
    int Kro;                     // suppressor bins passed (≤ Kr); above: zero
    int KS, KW;                  // partition strides of the Klin-bin arrays and of W: Klin and K
                                 // rounded up to whole 64-byte lines (aligned vector loads)
    RoomFFT fft, fftr;
    float *xbuf;                 // N: far-end history
    float *Xr, *Xi;              // P × Klin ring of far-end spectra ((head + p) % P is p blocks ago),
                                 // KS apart (|X|² is recomputed where needed: less memory traffic)
    float *Wr, *Wi;              // P × K: the filter, by partition (all bins, so the gradient
                                 // constraint stays a projection; only bins < Klin adapt)
    float *Pc;                   // P × Klin: its error covariance
    int head, cp;
    float *Yr, *Yi;              // K: echo estimate spectrum of this block (zero above Klin)
    float *Ynr, *Yni, *Rn;       // Klin: next block's echo estimate and Σ|X|²P, all partitions but
                                 // the newest, accumulated during this block's update (one pass)
    float *Er, *Ei;              // K: error spectrum
    float *R, *Psi, *inv;        // Klin
    float *Ur, *Ui;              // Klin + 2: one partition's gradient, bins −1 … Klin (tapered update);
                                 // Ur then holds Σ_p |X_p|² for the prior's floor (step 7)
    float wcr, wci;              // e^{−2πi t0/N}, t0 the tapering window's zero
    float *tbuf;                 // N: time-domain work
    float *err;                  // H: the linear filter's output
    float dtf;
    // suppressor
    float *rbuf, *ola, *wa, *ws, *G, *Fr, *Fi, *rt; // Nr, Nr, Nr, Nr, Kr, Kr, Kr, Nr
    float c, gmin, eps;
    // statistics
    double in_energy, out_energy;
    int far_active, echo_present;
    long far_blocks;             // blocks with the far end active so far (the filter's schooling)
    // How much of the measured reverberance the noise suppressor's floor follows (spectral_ns.h):
    // none while the far end plays alone and for kNsEchoHangover blocks after it stops (the
    // residual echo's tail reads as a reverberant room, and a raised floor let it through:
    // scripts/bench doubletalk, far80-rev360, chain echo reduction 41.2 → 36.3 dB, below the
    // canceller's 37.1), all of it otherwise — also while the room talks over the far end (dtf <
    // 0.1, as the locator listens: the far-field double-talk scene 0.788 → 0.799 STOI, the chain
    // there 41.2 dB as before); smoothed over ~100 ms so the room's noise does not step.
    float ns_reverb;
    int far_quiet_blocks;
    static constexpr int kNsEchoHangover = 50;
    // Idle far end: once every far-end spectrum in the ring is zero (digital silence for the
    // whole tail, as when no remote stream plays), the partition update changes nothing but the
    // covariance's drift towards |W|², which has a closed form: the update is skipped and the
    // drift applied when the far end speaks again. (The gradient constraint still runs, one
    // partition per block: without it the output after the silence differed by -41 dB from the
    // full update's, with it by -121 dB — float rounding; DoubleTalkTests.)
    bool idle_skip;              // on by default; off: the full update every block (tests compare)
    int zero_far_blocks;         // consecutive blocks of an all-zero far end
    long idle_pending;           // skipped blocks whose covariance drift is not applied yet
    long idle_blocks;            // blocks skipped so far (statistics, tests)
    NoiseSuppressor ns;          // noise gains in the suppressor's spectrum (spectral_ns.h)
    Dereverb derev;              // dereverberation in the same spectrum (dereverb.h), off by default
    // Per bin of the suppressor's grid (Kr): the share of this block's mic power that is not the
    // echo estimate, |E|² / (|E|² + |Ŷ|²·H/N) — near 1 where the room (a talker, noise) dominates
    // the mic, near 0 where the speaker's echo does. The talker locator steers with it, so the
    // speaker's echo during double talk does not pull the direction to the speaker.
    float *near_share;
    // The high-pass (set_high_pass): per-bin gains on the suppressor's lowest bins, in place of
    // webrtc's biquad. Real gains in this spectrum add no phase, and the biquad's phase below
    // ~200 Hz is what STOI held against it (docs/audio-engine.md, "Rumble").
    static constexpr int kHighPassBins = 8;
    float hp_gain[kHighPassBins];
    int hp_bins;                 // 0: no high-pass here
    bool near_share_on;          // computed only once someone reads it (rapm_near_share)
    // Filter banks (select_bank): with the array, the canceller works on the beam, and each
    // direction the beam can point has an echo path of its own (the speaker sits in a different
    // place relative to each beam's pattern). Each bank keeps its filter, covariance and schooling,
    // so the beam moving to a talker it served before finds its echo path learnt, not a neighbour's.
    int banks, bank;
    float **bWr, **bWi, **bPc;   // per bank; Wr/Wi/Pc above point at the selected bank's
    long *bFar;                  // far_blocks per bank
    long *bLeft;                 // `blocks` when the bank was last left; −1: never used
    long blocks;                 // blocks processed
};

#define ROOMAEC_BUFFERS(a) {a->xbuf, a->Xr, a->Xi, a->Yr, a->Yi, a->Ynr, a->Yni, a->Rn, \
    a->Er, a->Ei, a->R, a->Psi, a->inv, a->Ur, a->Ui, a->tbuf, a->err, a->rbuf, a->ola, a->wa, a->ws, a->G, a->Fr, a->Fi, a->rt, \
    a->near_share}

static void destroy(Canceller *a) {
    if (!a) return;
    room_fft_free(&a->fft); room_fft_free(&a->fftr);
    ns_free(&a->ns);
    derev_free(&a->derev);
    float *bufs[] = ROOMAEC_BUFFERS(a);
    for (float *b : bufs) free(b);
    for (int b = 0; b < a->banks; b++) {
        if (a->bWr) free(a->bWr[b]);
        if (a->bWi) free(a->bWi[b]);
        if (a->bPc) free(a->bPc[b]);
    }
    free(a->bWr); free(a->bWi); free(a->bPc); free(a->bFar); free(a->bLeft);
    free(a);
}

// Zeroed floats on a 64-byte boundary (freed with free()).
static float *zeros(size_t n) {
    size_t bytes = ((n ? n : 1) * sizeof(float) + 63) & ~(size_t)63;
    float *p = (float *)aligned_alloc(64, bytes);
    if (p) memset(p, 0, bytes);
    return p;
}

static int next_pow2(int n) { int p = 1; while (p < n) p <<= 1; return p; }

// banks: echo paths kept (select_bank), 1 without an array. first_bank: the one serving from the
// start (the array's mic-0 bank, kBeams); every other bank stays unused, so the first time the beam
// points there it starts from a learnt neighbour, not from empty taps.
static Canceller *create(const Params &prm, int banks = 1, int first_bank = 0) {
    Canceller *a = (Canceller *)calloc(1, sizeof(Canceller));
    if (!a) return nullptr;
    a->prm = prm;
    a->H = prm.rate / 100;
    a->N = next_pow2(4 * a->H);
    a->K = a->N / 2 + 1;
    int klin = (int)(prm.linear_hz * a->N / prm.rate) + 1;
    a->Klin = klin < a->K ? klin : a->K;
    int taps = (int)(prm.tail_ms * prm.rate / 1000);
    a->P = (taps + a->H - 1) / a->H;
    if (a->P < 1) a->P = 1;
    a->Nr = a->N / 2;
    a->Kr = a->Nr / 2 + 1;
    a->KLa = a->Klin;
    a->Kro = a->Kr;
    a->D = prm.rate / 500;
    int kdt = (int)(8000.0f * a->N / prm.rate) + 1;
    a->Kdt = kdt < a->Klin ? kdt : a->Klin;
    a->KS = (a->Klin + 15) & ~15;
    a->KW = (a->K + 15) & ~15;
    const size_t pk = (size_t)a->P * a->KS, pK = (size_t)a->P * a->KW;
    bool ok = (room_fft_init(&a->fft, a->N) == 0) && (room_fft_init(&a->fftr, a->Nr) == 0);
    a->xbuf = zeros(a->N); a->Xr = zeros(pk); a->Xi = zeros(pk);
    a->banks = banks < 1 ? 1 : banks;
    a->bWr = (float **)calloc((size_t)a->banks, sizeof(float *));
    a->bWi = (float **)calloc((size_t)a->banks, sizeof(float *));
    a->bPc = (float **)calloc((size_t)a->banks, sizeof(float *));
    a->bFar = (long *)calloc((size_t)a->banks, sizeof(long));
    a->bLeft = (long *)calloc((size_t)a->banks, sizeof(long));
    ok = ok && a->bWr && a->bWi && a->bPc && a->bFar && a->bLeft;
    for (int b = 0; ok && b < a->banks; b++) {
        a->bWr[b] = zeros(pK); a->bWi[b] = zeros(pK); a->bPc[b] = zeros(pk);
        ok = a->bWr[b] && a->bWi[b] && a->bPc[b];
        for (size_t i = 0; ok && i < pk; i++) a->bPc[b][i] = prm.p0;
        a->bLeft[b] = -1;
    }
    a->bank = first_bank >= 0 && first_bank < a->banks ? first_bank : 0;
    if (ok) { a->Wr = a->bWr[a->bank]; a->Wi = a->bWi[a->bank]; a->Pc = a->bPc[a->bank]; }
    a->Yr = zeros(a->K); a->Yi = zeros(a->K); a->Ynr = zeros(a->Klin); a->Yni = zeros(a->Klin); a->Rn = zeros(a->Klin);
    a->Er = zeros(a->K); a->Ei = zeros(a->K);
    a->Ur = zeros(a->Klin + 2); a->Ui = zeros(a->Klin + 2);
    a->R = zeros(a->Klin); a->Psi = zeros(a->Klin); a->inv = zeros(a->Klin); a->tbuf = zeros(a->N); a->err = zeros(a->H);
    a->rbuf = zeros(a->Nr); a->ola = zeros(a->Nr); a->wa = zeros(a->Nr); a->ws = zeros(a->Nr);
    a->G = zeros(a->Kr); a->Fr = zeros(a->Kr); a->Fi = zeros(a->Kr); a->rt = zeros(a->Nr);
    a->near_share = zeros(a->Kr);
    ok = ns_init(&a->ns, a->Kr, prm.ns_level) && ok;
    a->ns.k0 = (int)(300.0f * a->Nr / prm.rate);
    a->ns.k1 = (int)(4000.0f * a->Nr / prm.rate);
    ok = derev_init(&a->derev, a->Kr, a->Nr, prm.rate, a->H) && ok;
    float *need[] = ROOMAEC_BUFFERS(a);
    for (float *b : need) ok = ok && b;
    if (!ok) { destroy(a); return nullptr; }
    a->dtf = 1;
    a->idle_skip = true;
    {
        const double t0 = 1 - 0.5 * a->H / a->N;   // in units of N: the middle of N − H … N
        a->wcr = (float)cos(2 * M_PI * t0); a->wci = (float)-sin(2 * M_PI * t0);
    }
    lowdelay_windows(a->Nr, a->H, a->D, a->wa, a->ws);
    double w2 = 0;
    for (int i = 0; i < a->Nr; i++) w2 += (double)a->wa[i] * a->wa[i];
    a->c = (float)(w2 / a->H);
    a->gmin = powf(10, prm.min_gain_db / 20);
    a->eps = powf(10, prm.leak_db / 10);
    for (int k = 0; k < a->Kr; k++) { a->G[k] = 1; a->near_share[k] = 1; }
    return a;
}

// Partition p's far-end spectrum (p blocks old: the ring slot (head + p) % P), filter and
// covariance.
struct Partition { float *xr, *xi, *wr, *wi, *pc; };
static inline Partition partition(const Canceller *a, int p) {
    const size_t xq = (size_t)((a->head + p) % a->P) * a->KS;
    return {a->Xr + xq, a->Xi + xq, a->Wr + (size_t)p * a->KW, a->Wi + (size_t)p * a->KW, a->Pc + (size_t)p * a->KS};
}

// Asks the memory system for partition p's far-end spectrum, filter and covariance (the bins
// in use), to be read while the partition before it is updated. In roomd the update's loads
// missed the caches (perf annotate: the first loads of X, W and P in each partition took most
// of its samples) though the whole state is ~0.4 MB: between two blocks the rest of the audio
// loop (Opus, webrtc, the simulator) runs, and each partition's five short runs start cold.
// Prefetches change no result.
static inline void prefetch_partition(const Canceller *a, int p) {
    const Partition q = partition(a, p);
    for (int k = 0; k < a->KLa; k += 16) {   // 16 floats: one 64-byte line
        __builtin_prefetch(q.xr + k, 0, 2); __builtin_prefetch(q.xi + k, 0, 2);
        __builtin_prefetch(q.wr + k, 1, 2); __builtin_prefetch(q.wi + k, 1, 2); __builtin_prefetch(q.pc + k, 1, 2);
    }
}

// n blocks of the Kalman model's transition without an update (the far end idle, or the bank
// resting while the beam pointed elsewhere) at once: P = A²ⁿ P + (1 − A²ⁿ)|W|², selected bank.
static void drift_covariance(Canceller *a, long n) {
    if (n <= 0) return;
    const float A2 = a->prm.transition * a->prm.transition, a2n = powf(A2, (float)n);
    for (int p = 0; p < a->P; p++) {
        const float *wr = a->Wr + (size_t)p * a->KW, *wi = a->Wi + (size_t)p * a->KW;
        float *pc = a->Pc + (size_t)p * a->KS;
        for (int k = 0; k < a->KLa; k++) pc[k] = a2n * pc[k] + (1 - a2n) * (wr[k] * wr[k] + wi[k] * wi[k]);
    }
}

// One block: far (H samples, what the speaker plays now), mic (H samples) → out (H samples,
// delayed by D). out may alias mic.
ROOMAEC_HOT static void process(Canceller *a, const float *far, const float *mic, float *out) {
    const int H = a->H, N = a->N, K = a->K, KL = a->KLa, P = a->P, KS = a->KS, KW = a->KW;
    const float hn = (float)H / N;
    // 1. The far end's newest spectrum goes in front of the ring.
    memmove(a->xbuf, a->xbuf + H, sizeof(float) * (N - H));
    memcpy(a->xbuf + N - H, far, sizeof(float) * H);
    a->head = (a->head + P - 1) % P;
    room_fft_forward(&a->fft, a->xbuf, a->Er, a->Ei);   // Er/Ei as scratch
    float *x0r = a->Xr + (size_t)a->head * KS, *x0i = a->Xi + (size_t)a->head * KS;
    double far_energy = 0;
    bool far_zero = true;
    for (int i = 0; i < H; i++) { far_energy += (double)far[i] * far[i]; far_zero = far_zero && far[i] == 0; }
    a->zero_far_blocks = far_zero ? (a->zero_far_blocks < 1 << 30 ? a->zero_far_blocks + 1 : a->zero_far_blocks) : 0;
    // Every spectrum in the ring is zero once the far-end history (N samples) and all P
    // partitions behind it are: then nothing below adapts (gradient X*·E = 0).
    const bool idle = a->idle_skip && a->zero_far_blocks >= (N + H - 1) / H + P;
    for (int k = 0; k < KL; k++) { x0r[k] = a->Er[k]; x0i[k] = a->Ei[k]; }
    // 2. Echo estimate and expected residual: the newest partition plus what the last block's
    // update pass accumulated for the others.
    {
        const float *w0r = a->Wr, *w0i = a->Wi, *pc0 = a->Pc;
        for (int k = 0; k < KL; k++) {
            a->Yr[k] = a->Ynr[k] + w0r[k] * x0r[k] - w0i[k] * x0i[k];
            a->Yi[k] = a->Yni[k] + w0r[k] * x0i[k] + w0i[k] * x0r[k];
            const float x02 = x0r[k] * x0r[k] + x0i[k] * x0i[k];
            a->R[k] = hn * (a->Rn[k] + x02 * pc0[k]);
        }
        for (int k = KL; k < K; k++) { a->Yr[k] = 0; a->Yi[k] = 0; }
    }
    room_fft_inverse(&a->fft, a->Yr, a->Yi, a->tbuf, 1.0f / a->fft.n);
    float *e = a->err;
    for (int i = 0; i < H; i++) e[i] = mic[i] - a->tbuf[N - H + i];
    // 3. Error spectrum.
    memset(a->tbuf, 0, sizeof(float) * (N - H));
    memcpy(a->tbuf + N - H, e, sizeof(float) * H);
    room_fft_forward(&a->fft, a->tbuf, a->Er, a->Ei);
    if (a->near_share_on) {
        const int step = N / a->Nr;
        for (int k = 0; k < a->Kr; k++) {
            const int kk = k * step;
            if (kk >= KL) { a->near_share[k] = 1; continue; }
            const float e2 = a->Er[kk] * a->Er[kk] + a->Ei[kk] * a->Ei[kk];
            const float y2 = (a->Yr[kk] * a->Yr[kk] + a->Yi[kk] * a->Yi[kk]) * hn;
            a->near_share[k] = e2 / (e2 + y2 + 1e-20f);
        }
    }
    // 4. Error power, double-talk factor, the gain's common factor.
    double sumR = 0, sumE = 0;
    const float al = a->prm.alpha;
    for (int k = 0; k < KL; k++) {
        float e2 = a->Er[k] * a->Er[k] + a->Ei[k] * a->Ei[k];
        a->Psi[k] = al * a->Psi[k] + (1 - al) * e2;
        if (k < a->Kdt) { sumR += a->R[k]; sumE += e2; }   // Kdt ≤ KLa: 8 kHz
    }
    if (a->prm.dt_factor > 0) {
        float f = (float)(a->prm.dt_factor * (sumR + 1e-12) / (sumE + 1e-12));
        if (f > 1) f = 1;
        a->dtf = f < a->dtf ? f : 0.9f * a->dtf + 0.1f * f;
    }
    for (int k = 0; k < KL; k++) a->inv[k] = a->dtf / (a->R[k] + a->Psi[k] + 1e-12f);
    // 5. One pass over the partitions: update filter and covariance, and accumulate the next
    // block's echo estimate and Σ|X|²P (partition p now is partition p + 1 then).
    const float A2 = a->prm.transition * a->prm.transition, q = 1 - A2, g2 = a->prm.p_gain * hn * hn;
    for (int k = 0; k < KL; k++) { a->Ynr[k] = 0; a->Yni[k] = 0; a->Rn[k] = 0; }
    if (idle) {
        // With X = 0 a block would leave W as it is and take P to A²P + (1 − A²)|W|².
        a->idle_pending++;
        a->idle_blocks++;
    } else if (a->idle_pending > 0) {
        drift_covariance(a, a->idle_pending);   // n such blocks at once
        a->idle_pending = 0;
    }
    for (int p = 0; p < (idle ? 0 : P); p++) {
        const Partition here = partition(a, p);
        const size_t xprev = (size_t)((a->head + p + P - 1) % P) * KS;
        const float *xr = here.xr, *xi = here.xi;
        const float *pr = a->Xr + xprev, *pi = a->Xi + xprev;   // X_{p-1}
        const float *er = a->Er, *ei = a->Ei, *inv = a->inv;
        float *wr = here.wr, *wi = here.wi, *pc = here.pc;
        float *ynr = a->Ynr, *yni = a->Yni, *rn = a->Rn;
        const float boost = p < 2 ? a->prm.newest_gain[p] : 1.0f;
        if (p + 1 < P) prefetch_partition(a, p + 1);
        // One Kalman step of bin k: filter (its new value in nwr/nwi) and covariance (returned).
        auto step = [&](int k, float &nwr, float &nwi) __attribute__((always_inline)) {
            float mu = pc[k] * inv[k], g = boost * hn * mu;
            nwr = wr[k] + g * (xr[k] * er[k] + xi[k] * ei[k]);
            nwi = wi[k] + g * (xr[k] * ei[k] - xi[k] * er[k]);
            const float x2 = xr[k] * xr[k] + xi[k] * xi[k];
            float keep = fmaxf(1 - g2 * mu * x2, 0.0f);
            float npc = A2 * keep * pc[k] + q * (nwr * nwr + nwi * nwi);
            wr[k] = nwr; wi[k] = nwi; pc[k] = npc;
            return npc;
        };
        // The newest partition's echo is already in this block's estimate; every older one
        // (p ≥ 1) also accumulates the next block's: it is partition p + 1 then.
        if (a->prm.grad_window > 0 && p >= a->prm.grad_window_from && p > 0) {
            // Tapered: every bin's gradient first, then the window — a Hann in time is three taps
            // in frequency, 0.5·U[k] − 0.25·c·U[k−1] − 0.25·c*·U[k+1], c = e^{−2πi t0/N}
            // (bin −1 is bin 1's conjugate; bins ≥ Klin do not adapt). The covariance update
            // is the untapered one.
            float *ur = a->Ur + 1, *ui = a->Ui + 1;
            for (int k = 0; k < KL; k++) {
                const float g = boost * hn * pc[k] * inv[k];
                ur[k] = g * (xr[k] * er[k] + xi[k] * ei[k]);
                ui[k] = g * (xr[k] * ei[k] - xi[k] * er[k]);
            }
            ur[-1] = ur[1]; ui[-1] = -ui[1]; ur[KL] = 0; ui[KL] = 0;
            const float cr = a->wcr, ci = a->wci, gw = a->prm.grad_window;
            for (int k = 0; k < KL; k++) {
                const float lr = ur[k - 1], li = ui[k - 1], hr = ur[k + 1], hi = ui[k + 1];
                const float dr = 0.5f * ur[k] - 0.25f * (cr * lr - ci * li) - 0.25f * (cr * hr + ci * hi);
                const float di = 0.5f * ui[k] - 0.25f * (cr * li + ci * lr) - 0.25f * (cr * hi - ci * hr);
                const float nwr = wr[k] + gw * dr, nwi = wi[k] + gw * di;
                const float mu = pc[k] * inv[k];
                const float x2 = xr[k] * xr[k] + xi[k] * xi[k];
                const float keep = fmaxf(1 - g2 * mu * x2, 0.0f);
                const float npc = A2 * keep * pc[k] + q * (nwr * nwr + nwi * nwi);
                wr[k] = nwr; wi[k] = nwi; pc[k] = npc;
                ynr[k] += nwr * pr[k] - nwi * pi[k];
                yni[k] += nwr * pi[k] + nwi * pr[k];
                rn[k] += (pr[k] * pr[k] + pi[k] * pi[k]) * npc;
            }
        } else if (p == 0) {
            for (int k = 0; k < KL; k++) { float nwr, nwi; step(k, nwr, nwi); }
        } else {
            for (int k = 0; k < KL; k++) {
                float nwr, nwi;
                const float npc = step(k, nwr, nwi);
                ynr[k] += nwr * pr[k] - nwi * pi[k];
                yni[k] += nwr * pi[k] + nwi * pr[k];
                const float p2 = pr[k] * pr[k] + pi[k] * pi[k];
                rn[k] += p2 * npc;
            }
        }
    }
    // 6. Gradient constraint, one partition per block (round robin): its taps beyond N − H are
    // zeroed; the next block's echo estimate takes the change.
    {
        const int c = a->cp;
        float *wr = a->Wr + (size_t)c * KW, *wi = a->Wi + (size_t)c * KW;
        room_fft_inverse(&a->fft, wr, wi, a->tbuf, 1.0f / a->fft.n);
        for (int i = N - H + 1; i < N; i++) a->tbuf[i] = 0;
        room_fft_forward(&a->fft, a->tbuf, a->Er, a->Ei);
        if (c > 0) {
            const size_t xprev = (size_t)((a->head + c + P - 1) % P) * KS;
            const float *pr = a->Xr + xprev, *pi = a->Xi + xprev;
            for (int k = 0; k < KL; k++) {
                float dr = a->Er[k] - wr[k], di = a->Ei[k] - wi[k];
                a->Ynr[k] += dr * pr[k] - di * pi[k];
                a->Yni[k] += dr * pi[k] + di * pr[k];
            }
        }
        memcpy(wr, a->Er, sizeof(float) * K);
        memcpy(wi, a->Ei, sizeof(float) * K);
        a->cp = (c + 1) % P;
    }
    // 7. Residual echo suppression on e.
    const int Nr = a->Nr, Kr = a->Kr, KLr = (KL + 1) / 2, Kro = a->Kro;
    memmove(a->rbuf, a->rbuf + H, sizeof(float) * (Nr - H));
    memcpy(a->rbuf + Nr - H, e, sizeof(float) * H);
    for (int i = 0; i < Nr; i++) a->rt[i] = a->rbuf[i] * a->wa[i];
    room_fft_forward(&a->fftr, a->rt, a->Fr, a->Fi);
    // Until the filter has heard a few seconds of far end, its error covariance is not yet the
    // (pessimistic) estimate κ calibrates: suppress harder at first, like any canceller that
    // has not learned the room (measured: ERLE in the first second 6-14 dB → 12-33 dB).
    const float schooled_s = (float)a->far_blocks * H / a->prm.rate;   // seconds of far end heard
    float kappa = a->prm.residual_scale;
    if (a->prm.early_scale > kappa && a->prm.early_halving_s > 0) {
        float early = a->prm.early_scale * exp2f(-schooled_s / a->prm.early_halving_s);
        if (early > kappa) kappa = early;
    }
    const float scale = kappa * a->c;
    const int step = N / Nr;
    // The prior's floor (Params.prior_scale), for a new filter only: Σ_p |X_p|² per bin, one
    // pass over the far-end ring into Ur (free after step 5), skipped while the ring is all
    // zeros (idle: the floor would be 0) and once the floor is under 1 % of the prior.
    float prior = 0;
    if (a->prm.prior_scale > 0 && a->prm.prior_halving_s > 0 && !idle)
        prior = a->prm.prior_scale * exp2f(-schooled_s / a->prm.prior_halving_s);
    if (prior < 0.01f) prior = 0;
    const float prior_res = prior * a->c * hn * a->prm.p0;
    float *x2sum = a->Ur;
    if (prior > 0) {
        for (int k = 0; k < KL; k++) x2sum[k] = 0;
        for (int p = 0; p < P; p++) {
            const float *xr = a->Xr + (size_t)p * KS, *xi = a->Xi + (size_t)p * KS;
            for (int k = 0; k < KL; k++) x2sum[k] += xr[k] * xr[k] + xi[k] * xi[k];
        }
    }
    double echo_sum = 0;
    for (int k = 0; k < KLr; k++) {
        int kk = k * step;
        float y2 = (a->Yr[kk] * a->Yr[kk] + a->Yi[kk] * a->Yi[kk]) * hn;
        float res = scale * (a->R[kk] + a->eps * y2);
        if (prior > 0 && kk < KL) res = fmaxf(res, prior_res * x2sum[kk]);
        float pe = a->Fr[k] * a->Fr[k] + a->Fi[k] * a->Fi[k];
        a->G[k] = fmaxf(1 - res / (pe + 1e-20f), a->gmin);
        echo_sum += y2;
    }
    float ghi = 0;
    const int from = KLr / 2;
    for (int k = from; k < KLr; k++) ghi += a->G[k];
    ghi = KLr > from ? ghi / (KLr - from) : 1;
    for (int k = KLr; k < Kro; k++) a->G[k] = ghi;
    derev_apply(&a->derev, a->Fr, a->Fi, a->G, Kro);
    {
        const bool room_talks = a->far_quiet_blocks >= Canceller::kNsEchoHangover || a->dtf < 0.1f;
        const float target = a->derev.on && room_talks ? a->derev.reverberance : 0;
        a->ns_reverb += 0.1f * (target - a->ns_reverb);
    }
    ns_apply(&a->ns, a->Fr, a->Fi, a->G, Kro, a->ns_reverb,
             a->far_quiet_blocks >= Canceller::kNsEchoHangover ? NoiseSuppressor::kReverberantFloor : NoiseSuppressor::kEchoTimeFloor);
    for (int k = 0; k < a->hp_bins; k++) a->G[k] *= a->hp_gain[k];
    for (int k = 0; k < Kro; k++) { a->Fr[k] *= a->G[k]; a->Fi[k] *= a->G[k]; }
    for (int k = Kro; k < Kr; k++) { a->Fr[k] = 0; a->Fi[k] = 0; }
    room_fft_inverse(&a->fftr, a->Fr, a->Fi, a->rt, 1.0f / a->fftr.n);
    memmove(a->ola, a->ola + H, sizeof(float) * (Nr - H));
    memset(a->ola + Nr - H, 0, sizeof(float) * H);
    for (int i = Nr - H - a->D; i < Nr; i++) a->ola[i] += a->rt[i] * a->ws[i];
    double ein = 0, eout = 0;
    for (int i = 0; i < H; i++) {
        float y = a->ola[Nr - H - a->D + i];
        ein += (double)mic[i] * mic[i];
        out[i] = y;
        eout += (double)y * y;
    }
    a->far_active = far_energy > H * 1e-6;   // speaker above -60 dBFS RMS
    if (a->far_active) a->far_blocks++;
    if (a->far_active) a->far_quiet_blocks = 0;
    else if (a->far_quiet_blocks < Canceller::kNsEchoHangover) a->far_quiet_blocks++;
    a->echo_present = a->far_active && echo_sum > 1e-9 * KLr;
    if (a->far_active) { a->in_energy += ein; a->out_energy += eout; }
    a->blocks++;
}

// What step 5 of the last block accumulated for the next one (the older partitions' echo
// estimate and Σ|X|²P), again: after the filter or its covariance changed between blocks.
static void recompute_next_estimate(Canceller *a) {
    const int P = a->P, KS = a->KS, KL = a->KLa;
    for (int k = 0; k < KL; k++) { a->Ynr[k] = 0; a->Yni[k] = 0; a->Rn[k] = 0; }
    for (int p = 1; p < P; p++) {
        const Partition here = partition(a, p);
        const size_t xprev = (size_t)((a->head + p + P - 1) % P) * KS;
        const float *pr = a->Xr + xprev, *pi = a->Xi + xprev;
        for (int k = 0; k < KL; k++) {
            a->Ynr[k] += here.wr[k] * pr[k] - here.wi[k] * pi[k];
            a->Yni[k] += here.wr[k] * pi[k] + here.wi[k] * pr[k];
            a->Rn[k] += (pr[k] * pr[k] + pi[k] * pi[k]) * here.pc[k];
        }
    }
}

// How much less sure of an echo path the canceller is when a bank first serves a direction,
// starting from the filter of the direction it leaves: the covariance gains this share of the
// filter's power, as if the path had changed by that much (−6 dB). The residual estimate grows
// with it, so the suppressor holds the echo while the filter learns the new direction's path.
static constexpr float kNewBankUncertainty = 0.25f;

// Moves the canceller to bank b (the beam now points elsewhere). A bank used before takes up its
// filter where it was left, its covariance drifted towards |W|² as the model's transition says
// for the blocks it rested (the path may have changed meanwhile); a bank never used starts from
// the bank left (a neighbouring direction's path is closer than none) with kNewBankUncertainty.
// The next block's estimate from the older partitions is recomputed for the new filter.
// Allocates nothing; costs about one block's update.
// map (optional): per bin of the filter (K), the complex factor from the left bank's echo path to
// the new one's, to start a never-used bank from (the array's relative transfer functions: the
// new beam hears the speaker through the same room, differently weighted per mic); nullptr: a
// plain copy.
static void select_bank(Canceller *a, int b, const float *map_r = nullptr, const float *map_i = nullptr,
                        float uncertainty = kNewBankUncertainty) {
    if (b == a->bank || b < 0 || b >= a->banks) return;
    const int P = a->P, KS = a->KS, KW = a->KW, KL = a->KLa;
    drift_covariance(a, a->idle_pending);   // the idle blocks not yet applied
    a->idle_pending = 0;
    const int from = a->bank;
    a->bFar[from] = a->far_blocks;
    a->bLeft[from] = a->blocks;
    a->bank = b;
    a->Wr = a->bWr[b]; a->Wi = a->bWi[b]; a->Pc = a->bPc[b];
    if (a->bLeft[b] < 0) {
        const size_t pK = (size_t)P * KW, pk = (size_t)P * KS;
        memcpy(a->Wr, a->bWr[from], sizeof(float) * pK);
        memcpy(a->Wi, a->bWi[from], sizeof(float) * pK);
        memcpy(a->Pc, a->bPc[from], sizeof(float) * pk);
        for (int p = 0; p < P; p++) {
            float *r = a->Wr + (size_t)p * KW, *i = a->Wi + (size_t)p * KW;
            float *c = a->Pc + (size_t)p * KS;
            if (map_r) {
                for (int k = 0; k < a->K; k++) {
                    const float wr = r[k], wi = i[k];
                    r[k] = wr * map_r[k] - wi * map_i[k];
                    i[k] = wr * map_i[k] + wi * map_r[k];
                }
            }
            for (int k = 0; k < KL; k++) c[k] += uncertainty * (r[k] * r[k] + i[k] * i[k]);
        }
        a->far_blocks = a->bFar[from];
    } else {
        drift_covariance(a, a->blocks - a->bLeft[b]);
        a->far_blocks = a->bFar[b];
    }
    recompute_next_estimate(a);
}

// The streams started again (an xrun's restart, a reopened device). They start back to back as
// at first, but the echo need not land where it did: on the simulated card one underrun moved it
// 6 samples (125 µs) earlier, which turns the path's phase by 90° at 2 kHz and 270° at 6 kHz.
// The start times ALSA reports do not show it (in runs that recovered slowly, capture and
// playback had started as far apart as at first, to 0.03 samples), so the move is learnt. A
// converged filter is sure of its path (small covariance) and learns a moved one slowly: in the HIL rig, after one underrun mid-self-test, self-tests over the next
// 45 s measured 3-12 dB of echo reduction (40-56 before). So every bank in use goes back to the
// covariance of a filter that has learnt nothing (p0) and keeps its taps: a path that did not
// move is still cancelled from the first block (the error stays small, so the taps stay), one
// that did is learnt at the pace of a new start. And suppressed as at a new start: the schooling
// (far_blocks, the clock of κ's start-up and of the prior's floor) starts again too. With the
// covariance back at p0 but the schooling kept, the suppressor trusted the moved filter as the
// covariance collapsed, and a path moved 6 samples came back 9 dB under the far end in the next
// 2 s (31 dB now; DoubleTalkTests.testAnEchoPathMovedByARestartDoesNotComeBack). The price is a
// new start's in double talk: a talker in the restart's first 0.5 s lost 14 dB, not 5
// (docs/echo-canceller.md, "The first second"). Between blocks; allocates nothing.
static void forget_certainty(Canceller *a) {
    drift_covariance(a, a->idle_pending);
    a->idle_pending = 0;
    const size_t pk = (size_t)a->P * a->KS;
    for (int b = 0; b < a->banks; b++) {
        if (b != a->bank && a->bLeft[b] < 0) continue;   // never used: starts from another's
        for (size_t q = 0; q < pk; q++) a->bPc[b][q] = fmaxf(a->bPc[b][q], a->prm.p0);
        a->bFar[b] = 0;
    }
    a->far_blocks = 0;
    recompute_next_estimate(a);
}

// The rumble under speech taken off (fc_hz > 0; 0: not here): the suppressor's gains in its lowest
// bins multiplied by a fourth-order Butterworth high-pass's magnitude, |H|² = f⁸ / (f⁸ + fc⁸), in
// the bins below 4·fc (at 48 kHz and 80 Hz: 0, −18.5, −1.1, −0.05 dB at 0, 47, 94, 141 Hz). A
// magnitude alone: no phase turned and no delay, so its order costs nothing. Between blocks;
// nothing allocated.
static void set_high_pass(Canceller *a, float fc_hz) {
    a->hp_bins = 0;
    if (!(fc_hz > 0)) return;
    for (int k = 0; k < Canceller::kHighPassBins && k < a->Kr; k++) {
        const float f = (float)k * a->prm.rate / a->Nr;
        if (f >= 4 * fc_hz) break;
        const float r4 = powf(f / fc_hz, 4);
        a->hp_gain[k] = r4 / sqrtf(r4 * r4 + 1);
        a->hp_bins = k + 1;
    }
}

// The output band: what the codec sends, top_hz (0 or beyond the Nyquist frequency: all of it).
// The linear filter works up to min(top_hz, its 12 kHz); the suppressor passes up to top_hz and
// zeroes what lies above. Bins that come back into use after a narrower band start learning
// afresh (covariance p0; their filter taps are what they were) and without a stale estimate
// from the older partitions. Between blocks; nothing allocated.
static void set_band(Canceller *a, float top_hz) {
    const float nyquist = 0.5f * a->prm.rate;
    int kla = a->Klin, kro = a->Kr;
    if (top_hz > 0 && top_hz < nyquist) {
        const int kl = (int)(top_hz * a->N / a->prm.rate) + 1, kr = (int)(top_hz * a->Nr / a->prm.rate) + 1;
        kla = kl < a->Klin ? kl : a->Klin;
        kro = kr < a->Kr ? kr : a->Kr;
    }
    if (kla < a->Kdt) kla = a->Kdt;   // the double-talk band stays (Kdt ≤ Klin)
    for (int k = a->KLa; k < kla; k++) {
        for (int b = 0; b < a->banks; b++)
            for (int p = 0; p < a->P; p++) a->bPc[b][(size_t)p * a->KS + k] = a->prm.p0;
        a->Ynr[k] = 0; a->Yni[k] = 0; a->Rn[k] = 0; a->Psi[k] = 0;
    }
    a->KLa = kla;
    a->Kro = kro;
}

// Where the filter's energy peaks: the echo path's bulk delay, in ms (block resolution).
static int delay_ms(const Canceller *a) {
    int best = -1;
    double bestE = 0;
    for (int p = 0; p < a->P; p++) {
        double s = 0;
        const float *wr = a->Wr + (size_t)p * a->KW, *wi = a->Wi + (size_t)p * a->KW;
        for (int k = 0; k < a->KLa; k++) s += (double)wr[k] * wr[k] + (double)wi[k] * wi[k];
        if (s > bestE) { bestE = s; best = p; }
    }
    return best < 0 ? -1 : best * 1000 * a->H / a->prm.rate;
}

}  // namespace roomaec

#endif
