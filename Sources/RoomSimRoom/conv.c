/* Zero-latency streaming convolution of one signal with a long impulse response.
 *
 * y[k] = sum_i h[i] x[k-i] is split into a head and non-uniform segments:
 *   head      h[0..B0)  direct form (B0 = min(L, 128)), computed a chunk at a time with the
 *                       taps in the outer loop, so the compiler vectorizes it across outputs;
 *   segment s h[D..D+P*M) uniformly partitioned overlap-save FFT convolution with blocks of M
 *                       samples (FFT size 2M), P partitions, D >= M. Segments: M = 128, 512,
 *                       2048, 4096 (the last repeats), D = 128, 512, 2048, 8192, ...: three
 *                       partitions each until the IR is covered.
 * Input block b of a segment (samples [bM, (b+1)M)) completes when sample (b+1)M-1 arrives;
 * its FFT, the multiply-accumulate with the frequency-domain delay line and the inverse FFT
 * give the segment's output for samples [bM + D, (b+1)M + D), all at or after the next sample
 * because D >= M; they are added into a ring of future output. Same result as the direct sum
 * up to float rounding; no latency.
 * Cost per sample for the 150 ms IR of board/sim (7200 taps at 48 kHz): 128 MACs (vectorized)
 * + per segment (2 real FFTs of 2M + 3(M+1) complex MACs) / M, about 150 flops — the uniform
 * 128-block version it replaces did 56 complex MACs and two 256-point complex FFTs per sample.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "room_fft.h"
#include "rs_internal.h"

/* x86-64: the hot functions are also compiled for AVX2 and picked at load time (an ifunc); the
 * baseline target has only 4-wide SSE2 vectors. No FMA, so no contraction: same results. */
#if defined(__x86_64__) && defined(__clang__) && defined(__linux__)
#define RS_HOT __attribute__((target_clones("avx2", "default")))
#else
#define RS_HOT
#endif

#define HEAD_MAX 128      /* direct-form taps */
#define SEG_FIRST 128     /* block of the first FFT segment (= HEAD_MAX, so D >= M) */
#define SEG_MAX 4096      /* largest block */
#define SEG_PARTS 3       /* partitions per segment before the block grows (x4) */
#define MAX_SEGS 24
#define CHUNK_MAX 256     /* head: outputs per inner pass */

/* ---- the convolution ---- */

typedef struct {
    size_t M, D, P;       /* block, first tap, partitions */
    RoomFFT fft;           /* size 2M */
    float *Hr, *Hi;       /* P x (M+1): spectra of the partitions, scaled by 1/(2M) */
    float *Xr, *Xi;       /* P x (M+1): input spectra, slot (head + p) % P is p blocks ago */
    size_t head;
    float *Ar, *Ai;       /* M+1: accumulator */
    float *t;             /* 2M: time-domain work */
} segment;

struct rs_conv {
    size_t L;             /* IR length */
    size_t B0;            /* head taps */
    float h0[HEAD_MAX];   /* head taps */
    float *hx;            /* head input: B0-1 older samples, then up to CHUNK_MAX new ones */
    size_t nseg;
    segment seg[MAX_SEGS];
    float *xin;           /* input ring (power of two >= 2 * largest M) */
    size_t xin_mask;
    float *yacc;          /* future output of the segments (power of two > max D + M) */
    size_t yacc_mask;
    uint64_t n;           /* samples consumed so far */
};

static void segment_free(segment *s)
{
    room_fft_free(&s->fft);
    free(s->Hr); free(s->Hi); free(s->Xr); free(s->Xi); free(s->Ar); free(s->Ai); free(s->t);
}

void rs_conv_free(rs_conv *c)
{
    if (!c) return;
    for (size_t i = 0; i < c->nseg; i++)
        segment_free(&c->seg[i]);
    free(c->hx); free(c->xin); free(c->yacc);
    free(c);
}

static int segment_init(segment *s, size_t M, size_t D, size_t P, const float *ir, size_t len)
{
    memset(s, 0, sizeof *s);
    s->M = M; s->D = D; s->P = P;
    size_t bins = M + 1;
    if (room_fft_init(&s->fft, (int)(2 * M)) < 0)
        return -1;
    s->Hr = calloc(P * bins, sizeof *s->Hr);
    s->Hi = calloc(P * bins, sizeof *s->Hi);
    s->Xr = calloc(P * bins, sizeof *s->Xr);
    s->Xi = calloc(P * bins, sizeof *s->Xi);
    s->Ar = calloc(bins, sizeof *s->Ar);
    s->Ai = calloc(bins, sizeof *s->Ai);
    s->t = calloc(2 * M, sizeof *s->t);
    if (!s->Hr || !s->Hi || !s->Xr || !s->Xi || !s->Ar || !s->Ai || !s->t)
        return -1;
    const float scale = 1.0f / (float)(2 * M);
    for (size_t p = 0; p < P; p++) {
        memset(s->t, 0, 2 * M * sizeof *s->t);
        for (size_t i = 0; i < M; i++) {
            size_t tap = D + p * M + i;
            s->t[i] = tap < len ? ir[tap] * scale : 0.0f;
        }
        room_fft_forward(&s->fft, s->t, s->Hr + p * bins, s->Hi + p * bins);
    }
    return 0;
}

