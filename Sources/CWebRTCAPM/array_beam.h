// The beam: the array's mics combined into one channel that hears the talker's direction and
// less of the room (docs/audio-engine.md, "The beam"). Included once, by apm_shim.cpp, after
// kalman_aec.h (whose FFT and low-delay windows it shares). Everything is allocated in create;
// a block allocates nothing.
//
// Fixed superdirective beams, kBeams of them around the circle (at a seated talker's elevation,
// as the locator looks), designed once: per bin, the weights that pass a plane wave from the
// beam's direction unchanged and let through the least of a diffuse field (a reverberant room's
// sound comes from everywhere alike: coherence sinc(ω·d_ij/c) between mics d_ij apart),
//     w = (Γ + μI)⁻¹ d / (dᴴ (Γ + μI)⁻¹ d),
// with the smallest loading μ whose white-noise gain stays at or above −3 dB (1/wᴴw ≥ 0.5): an
// unloaded superdirective beam amplifies the mics' own noise and their mismatch without bound at
// low frequencies. The causal study (scripts/study/farfield) measured this beam beside an
// online MVDR with the true noise statistics: mean STOI 0.850 against 0.855, at a tenth of the
// cost and with nothing to learn (so nothing to go wrong in double talk). Beam kBeams is mic 0
// alone, what the chain hears before a direction is known.
//
// The mics go through the same low-delay overlap-add as the canceller's suppressor (analysis of
// Nr samples, hop H, 2 ms of delay); the beam's output is resynthesised in the time domain and
// fed to the echo canceller, which keeps one echo path per beam (kalman_aec.h, select_bank).
// A change of beam fades from the old beam's spectrum to the new one's over kFadeBlocks blocks:
// no click, and the talker's first syllable is heard through both while the fade lasts.
#ifndef ROOMD_ARRAY_BEAM_H
#define ROOMD_ARRAY_BEAM_H

#include <complex>
#include <math.h>
#include <stdlib.h>
#include <string.h>

