/* Zero-latency streaming convolution of one signal with a long impulse response.
 *
 * y[k] = sum_i h[i] x[k-i] is split at B taps:
 *   head  h[0..B)   direct form, B multiply-adds per sample, needs x up to x[k];
 *   tail  h[B..L)   uniformly partitioned overlap-save FFT convolution with blocks of B
 *                   samples (FFT size 2B). The tail's output for block b+1 only needs
 *                   input blocks <= b, so it is computed once when block b completes.
 * Cost per sample: B MACs + (2 FFTs of 2B + P*(B+1) complex MACs) / B with P = (L-B)/B.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "rs_internal.h"

typedef struct { float re, im; } cpx;

struct rs_conv {
    size_t B, N, P;   /* block, FFT size = 2B, tail partitions */
    float *hrev;      /* head taps reversed, B entries (zero padded) */
    float *xb;        /* [previous block | current block], 2B samples */
    size_t pos;       /* samples of the current block so far */
    float *tail_out;  /* tail output for the current block, B samples */
    cpx *H;           /* P spectra of the tail partitions, N/2+1 bins each */
    cpx *fdl;         /* frequency-domain delay line: P input spectra */
    size_t fdl_head;  /* slot of the newest input spectrum */
    cpx *work;        /* N bins */
    cpx *tw;          /* N/2 twiddles */
    unsigned *rev;    /* bit reversal permutation */
};

/* In-place radix-2 complex FFT; inverse when inv (unscaled). */
static void fft(const rs_conv *c, cpx *a, int inv)
{
    size_t n = c->N;
    for (size_t i = 0; i < n; i++) {
        size_t j = c->rev[i];
        if (j > i) { cpx t = a[i]; a[i] = a[j]; a[j] = t; }
    }
    for (size_t len = 2; len <= n; len <<= 1) {
        size_t half = len >> 1, step = n / len;
        for (size_t i = 0; i < n; i += len) {
            for (size_t k = 0; k < half; k++) {
                cpx w = c->tw[k * step];
                if (inv) w.im = -w.im;
                cpx u = a[i + k], v = a[i + k + half];
                cpx t = { v.re * w.re - v.im * w.im, v.re * w.im + v.im * w.re };
                a[i + k] = (cpx){ u.re + t.re, u.im + t.im };
                a[i + k + half] = (cpx){ u.re - t.re, u.im - t.im };
            }
        }
    }
}

/* Spectrum of 2B real samples; only bins 0..N/2 are kept by callers. */
static void real_fft(const rs_conv *c, const float *x, cpx *out)
{
    for (size_t i = 0; i < c->N; i++)
        out[i] = (cpx){ x[i], 0.0f };
    fft(c, out, 0);
}

void rs_conv_free(rs_conv *c)
{
    if (!c) return;
    free(c->hrev); free(c->xb); free(c->tail_out); free(c->H); free(c->fdl);
    free(c->work); free(c->tw); free(c->rev);
    free(c);
}

rs_conv *rs_conv_new(const float *ir, size_t len)
{
    rs_conv *c = calloc(1, sizeof *c);
    if (!c || len == 0) { free(c); return NULL; }
    size_t B = 1;
    while (B < len && B < 128)
        B <<= 1;
    c->B = B;
    c->N = 2 * B;
    c->P = len > B ? (len - B + B - 1) / B : 0;
    size_t bins = c->N / 2 + 1;
    c->hrev = calloc(B, sizeof *c->hrev);
    c->xb = calloc(2 * B, sizeof *c->xb);
    c->tail_out = calloc(B, sizeof *c->tail_out);
    c->work = calloc(c->N, sizeof *c->work);
    c->tw = calloc(c->N / 2 + 1, sizeof *c->tw);
    c->rev = calloc(c->N, sizeof *c->rev);
    c->H = calloc(c->P * bins + 1, sizeof *c->H);
    c->fdl = calloc(c->P * bins + 1, sizeof *c->fdl);
    if (!c->hrev || !c->xb || !c->tail_out || !c->work || !c->tw || !c->rev || !c->H || !c->fdl) {
        rs_conv_free(c);
        return NULL;
    }
    for (size_t i = 0; i < B && i < len; i++)
        c->hrev[B - 1 - i] = ir[i];
    unsigned bits = 0;
    while ((1u << bits) < c->N) bits++;
    for (size_t i = 0; i < c->N; i++) {
        unsigned r = 0;
        for (unsigned b = 0; b < bits; b++)
            if (i & (1u << b)) r |= 1u << (bits - 1 - b);
        c->rev[i] = r;
    }
    for (size_t k = 0; k < c->N / 2; k++) {
        double a = -2.0 * M_PI * (double)k / (double)c->N;
        c->tw[k] = (cpx){ (float)cos(a), (float)sin(a) };
    }
    /* Tail partition p holds h[B + pB .. B + pB + B), zero padded to N. */
    float *tmp = calloc(c->N, sizeof *tmp);
    if (!tmp) { rs_conv_free(c); return NULL; }
    for (size_t p = 0; p < c->P; p++) {
        memset(tmp, 0, c->N * sizeof *tmp);
        for (size_t i = 0; i < B; i++) {
            size_t t = B + p * B + i;
            tmp[i] = t < len ? ir[t] : 0.0f;
        }
        real_fft(c, tmp, c->work);
        memcpy(c->H + p * bins, c->work, bins * sizeof *c->H);
    }
    free(tmp);
    return c;
}

/* Block b just completed in xb[B..2B): compute the tail output for the next block. */
static void finish_block(rs_conv *c)
{
    size_t B = c->B, N = c->N, bins = N / 2 + 1;
    if (c->P > 0) {
        c->fdl_head = (c->fdl_head + c->P - 1) % c->P;
        real_fft(c, c->xb, c->work);
        memcpy(c->fdl + c->fdl_head * bins, c->work, bins * sizeof *c->fdl);
        cpx *acc = c->work;
        memset(acc, 0, N * sizeof *acc);
        for (size_t p = 0; p < c->P; p++) {
            const cpx *x = c->fdl + ((c->fdl_head + p) % c->P) * bins;
            const cpx *h = c->H + p * bins;
            for (size_t k = 0; k < bins; k++) {
                acc[k].re += x[k].re * h[k].re - x[k].im * h[k].im;
                acc[k].im += x[k].re * h[k].im + x[k].im * h[k].re;
            }
        }
        for (size_t k = 1; k < N / 2; k++) /* real signal: Hermitian spectrum */
            acc[N - k] = (cpx){ acc[k].re, -acc[k].im };
        fft(c, acc, 1);
        float scale = 1.0f / (float)N;
        for (size_t i = 0; i < B; i++)
            c->tail_out[i] = acc[B + i].re * scale;
    }
    memmove(c->xb, c->xb + B, B * sizeof *c->xb);
    c->pos = 0;
}

void rs_conv_process(rs_conv *c, const float *in, float *out, size_t n)
{
    size_t B = c->B;
    for (size_t s = 0; s < n; s++) {
        c->xb[B + c->pos] = in[s];
        /* head: sum_{i<B} h[i] x[k-i] = sum_u hrev[u] xb[pos+1+u] */
        const float *x = c->xb + c->pos + 1;
        float y = 0.0f;
        for (size_t u = 0; u < B; u++)
            y += c->hrev[u] * x[u];
        out[s] = y + c->tail_out[c->pos];
        if (++c->pos == B)
            finish_block(c);
    }
}
