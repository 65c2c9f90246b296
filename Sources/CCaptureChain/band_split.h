// The speech band of a 48 kHz signal at 16 kHz and back, so webrtc's HPF, AGC and VAD run at
// 16 kHz behind roomd's full-band canceller (apm_shim.cpp, "low-band mode").
//
// Why: at 48 kHz webrtc-audio-processing splits every block into three 8 kHz bands and merges
// them again (ThreeBandFilterBank, SparseFIRFilter): measured 20 us of the chain's 49 us per
// 10 ms block on this VM — more than its HPF, AGC and VAD together at 16 kHz (6 us), and 1 ms
// of delay. Those stages only look at or change the band below 8 kHz anyway.
//
// How: d = decimate(x) by 3 (one low-pass FIR h); webrtc turns d into p; the block's output is
//     y = delay(x) + interpolate(p - d)
// where interpolate uses the same h and delay() matches the two filters' group delay. Where
// webrtc changes nothing (p = d), y is x delayed — exactly, whatever h's ripple or aliasing;
// only webrtc's changes (the AGC's gain, the HPF's cut below 80 Hz) pass through h, so they
// reach up to ~7 kHz and fade out over 7–9 kHz. Above that the signal keeps its level: music
// (AGC off) keeps its full band, and for speech Opus codes only up to 8 kHz anyway.
//
// h: Kaiser-windowed sinc, kTaps taps at 48 kHz, cut-off 8 kHz: 0.5 ms of group delay per
// filter, 1 ms for the pair (what the three-band split cost before). Allocation-free after
// init; plain loops the compiler vectorises.
#ifndef ROOMD_BAND_SPLIT_H
#define ROOMD_BAND_SPLIT_H

#include <cmath>
#include <cstring>

namespace roomband {

constexpr int kFactor = 3;              // 48 kHz -> 16 kHz
constexpr int kTaps = 49;               // odd: a whole-sample group delay of (kTaps - 1) / 2
constexpr int kDelay = kTaps - 1;       // samples at the high rate, decimator + interpolator
constexpr int kMaxBlock = 480;          // 10 ms at 48 kHz

struct Filter {
    float h[kTaps];
};

// Modified Bessel function of the first kind, order 0 (the Kaiser window), by its series.
inline double bessel_i0(double x) {
    double sum = 1, term = 1;
    for (int k = 1; k < 40; k++) {
        term *= (x / (2 * k)) * (x / (2 * k));
        sum += term;
        if (term < 1e-12 * sum) break;
    }
    return sum;
}

// Low-pass at rate/(2*kFactor), unity DC gain. beta 5: ~55 dB stop band.
inline void design(Filter *f) {
    const double beta = 5.0, cutoff = 1.0 / (2.0 * kFactor);  // cycles per sample
    const int mid = (kTaps - 1) / 2;
    double sum = 0;
    for (int i = 0; i < kTaps; i++) {
        int n = i - mid;
        double sinc = n == 0 ? 2 * cutoff : std::sin(2 * M_PI * cutoff * n) / (M_PI * n);
        double r = (double)n / mid;
        double w = bessel_i0(beta * std::sqrt(1 - r * r)) / bessel_i0(beta);
        f->h[i] = (float)(sinc * w);
        sum += sinc * w;
    }
    for (int i = 0; i < kTaps; i++) f->h[i] = (float)(f->h[i] / sum);
}

constexpr int kLowMax = kMaxBlock / kFactor;
constexpr int kHist = (kTaps + kFactor - 1) / kFactor;   // low-rate history the taps reach

// One channel's state: the high-rate input kDelay samples back (the delayed path), the input
// split into its kFactor phases at the low rate, and the low-rate correction p - d, each with
// history in front. Both filters run polyphase, one tap at a time over the whole block, so
// the inner loops are plain multiply-adds over contiguous arrays (vectorised without
// reordering any sum: the output is the same on every target).
struct Channel {
    float x[kDelay + kMaxBlock];
    float phase[kFactor][kHist + kLowMax];
    float e[kHist + kLowMax];
    float acc[kFactor][kLowMax];
};

// x (n samples, n a multiple of kFactor) in; low-rate d (n / kFactor samples) out:
// d[m] = sum_j h[j] x[kFactor m + kFactor-1 - j] — the block's last input makes its last
// output, so nothing waits for the next block.
inline void decimate(const Filter *f, Channel *c, const float *x, int n, float *d) {
    const int low = n / kFactor;
    std::memcpy(c->x + kDelay, x, sizeof(float) * (size_t)n);
    for (int r = 0; r < kFactor; r++)
        for (int m = 0; m < low; m++) c->phase[r][kHist + m] = x[kFactor * m + r];
    for (int m = 0; m < low; m++) d[m] = 0;
    // j = kFactor k + s reads phase kFactor-1-s at low index m - k.
    for (int s = 0; s < kFactor; s++) {
        for (int k = 0; kFactor * k + s < kTaps; k++) {
            const float coef = f->h[kFactor * k + s];
            const float *src = c->phase[kFactor - 1 - s] + kHist - k;
            for (int m = 0; m < low; m++) d[m] += coef * src[m];
        }
    }
    for (int r = 0; r < kFactor; r++) std::memmove(c->phase[r], c->phase[r] + low, sizeof(float) * kHist);
}

// y = x delayed by kDelay + the correction (p - d) interpolated with the same filter. Call after
// decimate on the same block.
inline void merge(const Filter *f, Channel *c, const float *p, const float *d, int n, float *y) {
    const int low = n / kFactor;
    for (int m = 0; m < low; m++) c->e[kHist + m] = (float)kFactor * (p[m] - d[m]);
    // Zero-stuffed, the correction sits at high-rate samples kFactor m + kFactor-1; output
    // kFactor m + t takes taps j = kFactor k + t - (kFactor-1) >= 0 of sample m - k.
    for (int t = 0; t < kFactor; t++) {
        float *out = c->acc[t];
        for (int m = 0; m < low; m++) out[m] = 0;
        for (int k = 0; k <= kHist; k++) {
            const int j = kFactor * k + t - (kFactor - 1);
            if (j < 0 || j >= kTaps) continue;
            const float coef = f->h[j];
            const float *src = c->e + kHist - k;
            for (int m = 0; m < low; m++) out[m] += coef * src[m];
        }
    }
    for (int m = 0; m < low; m++)
        for (int t = 0; t < kFactor; t++) {
            const int i = kFactor * m + t;
            y[i] = c->x[i] + c->acc[t][m];   // c->x[i] is the input kDelay samples ago
        }
    std::memmove(c->x, c->x + n, sizeof(float) * kDelay);
    std::memmove(c->e, c->e + low, sizeof(float) * kHist);
}

}  // namespace roomband

#endif
