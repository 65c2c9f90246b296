// The one real FFT of roomd's C code: the canceller, the suppressor's and the beam's filter
// banks and the talker locator (CCaptureChain) and the simulated card's room convolver
// (RoomSimRoom) all transform through it, so a speed-up or a fix lands in both the product and
// the simulation that measures it. Header-only and C/C++-neutral (CCaptureChain is C++,
// RoomSimRoom C): each includer compiles its own static copy, inlined where it is hot.
//
// A real FFT of n = 2h points through a complex FFT of h points in split re/im arrays, radix-2
// decimation in time, n a power of two >= 8. The tables and the work arrays are allocated by
// room_fft_init, never during a transform.
#ifndef ROOM_FFT_H
#define ROOM_FFT_H

#include <math.h>
#include <stdlib.h>
#include <string.h>

// x86-64: the transforms are also compiled for AVX2 and picked at load time (an ifunc); the
// baseline target has only 4-wide SSE2 vectors. AVX2 without FMA: no contraction, so the output
// is bit-identical to the SSE2 build's; only the vector width changes. Sanitizer builds keep only
// the baseline: this code is linked into the executables, so the dynamic loader runs the
// ifunc's resolver while relocating them, before the sanitizer runtime is initialised, and the
// instrumented resolver crashed there (SIGSEGV in __tsan_func_entry before main).
#if defined(__has_feature)
#if __has_feature(thread_sanitizer) || __has_feature(address_sanitizer)
#define ROOM_FFT_SANITIZED 1
#endif
#endif
#if defined(__x86_64__) && defined(__clang__) && defined(__linux__) && !defined(ROOM_FFT_SANITIZED)
#define ROOM_FFT_HOT __attribute__((target_clones("avx2", "default")))
#else
#define ROOM_FFT_HOT
#endif

typedef struct RoomFFT {
    int n, h;
    int *swap;         // bit reversal of h: the pairs (i, j), i < j, to swap, one after the other
    int swaps;         // number of pairs
    float *twr, *twi;  // stages len = 8, 16, …, h: e^{-2πij/len}, j < len/2, stage after stage
    float *pr, *pi;    // e^{-2πik/n}, k <= h
    float *zr, *zi;    // work, h
} RoomFFT;

static inline void room_fft_free(RoomFFT *f) {
    free(f->swap); free(f->twr); free(f->twi); free(f->pr); free(f->pi); free(f->zr); free(f->zi);
    memset(f, 0, sizeof *f);
}

/// 0, or -1 when out of memory (nothing left allocated).
static inline int room_fft_init(RoomFFT *f, int n) {
    memset(f, 0, sizeof *f);
    f->n = n; f->h = n / 2;
    const int h = f->h;
    int bits = 0;
    while ((1 << bits) < h) bits++;
    f->swap = (int *)malloc(sizeof(int) * (h + 2));
    f->twr = (float *)malloc(sizeof(float) * h); f->twi = (float *)malloc(sizeof(float) * h);
    f->pr = (float *)malloc(sizeof(float) * (h + 1)); f->pi = (float *)malloc(sizeof(float) * (h + 1));
    f->zr = (float *)malloc(sizeof(float) * h); f->zi = (float *)malloc(sizeof(float) * h);
    if (!f->swap || !f->twr || !f->twi || !f->pr || !f->pi || !f->zr || !f->zi) { room_fft_free(f); return -1; }
    for (int i = 0; i < h; i++) {
        int r = 0;
        for (int b = 0; b < bits; b++) if (i & (1 << b)) r |= 1 << (bits - 1 - b);
        if (r > i) { f->swap[2 * f->swaps] = i; f->swap[2 * f->swaps + 1] = r; f->swaps++; }
    }
    int at = 0;
    for (int len = 8; len <= h; len <<= 1)
        for (int j = 0; j < len / 2; j++, at++) {
            double a = -2 * M_PI * j / len;
            f->twr[at] = (float)cos(a); f->twi[at] = (float)sin(a);
        }
    for (int k = 0; k <= h; k++) { double a = -2 * M_PI * k / n; f->pr[k] = (float)cos(a); f->pi[k] = (float)sin(a); }
    return 0;
}

// n radix-2 butterflies (a, b) ← (a + w·b, a − w·b): a twiddle per butterfly / one for all.
static inline void room_fft_butterflies(float *__restrict ar, float *__restrict ai, float *__restrict br,
                                        float *__restrict bi, const float *__restrict tr,
                                        const float *__restrict ti, int n) {
    for (int j = 0; j < n; j++) {
        float xr = br[j] * tr[j] - bi[j] * ti[j], xi = br[j] * ti[j] + bi[j] * tr[j];
        br[j] = ar[j] - xr; bi[j] = ai[j] - xi;
        ar[j] += xr; ai[j] += xi;
    }
}
static inline void room_fft_butterflies1(float *__restrict ar, float *__restrict ai, float *__restrict br,
                                         float *__restrict bi, float wr, float wi, int n) {
    for (int j = 0; j < n; j++) {
        float xr = br[j] * wr - bi[j] * wi, xi = br[j] * wi + bi[j] * wr;
        br[j] = ar[j] - xr; bi[j] = ai[j] - xi;
        ar[j] += xr; ai[j] += xi;
    }
}