namespace roombeam {

constexpr int kBeams = 24;                    // 15° apart: at most 7.5° off the talker
constexpr float kElevationDeg = 20.0f;        // the locator's (talker_locator.h)
constexpr double kMinWhiteNoiseGain = 0.5;    // −3 dB: −10 dB scored best in the far-field rooms
                                              // (mean STOI 0.849 vs 0.826), but its amplified mic
                                              // noise opened the voice gate in a quiet room (the
                                              // HIL rig: 68-82 packets sent after a self-test,
                                              // ≤ 40 allowed; −3 dB: 25) and cost close talk
                                              // (PESQ 3.87 vs 3.96; 4.08 without the array)
constexpr double kFullSuperdirectiveHz = 1000; // below: the floor rises to 0 dB at DC
constexpr int kFadeBlocks = 3;
constexpr int kMaxMics = 8;
// How far (degrees) the talker must be from the current beam's centre before another beam takes
// over: half the spacing and a margin, so a talker between two beams does not flip them.
constexpr float kSwitchDegrees = 360.0f / kBeams / 2 + 3.0f;

struct Beam {
    int mics, H, Nr, Kr, D;
    roomaec::RealFFT fft;
    float *hist[kMaxMics];                    // last Nr samples per mic
    float *wa, *ws, *frame;
    float *Xr[kMaxMics], *Xi[kMaxMics];       // this block's spectra
    float *wr, *wi;                           // [beam][mic][bin]: conj(w), so Y = Σ (wr + i·wi)·X
    float *Yr, *Yi;
    float *ola, *rt;
    int current, previous, fade;              // fade: blocks of the fade still to come
    // The echo's relative transfer from mic 0 to each mic, learnt while the far end plays alone
    // (learn_echo): smoothed cross-spectra X_m·X_0* and |X_0|². With it, the echo path a beam
    // hears is the mic-0 path times Σ_m conj(w_m)·RTF_m per bin (echo_gain), which is how the
    // canceller starts a beam it has not served before (kalman_aec.h, select_bank).
    float *cr[kMaxMics], *ci[kMaxMics], *p00;
    int learn_echo;
    long echo_blocks;
};

static void destroy(Beam *b) {
    if (!b) return;
    roomaec::fft_free(&b->fft);
    for (int m = 0; m < kMaxMics; m++) { free(b->hist[m]); free(b->Xr[m]); free(b->Xi[m]); free(b->cr[m]); free(b->ci[m]); }
    free(b->p00);
    free(b->wa); free(b->ws); free(b->frame); free(b->wr); free(b->wi);
    free(b->Yr); free(b->Yi); free(b->ola); free(b->rt);
    free(b);
}

// Solves A v = d (M × M, complex) by elimination with partial pivoting; A is overwritten.
static void solve(std::complex<double> *A, std::complex<double> *v, int M) {
    for (int c = 0; c < M; c++) {
        int piv = c;
        for (int r = c + 1; r < M; r++) if (std::abs(A[r * M + c]) > std::abs(A[piv * M + c])) piv = r;
        if (piv != c) {
            for (int j = 0; j < M; j++) std::swap(A[c * M + j], A[piv * M + j]);
            std::swap(v[c], v[piv]);
        }
        for (int r = c + 1; r < M; r++) {
            std::complex<double> f = A[r * M + c] / A[c * M + c];
            for (int j = c; j < M; j++) A[r * M + j] -= f * A[c * M + j];
            v[r] -= f * v[c];
        }
    }
    for (int r = M - 1; r >= 0; r--) {
        std::complex<double> s = v[r];
        for (int j = r + 1; j < M; j++) s -= A[r * M + j] * v[j];
        v[r] = s / A[r * M + r];
    }
}

// Distortionless weights for steering d and loading mu over the diffuse coherence G; returns wᴴw.
static double loaded_weights(const double *G, const std::complex<double> *d, double mu, int M, std::complex<double> *w) {
    std::complex<double> A[kMaxMics * kMaxMics];
    for (int i = 0; i < M; i++)
        for (int j = 0; j < M; j++) A[i * M + j] = G[i * M + j] + (i == j ? mu : 0.0);
    for (int i = 0; i < M; i++) w[i] = d[i];
    solve(A, w, M);
    std::complex<double> den = 0;
    for (int i = 0; i < M; i++) den += std::conj(d[i]) * w[i];
    double n2 = 0;
    for (int i = 0; i < M; i++) { w[i] /= den; n2 += std::norm(w[i]); }
    return n2;
}

// kBeams + 1 beams over `mics` mics at xyz (metres, board frame), blocks of H samples, frames of
// Nr (the canceller suppressor's), delay D. NULL when out of memory.
static Beam *create(int rate, int mics, const float *xyz, int H, int Nr, int D) {
    if (mics < 2 || mics > kMaxMics) return nullptr;
    Beam *b = (Beam *)calloc(1, sizeof(Beam));
    if (!b) return nullptr;
    b->mics = mics; b->H = H; b->Nr = Nr; b->Kr = Nr / 2 + 1; b->D = D;
    const int Kr = b->Kr;
    const size_t table = (size_t)(kBeams + 1) * mics * Kr;
    bool ok = roomaec::fft_init(&b->fft, Nr);
    b->wa = (float *)calloc(Nr, sizeof(float)); b->ws = (float *)calloc(Nr, sizeof(float));
    b->frame = (float *)calloc(Nr, sizeof(float));
    b->wr = (float *)calloc(table, sizeof(float)); b->wi = (float *)calloc(table, sizeof(float));
    b->Yr = (float *)calloc(Kr, sizeof(float)); b->Yi = (float *)calloc(Kr, sizeof(float));
    b->ola = (float *)calloc(Nr, sizeof(float)); b->rt = (float *)calloc(Nr, sizeof(float));
    b->p00 = (float *)calloc(Kr, sizeof(float));
    ok = ok && b->wa && b->ws && b->frame && b->wr && b->wi && b->Yr && b->Yi && b->ola && b->rt && b->p00;
    for (int m = 0; ok && m < mics; m++) {
        b->hist[m] = (float *)calloc(Nr, sizeof(float));
        b->Xr[m] = (float *)calloc(Kr, sizeof(float)); b->Xi[m] = (float *)calloc(Kr, sizeof(float));
        b->cr[m] = (float *)calloc(Kr, sizeof(float)); b->ci[m] = (float *)calloc(Kr, sizeof(float));
        ok = b->hist[m] && b->Xr[m] && b->Xi[m] && b->cr[m] && b->ci[m];
    }
    if (!ok) { destroy(b); return nullptr; }
    roomaec::lowdelay_windows(Nr, H, D, b->wa, b->ws);
    const double c = 343.0, el = kElevationDeg * M_PI / 180.0;
    // ROOMD_BEAM_WNG_DB (a measurement override, read once here): another white-noise gain floor
    double min_wng = kMinWhiteNoiseGain;
    if (const char *e = getenv("ROOMD_BEAM_WNG_DB")) {
        char *end = nullptr;
        double db = strtod(e, &end);
        if (end != e && *end == 0 && db >= -30 && db <= 6) min_wng = pow(10, db / 10);
    }
    double dist[kMaxMics * kMaxMics];
    for (int i = 0; i < mics; i++)
        for (int j = 0; j < mics; j++) {
            double dx = xyz[i * 3] - xyz[j * 3], dy = xyz[i * 3 + 1] - xyz[j * 3 + 1], dz = xyz[i * 3 + 2] - xyz[j * 3 + 2];
            dist[i * mics + j] = sqrt(dx * dx + dy * dy + dz * dz);
        }
    double G[kMaxMics * kMaxMics];
    std::complex<double> d[kMaxMics], w[kMaxMics];
    for (int k = 0; k < Kr; k++) {
        const double omega = 2 * M_PI * (double)k * rate / Nr;
        for (int i = 0; i < mics * mics; i++) {
            double x = omega * dist[i] / c;
            G[i] = x < 1e-9 ? 1.0 : sin(x) / x;
        }
        for (int beam = 0; beam < kBeams; beam++) {
            const double az = beam * 2 * M_PI / kBeams;
            const double ux = cos(el) * cos(az), uy = cos(el) * sin(az), uz = sin(el);
            for (int m = 0; m < mics; m++) {
                // a plane wave from u reaches mic m at t_m = −(p_m·u)/c: its spectrum there is e^{−iωt_m}
                double t = -(xyz[m * 3] * ux + xyz[m * 3 + 1] * uy + xyz[m * 3 + 2] * uz) / c;
                d[m] = std::polar(1.0, -omega * t);
            }
            // The smallest loading (bisection on log10 μ over 1e-8 … 1e3) with wᴴw ≤ 1/WNG. Below
            // kFullSuperdirectiveHz the floor rises towards 0 dB at DC: there a 64 mm array's
            // superdirective gain is bought with the mics' own noise, which a quiet room then hears
            // as a low rumble (and the voice detector as a talker).
            const double f_hz = (double)k * rate / Nr;
            const double wng = f_hz >= kFullSuperdirectiveHz ? min_wng
                : pow(min_wng, f_hz / kFullSuperdirectiveHz);
            const double limit = 1.0 / wng;
            if (loaded_weights(G, d, 1e-8, mics, w) > limit) {
                double lo = -8, hi = 3;
                for (int it = 0; it < 30; it++) {
                    double mid = 0.5 * (lo + hi);
                    if (loaded_weights(G, d, pow(10, mid), mics, w) <= limit) hi = mid; else lo = mid;
                }
                loaded_weights(G, d, pow(10, hi), mics, w);
            }
            for (int m = 0; m < mics; m++) {
                size_t at = ((size_t)beam * mics + m) * Kr + k;
                b->wr[at] = (float)w[m].real();
                b->wi[at] = (float)-w[m].imag();   // stored conjugated
            }
        }
        b->wr[((size_t)kBeams * mics + 0) * Kr + k] = 1;   // beam kBeams: mic 0
    }
    b->current = b->previous = kBeams;
    return b;
}

// The beam whose centre is nearest azimuth_deg (board frame).
static int nearest_beam(float azimuth_deg) {
    float a = fmodf(azimuth_deg, 360.0f);
    if (a < 0) a += 360.0f;
    return (int)lroundf(a * kBeams / 360.0f) % kBeams;
}

// The beam for a talker at azimuth_deg given the beam in use: the nearest, unless the current
// one is still within kSwitchDegrees.
static int beam_for(const Beam *b, float azimuth_deg) {
    if (b->current < kBeams) {
        float off = fabsf(fmodf(azimuth_deg - b->current * 360.0f / kBeams, 360.0f));
        if (off > 180) off = 360 - off;
        if (off <= kSwitchDegrees) return b->current;
    }
    return nearest_beam(azimuth_deg);
}

// Points the beam at `beam` (kBeams: mic 0); a change fades over kFadeBlocks blocks.
static void steer(Beam *b, int beam) {
    if (beam == b->current || beam < 0 || beam > kBeams) return;
    b->previous = b->current;
    b->current = beam;
    b->fade = kFadeBlocks;
}

// How beam `beam` hears the echo relative to mic 0 at bin k: Σ_m conj(w_m)·RTF_m. 1 before the
// far end has been heard alone for ~0.3 s (no transfer learnt: the beam is taken to hear it as
// mic 0 does). 
static inline void echo_gain(const Beam *b, int beam, int k, float *gr, float *gi) {
    if (b->echo_blocks < 30 || b->p00[k] <= 0) { *gr = 1; *gi = 0; return; }
    const size_t base = (size_t)beam * b->mics * b->Kr + k;
    float sr = b->wr[base], si = b->wi[base];   // mic 0: RTF 1
    const float inv = 1 / b->p00[k];
    for (int m = 1; m < b->mics; m++) {
        const float rr = b->cr[m][k] * inv, ri = b->ci[m][k] * inv;
        const float wr = b->wr[base + (size_t)m * b->Kr], wi = b->wi[base + (size_t)m * b->Kr];
        sr += wr * rr - wi * ri; si += wr * ri + wi * rr;
    }
    *gr = sr; *gi = si;
}

// Y += gain · (beam's weights)·X
static inline void add_beam(Beam *b, int beam, float gain) {
    const int Kr = b->Kr;
    for (int m = 0; m < b->mics; m++) {
        const float *wr = b->wr + ((size_t)beam * b->mics + m) * Kr, *wi = b->wi + ((size_t)beam * b->mics + m) * Kr;
        const float *xr = b->Xr[m], *xi = b->Xi[m];
        float *yr = b->Yr, *yi = b->Yi;
        for (int k = 0; k < Kr; k++) {
            yr[k] += gain * (wr[k] * xr[k] - wi[k] * xi[k]);
            yi[k] += gain * (wr[k] * xi[k] + wi[k] * xr[k]);
        }
    }
}

// One block: H samples per mic → H samples of the beam, delayed by D.
static void process(Beam *b, const float *const *mics, float *out) {
    const int Nr = b->Nr, H = b->H, D = b->D;
    for (int m = 0; m < b->mics; m++) {
        memmove(b->hist[m], b->hist[m] + H, sizeof(float) * (Nr - H));
        memcpy(b->hist[m] + Nr - H, mics[m], sizeof(float) * H);
        for (int i = 0; i < Nr; i++) b->frame[i] = b->hist[m][i] * b->wa[i];
        roomaec::rfft(&b->fft, b->frame, b->Xr[m], b->Xi[m]);
    }
    if (b->learn_echo) {
        const float a = 0.98f;   // ~0.5 s of far end alone
        const float *x0r = b->Xr[0], *x0i = b->Xi[0];
        for (int m = 1; m < b->mics; m++) {
            const float *xr = b->Xr[m], *xi = b->Xi[m];
            float *cr = b->cr[m], *ci = b->ci[m];
            for (int k = 0; k < b->Kr; k++) {
                cr[k] = a * cr[k] + (1 - a) * (xr[k] * x0r[k] + xi[k] * x0i[k]);
                ci[k] = a * ci[k] + (1 - a) * (xi[k] * x0r[k] - xr[k] * x0i[k]);
            }
        }
        for (int k = 0; k < b->Kr; k++) b->p00[k] = a * b->p00[k] + (1 - a) * (x0r[k] * x0r[k] + x0i[k] * x0i[k]);
        b->echo_blocks++;
    }
    memset(b->Yr, 0, sizeof(float) * b->Kr);
    memset(b->Yi, 0, sizeof(float) * b->Kr);
    if (b->fade > 0) {
        const float g = (float)(kFadeBlocks - b->fade + 1) / (kFadeBlocks + 1);
        add_beam(b, b->current, g);
        add_beam(b, b->previous, 1 - g);
        b->fade--;
    } else {
        add_beam(b, b->current, 1);
    }
    roomaec::irfft(&b->fft, b->Yr, b->Yi, b->rt);
    memmove(b->ola, b->ola + H, sizeof(float) * (Nr - H));
    memset(b->ola + Nr - H, 0, sizeof(float) * H);
    for (int i = Nr - H - D; i < Nr; i++) b->ola[i] += b->rt[i] * b->ws[i];
    memcpy(out, b->ola + Nr - H - D, sizeof(float) * H);
}

}  // namespace roombeam

#endif