rs_conv *rs_conv_new(const float *ir, size_t len)
{
    if (len == 0) return NULL;
    rs_conv *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    c->L = len;
    c->B0 = len < HEAD_MAX ? len : HEAD_MAX;
    memcpy(c->h0, ir, c->B0 * sizeof *ir);
    c->hx = calloc(HEAD_MAX - 1 + CHUNK_MAX, sizeof *c->hx);
    if (!c->hx) { rs_conv_free(c); return NULL; }
    size_t D = c->B0, M = SEG_FIRST, maxM = 1, maxEnd = 1;
    while (D < len) {
        size_t rest = (len - D + M - 1) / M; /* partitions still needed at this block size */
        size_t P = M == SEG_MAX || rest < SEG_PARTS ? rest : SEG_PARTS;
        if (c->nseg == MAX_SEGS || segment_init(&c->seg[c->nseg], M, D, P, ir, len) < 0) {
            if (c->nseg < MAX_SEGS) segment_free(&c->seg[c->nseg]);
            rs_conv_free(c);
            return NULL;
        }
        c->nseg++;
        if (M > maxM) maxM = M;
        if (D + M > maxEnd) maxEnd = D + M;
        D += P * M;               /* >= 4M when P = 3, since D >= M: the next block may be 4M */
        M = 4 * M < SEG_MAX ? 4 * M : SEG_MAX;
    }
    size_t xs = 1, ys = 1;
    while (xs < 2 * maxM) xs <<= 1;
    while (ys <= maxEnd) ys <<= 1;
    c->xin = calloc(xs, sizeof *c->xin);
    c->yacc = calloc(ys, sizeof *c->yacc);
    if (!c->xin || !c->yacc) { rs_conv_free(c); return NULL; }
    c->xin_mask = xs - 1;
    c->yacc_mask = ys - 1;
    return c;
}

/* Input block of segment s ending at sample n (exclusive) just completed. */
RS_HOT static void segment_block(rs_conv *c, segment *s, uint64_t n)
{
    const size_t M = s->M, N = 2 * M, bins = M + 1, P = s->P;
    /* the last 2M inputs, unwrapped (the ring holds at least 2M) */
    for (size_t i = 0; i < N; i++)
        s->t[i] = c->xin[(n - N + i) & c->xin_mask];
    s->head = (s->head + P - 1) % P;
    float *xr0 = s->Xr + s->head * bins, *xi0 = s->Xi + s->head * bins;
    room_fft_forward(&s->fft, s->t, xr0, xi0);
    float *restrict ar = s->Ar, *restrict ai = s->Ai;
    memset(ar, 0, bins * sizeof *ar);
    memset(ai, 0, bins * sizeof *ai);
    for (size_t p = 0; p < P; p++) {
        const size_t slot = (s->head + p) % P;
        const float *restrict xr = s->Xr + slot * bins, *restrict xi = s->Xi + slot * bins;
        const float *restrict hr = s->Hr + p * bins, *restrict hi = s->Hi + p * bins;
        for (size_t k = 0; k < bins; k++) {
            ar[k] += xr[k] * hr[k] - xi[k] * hi[k];
            ai[k] += xr[k] * hi[k] + xi[k] * hr[k];
        }
    }
    room_fft_inverse(&s->fft, ar, ai, s->t, 1.0f);
    /* valid part: the last M samples, output for samples [n - M + D, n + D) */
    const uint64_t at = n - M + s->D;
    for (size_t i = 0; i < M; i++)
        c->yacc[(at + i) & c->yacc_mask] += s->t[M + i];
}

/* n samples, no block boundary of the smallest segment strictly inside, n <= CHUNK_MAX. */
RS_HOT static void process_run(rs_conv *c, const float *in, float *out, size_t n)
{
    const size_t B0 = c->B0, keep = B0 - 1;
    float *restrict hx = c->hx;
    memcpy(hx + keep, in, n * sizeof *in);
    /* head: out[s] = sum_i h0[i] hx[keep + s - i]; taps outside, a tile of TILE outputs
     * inside, so the sums stay in vector registers across the taps */
    enum { TILE = 32 };
    float y[CHUNK_MAX];
    for (size_t s = 0; s < n; s++)
        y[s] = c->yacc[(c->n + s) & c->yacc_mask];
    size_t s0 = 0;
    for (; s0 + TILE <= n; s0 += TILE) {
        float acc[TILE];
        for (size_t t = 0; t < TILE; t++)
            acc[t] = y[s0 + t];
        for (size_t i = 0; i < B0; i++) {
            const float hi = c->h0[i];
            const float *restrict x = hx + keep + s0 - i;
            for (size_t t = 0; t < TILE; t++)
                acc[t] += hi * x[t];
        }
        for (size_t t = 0; t < TILE; t++)
            y[s0 + t] = acc[t];
    }
    for (size_t i = 0; i < B0 && s0 < n; i++) {
        const float hi = c->h0[i];
        const float *restrict x = hx + keep - i;
        for (size_t s = s0; s < n; s++)
            y[s] += hi * x[s];
    }
    for (size_t s = 0; s < n; s++) {
        out[s] = y[s];
        c->yacc[(c->n + s) & c->yacc_mask] = 0.0f;
        c->xin[(c->n + s) & c->xin_mask] = in[s];
    }
    memmove(hx, hx + n, keep * sizeof *hx);
    c->n += n;
    for (size_t i = 0; i < c->nseg; i++)
        if (c->n % c->seg[i].M == 0)
            segment_block(c, &c->seg[i], c->n);
}

void rs_conv_process(rs_conv *c, const float *in, float *out, size_t n)
{
    while (n > 0) {
        size_t run = n < CHUNK_MAX ? n : CHUNK_MAX;
        if (c->nseg > 0) {
            size_t to_boundary = SEG_FIRST - (size_t)(c->n % SEG_FIRST);
            if (run > to_boundary) run = to_boundary;
        }
        process_run(c, in, out, run);
        in += run;
        out += run;
        n -= run;
    }
}
