/* Image-source impulse responses of a shoebox room with rigid-ish walls (Allen and Berkley,
 * "Image method for efficiently simulating small-room acoustics", JASA 65(4), 1979).
 *
 * A wall mirrors the source; the mirror images of the mirror images fill space with copies of
 * the room. The image with indices (m, q) per axis sits at (1 - 2q)·s + 2m·L and reaches the
 * receiver after |m - q| + |m| reflections off that axis's two walls, each of which keeps the
 * fraction beta of the pressure (beta^2 of the energy: beta = sqrt(1 - alpha)). Every image
 * within c·T of the receiver is summed with amplitude beta^reflections / distance (so the
 * direct path at 1 m has gain 1) at its exact, fractional delay, placed with a windowed sinc
 * (41 taps, interpolated from a table of 512 fractions). Walls absorb all frequencies alike,
 * as in the reference implementation the sim card is checked against (pyroomacoustics,
 * docs/sim-card.md "Scenes").
 */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "rs_internal.h"

#define FD_HALF 20               /* taps each side of the fractional delay's centre */
#define FD_TAPS (2 * FD_HALF + 1)
#define FD_STEPS 512             /* fractions in the table (linear interpolation between) */

static float fd_table[FD_STEPS + 1][FD_TAPS];
static pthread_once_t fd_once = PTHREAD_ONCE_INIT;

static void fd_init(void)
{
    for (int f = 0; f <= FD_STEPS; f++) {
        double frac = (double)f / FD_STEPS;
        for (int k = 0; k < FD_TAPS; k++) {
            double x = k - FD_HALF - frac;          /* tap k sits at n0 - FD_HALF + k */
            double sinc = fabs(x) < 1e-9 ? 1.0 : sin(M_PI * x) / (M_PI * x);
            double w = fabs(x) < FD_HALF + 1 ? 0.5 * (1.0 + cos(M_PI * x / (FD_HALF + 1))) : 0.0;
            fd_table[f][k] = (float)(sinc * w);
        }
    }
}

double rs_ism_beta_for_rt60(const double room[3], double rt60_s)
{
    /* Eyring: T = 24 ln(10) V / (-c S ln(1 - alpha)). Sabine's formula overstates the decay
     * time of a fully specular room with absorption this high; Eyring's matches what the
     * image sum gives (measured: docs/sim-card.md). */
    double V = room[0] * room[1] * room[2];
    double S = 2.0 * (room[0] * room[1] + room[0] * room[2] + room[1] * room[2]);
    double alpha = 1.0 - exp(-24.0 * log(10.0) * V / (RS_SOUND_SPEED * S * rt60_s));
    if (alpha > 0.999)
        alpha = 0.999;
    return sqrt(1.0 - alpha);
}

double rs_ism_rt60_for_beta(const double room[3], double beta)
{
    double V = room[0] * room[1] * room[2];
    double S = 2.0 * (room[0] * room[1] + room[0] * room[2] + room[1] * room[2]);
    double b2 = beta * beta;
    if (b2 <= 0)
        return 0;
    if (b2 >= 1)
        return INFINITY;
    return 24.0 * log(10.0) * V / (-RS_SOUND_SPEED * S * log(b2));
}

static void add_tap(float *h, size_t n, double tau, double a)
{
    double fl = floor(tau);
    long n0 = (long)fl;
    double pos = (tau - fl) * FD_STEPS;
    int fi = (int)pos;
    if (fi >= FD_STEPS)
        fi = FD_STEPS - 1;
    float w1 = (float)(pos - fi), w0 = 1.0f - w1;
    const float *t0 = fd_table[fi], *t1 = fd_table[fi + 1];
    long first = n0 - FD_HALF;
    for (int k = 0; k < FD_TAPS; k++) {
        long i = first + k;
        if (i >= 0 && (size_t)i < n)
            h[i] += (float)a * (w0 * t0[k] + w1 * t1[k]);
    }
}