// In-place forward complex FFT of f->zr/zi (h points, h >= 4), unnormalized. The early stages,
// whose butterflies are short (len 2, 4, 8, …), run before the bit-reversal permutation instead
// of after it: position p of a group of len in the bit-reversed order is natural index
// rev(p)·(h/len) + r, r < h/len, so each butterfly of such a stage pairs two runs of h/len
// consecutive natural indices with one twiddle — long vector loops instead of scalar ones. Same
// butterflies, same operands, same results.
ROOM_FFT_HOT static void room_fft_complex(RoomFFT *f) {
    const int h = f->h;
    float *re = f->zr, *im = f->zi;
    // Stages of length 2 and 4 (twiddles 1 and −i) as one radix-4 pass: bit-reversed positions
    // 4g + {0, 1, 2, 3} are natural r + {0, h/2, h/4, 3h/4}, r < h/4.
    {
        const int g = h / 4;
        float *__restrict r0 = re, *__restrict r1 = re + 2 * g, *__restrict r2 = re + g, *__restrict r3 = re + 3 * g;
        float *__restrict i0 = im, *__restrict i1 = im + 2 * g, *__restrict i2 = im + g, *__restrict i3 = im + 3 * g;
        for (int r = 0; r < g; r++) {
            float b0r = r0[r] + r1[r], b0i = i0[r] + i1[r];
            float b1r = r0[r] - r1[r], b1i = i0[r] - i1[r];
            float b2r = r2[r] + r3[r], b2i = i2[r] + i3[r];
            float b3r = r2[r] - r3[r], b3i = i2[r] - i3[r];
            r0[r] = b0r + b2r; i0[r] = b0i + b2i;
            r2[r] = b0r - b2r; i2[r] = b0i - b2i;
            r1[r] = b1r + b3i; i1[r] = b1i - b3r;   // b1 + (−i)·b3
            r3[r] = b1r - b3i; i3[r] = b1i + b3r;
        }
    }
    const float *twr = f->twr, *twi = f->twi;
    int len = 8, bits = 3;
    // Further stages in natural order while the runs (h/len) are at least as long as the groups'
    // halves (the later stages have long contiguous halves in bit-reversed order).
    for (; len <= h && h / len >= len / 2; len <<= 1, bits++) {
        const int half = len >> 1, g = h / len;
        for (int j = 0; j < half; j++) {
            int rj = 0;   // bit reversal of j over `bits` bits (its top bit, the pair's, is 0)
            for (int t = 0; t < bits; t++) if (j & (1 << t)) rj |= 1 << (bits - 1 - t);
            room_fft_butterflies1(re + rj * g, im + rj * g, re + rj * g + g, im + rj * g + g, twr[j], twi[j], g);
        }
        twr += half; twi += half;
    }
    for (int s = 0; s < f->swaps; s++) {
        const int i = f->swap[2 * s], j = f->swap[2 * s + 1];
        float t = re[i]; re[i] = re[j]; re[j] = t; t = im[i]; im[i] = im[j]; im[j] = t;
    }
    for (; len <= h; len <<= 1) {
        const int half = len >> 1;
        for (int s = 0; s < h; s += len)
            room_fft_butterflies(re + s, im + s, re + s + half, im + s + half, twr, twi, half);
        twr += half; twi += half;
    }
}

// X[k] = Σ x[m] e^{-2πikm/n}, k = 0..h (h+1 bins), like numpy.fft.rfft.
ROOM_FFT_HOT static void room_fft_forward(RoomFFT *f, const float *x, float *Xr, float *Xi) {
    const int h = f->h;
    for (int m = 0; m < h; m++) { f->zr[m] = x[2 * m]; f->zi[m] = x[2 * m + 1]; }
    room_fft_complex(f);
    Xr[0] = f->zr[0] + f->zi[0]; Xi[0] = 0;
    Xr[h] = f->zr[0] - f->zi[0]; Xi[h] = 0;
    for (int k = 1; k < h; k++) {
        float zr = f->zr[k], zi = f->zi[k], cr = f->zr[h - k], ci = -f->zi[h - k];   // Z[k], conj(Z[h-k])
        float er = 0.5f * (zr + cr), ei = 0.5f * (zi + ci);                          // even part
        float orr = 0.5f * (zi - ci), oi = -0.5f * (zr - cr);                        // odd part
        Xr[k] = er + f->pr[k] * orr - f->pi[k] * oi;
        Xi[k] = ei + f->pr[k] * oi + f->pi[k] * orr;
    }
}

// x = scale · n · irfft(X), n samples from h+1 bins: scale 1/n is numpy.fft.irfft, 1 the
// unscaled inverse a convolver with pre-scaled spectra wants. The scale is a power of two in
// both uses, so applying it at the end rounds nothing.
ROOM_FFT_HOT static void room_fft_inverse(RoomFFT *f, const float *Xr, const float *Xi, float *x, float scale) {
    const int h = f->h;
    for (int k = 0; k < h; k++) {
        float ar = Xr[k], ai = Xi[k], br = Xr[h - k], bi = -Xi[h - k];       // X[k], conj(X[h-k])
        float er = ar + br, ei = ai + bi;
        float dr = ar - br, di = ai - bi;
        float wr = f->pr[k], wi = -f->pi[k];                                  // odd = d · conj(W^k)
        float orr = dr * wr - di * wi, oi = dr * wi + di * wr;
        f->zr[k] = er - oi;                                                   // conj(even + i·odd)
        f->zi[k] = -(ei + orr);
    }
    room_fft_complex(f);
    for (int m = 0; m < h; m++) { x[2 * m] = f->zr[m] * scale; x[2 * m + 1] = -f->zi[m] * scale; }
}

#endif