void rs_ism_ir(const double room[3], double beta, const double src[3], const double mic[3],
               double rate, float *h, size_t n)
{
    pthread_once(&fd_once, fd_init);
    memset(h, 0, n * sizeof *h);
    /* images further than this would land past the end */
    const double reach = (double)(n + FD_HALF) / rate * RS_SOUND_SPEED;
    const double reach2 = reach * reach;
    int M[3];
    for (int a = 0; a < 3; a++)
        M[a] = (int)ceil(reach / (2.0 * room[a])) + 1;
    int max_refl = 2 * (M[0] + M[1] + M[2]) + 6;
    double *bpow = malloc((size_t)(max_refl + 1) * sizeof *bpow);
    if (!bpow)
        return;
    bpow[0] = 1.0;
    for (int k = 1; k <= max_refl; k++)
        bpow[k] = bpow[k - 1] * beta;
    const double samples_per_metre = rate / RS_SOUND_SPEED;

    for (int mx = -M[0]; mx <= M[0]; mx++)
        for (int qx = 0; qx < 2; qx++) {
            double dx = (1 - 2 * qx) * src[0] + 2.0 * mx * room[0] - mic[0];
            double dx2 = dx * dx;
            if (dx2 > reach2)
                continue;
            int kx = abs(mx - qx) + abs(mx);
            for (int my = -M[1]; my <= M[1]; my++)
                for (int qy = 0; qy < 2; qy++) {
                    double dy = (1 - 2 * qy) * src[1] + 2.0 * my * room[1] - mic[1];
                    double dxy2 = dx2 + dy * dy;
                    if (dxy2 > reach2)
                        continue;
                    int kxy = kx + abs(my - qy) + abs(my);
                    for (int mz = -M[2]; mz <= M[2]; mz++)
                        for (int qz = 0; qz < 2; qz++) {
                            double dz = (1 - 2 * qz) * src[2] + 2.0 * mz * room[2] - mic[2];
                            double d2 = dxy2 + dz * dz;
                            if (d2 > reach2)
                                continue;
                            int k = kxy + abs(mz - qz) + abs(mz);
                            double d = sqrt(d2);
                            if (d < 0.01)
                                d = 0.01; /* a source on the mic: 40 dB above 1 m, not infinite */
                            add_tap(h, n, d * samples_per_metre, bpow[k] / d);
                        }
                }
        }
    free(bpow);
}

void rs_highpass(float *x, size_t n, double fc, double rate)
{
    /* 2nd-order Butterworth (bilinear transform), run forward: causal like a room's. */
    double K = tan(M_PI * fc / rate), q = M_SQRT2, norm = 1.0 / (1.0 + q * K + K * K);
    double b0 = norm, b1 = -2.0 * norm, b2 = norm;
    double a1 = 2.0 * (K * K - 1.0) * norm, a2 = (1.0 - q * K + K * K) * norm;
    double x1 = 0, x2 = 0, y1 = 0, y2 = 0;
    for (size_t i = 0; i < n; i++) {
        double x0 = x[i], y0 = b0 * x0 + b1 * x1 + b2 * x2 - a1 * y1 - a2 * y2;
        x2 = x1; x1 = x0; y2 = y1; y1 = y0;
        x[i] = (float)y0;
    }
}

double rs_ir_t20(const float *h, size_t n, double rate)
{
    /* Schroeder's backward integral; the decay from -5 to -25 dB fitted with a line (least
     * squares), extrapolated to 60 dB (ISO 3382's T20). */
    double *edc = malloc(n * sizeof *edc);
    if (!edc || n < 2) {
        free(edc);
        return 0;
    }
    double sum = 0;
    for (size_t i = n; i-- > 0;) {
        sum += (double)h[i] * h[i];
        edc[i] = sum;
    }
    size_t a = n, b = n;
    for (size_t i = 0; i < n; i++) {
        double db = 10.0 * log10(edc[i] / edc[0] + 1e-30);
        if (a == n && db <= -5.0)
            a = i;
        if (db <= -25.0) {
            b = i;
            break;
        }
    }
    double sx = 0, sy = 0, sxx = 0, sxy = 0;
    size_t count = 0;
    for (size_t i = a; i < b; i++) {
        double x = (double)i / rate, y = 10.0 * log10(edc[i] / edc[0] + 1e-30);
        sx += x; sy += y; sxx += x * x; sxy += x * y;
        count++;
    }
    free(edc);
    if (count < 2)
        return 0;
    double slope = (count * sxy - sx * sy) / (count * sxx - sx * sx);
    return slope < 0 ? -60.0 / slope : 0;
}
