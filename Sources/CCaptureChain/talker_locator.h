// Who talks, and from where: the direction of the active talker around a table array, from the
// raw microphones (docs/audio-engine.md, "Finding the talker"). Included once, by apm_shim.cpp,
// which shares its real FFT (kalman_aec.h). Everything is allocated in create; a block
// allocates nothing.
//
// Steered response power with phase transform (SRP-PHAT): each mic's spectrum of the last N
// samples (Hann window) is whitened (X/|X|, so the room's colouring and the talker's loudness
// drop out and only the phase — the time of arrival — is left), and for each of 72 directions
// around the circle (5° apart, at a talker's typical elevation above a table array, 20°) the
// whitened spectra are phase-aligned for a plane wave from there and summed; the power of that
// sum, averaged over the speech band 300-4000 Hz and normalized to the mean coherence of the
// mic pairs (1: the sound came from exactly there, 0: nothing in common), is that direction's
// response. Above ~3.8 kHz this array (64 mm across) aliases; below 300 Hz it cannot resolve.
//
// Steady noise (a ventilation outlet, a fan) is a source with a direction of its own and would
// win the map in every pause and under every word; so each bin is weighted by how far mic 0's
// power there stands above that bin's noise floor (tracked every block: follows a fall at once,
// a rise at ~0.9 dB/s), w = (1 - noise/power)^2, and only bins the talker dominates steer.
//
// Only blocks the caller says to listen to count (the chain heard voice, and the far end was
// quiet or the canceller saw the room talk over it), and only blocks whose clear bins weigh at
// least 4, smoothed over ~60 ms. The map's peak (refined by a parabola) becomes the talker's direction once it has
// held within 10° for 5 listened blocks; a locked direction follows small moves at once and
// jumps to a new place after 8 blocks there (a new talker); 2 s without a listened block
// unlocks it (the direction is kept, reported as not locked).
#ifndef ROOMD_TALKER_LOCATOR_H
#define ROOMD_TALKER_LOCATOR_H

#include <math.h>
#include <stdlib.h>
#include <string.h>

namespace roomloc {

constexpr int kDirections = 72;               // 5° apart
constexpr float kElevationDeg = 20.0f;        // a seated talker's, seen from a table array
constexpr float kLowHz = 300.0f, kHighHz = 4000.0f;
constexpr float kSmoothingMs = 60.0f;
constexpr float kMinConfidence = 0.10f;       // peak above the map's mean, in coherence units (0.04
                                              // let residual echo and a vent lock a direction
                                              // before anyone talked: farfield double-talk room)
constexpr int kLockBlocks = 5, kSwitchBlocks = 8, kHoldDegrees = 10, kFollowDegrees = 15;
constexpr int kUnlockBlocks = 200;            // 2 s without a listened block
constexpr int kEchoMaskDegrees = 25;          // while the far end plays, no talker is taken from
                                              // within this of where its echo comes from
constexpr float kEchoSmoothingMs = 500.0f;
constexpr int kMaxMics = 8;
constexpr float kMaxSpacing = 0.17f;          // metres: half a wavelength at 1 kHz
#ifndef LOC_ONSETS
#define LOC_ONSETS 1
#endif
constexpr int kOnsets = LOC_ONSETS;
constexpr float kMinWeight = 4.0f;            // the weights of at least ~4 clear bins
constexpr float kNoiseBias = 8.0f;            // steer only where mic 0 is 9 dB above the floor (farfield scenes: 2.5, 5 and 8 tried, 8 best)

struct Locator {
    int rate, mics, H, N, k0, k1, bins;
    RoomFFT fft;
    float *hist[kMaxMics];      // last N samples per mic
    float *win, *frame;
    float *Xr[kMaxMics], *Xi[kMaxMics];   // whitened spectra, bins k0..k1
    float *sr, *si;             // steering table [dir][mic][bin], cos/sin of the alignment phase
    float *accr, *acci;         // per-bin sums for one direction
    float *power, *noise, *weight;   // mic 0's smoothed power, its floor, the bins' weights
    float *recent;                   // mic 0's power over the last ~50 ms (onsets)
    int noise_started;
    float map[kDirections];
    // How much of the map is evidence rather than its zero start: the sum of the smoothing's
    // weights so far (1 − alpha^n after n listened blocks). The map's peak over its mean is
    // divided by it, so the first talker after start-up is judged on what the map has heard,
    // not on a 60 ms average that is still mostly the empty start (the 2.4 m fan room's first
    // talker: the peak at the right place for 10 blocks, the confidence 0.03-0.11 against
    // 0.10 needed, lock-on 285 ms).
    float map_weight;
    // Where the speaker's echo comes from, learnt from blocks in which the far end plays alone:
    // its own map, smoothed over ~0.5 s, and that map's peak (−1 until one stands out).
    float echo_map[kDirections];
    int echo_dir;
    float echo_alpha;
    float alpha;                // smoothing per listened block
    // what is reported
    float azimuth_deg, confidence;
    int locked;
    unsigned changes;
    // lock bookkeeping
    int pending, pending_count, quiet;
    int has_direction;
};

static inline float wrap_deg(float d) {
    while (d > 180.0f) d -= 360.0f;
    while (d <= -180.0f) d += 360.0f;
    return d;
}

static void destroy(Locator *l) {
    if (!l) return;
    room_fft_free(&l->fft);
    for (int m = 0; m < kMaxMics; m++) { free(l->hist[m]); free(l->Xr[m]); free(l->Xi[m]); }
    free(l->win); free(l->frame); free(l->sr); free(l->si); free(l->accr); free(l->acci);
    free(l->power); free(l->noise); free(l->weight); free(l->recent);
    free(l);
}

// Why mics at these positions (x y z per mic, metres, board frame) cannot tell directions around
// the whole circle, or nullptr when they can.
static const char *geometry_problem(int mics, const float *xyz) {
    if (mics < 3 || mics > kMaxMics) return "needs 3 to 8 microphones (2 cannot tell front from back)";
    // the mics must span an area in the horizontal plane (not all on one line)
    float area = 0;
    for (int a = 1; a < mics; a++)
        for (int b = a + 1; b < mics; b++) {
            float ux = xyz[a * 3] - xyz[0], uy = xyz[a * 3 + 1] - xyz[1];
            float vx = xyz[b * 3] - xyz[0], vy = xyz[b * 3 + 1] - xyz[1];
            area = fmaxf(area, fabsf(ux * vy - uy * vx) / 2);
        }
    if (area < 1e-5f) return "the microphones lie on one line (or one point) in the horizontal plane: no direction around the circle";
    // Mics farther apart than half a wavelength alias: at 0.17 m every direction is ambiguous
    // above 1 kHz, most of the speech band the map uses (the 4-mic HATs: 0.064-0.091 m).
    float widest = 0;
    for (int a = 0; a < mics; a++)
        for (int b = a + 1; b < mics; b++) {
            float dx = xyz[a * 3] - xyz[b * 3], dy = xyz[a * 3 + 1] - xyz[b * 3 + 1], dz = xyz[a * 3 + 2] - xyz[b * 3 + 2];
            widest = fmaxf(widest, sqrtf(dx * dx + dy * dy + dz * dz));
        }
    if (widest > kMaxSpacing) return "two microphones are more than 0.17 m apart: directions alias above 1 kHz, in most of the speech band (an array for roomd is at most 0.17 m across)";
    return nullptr;
}

// NULL with a reason when the geometry cannot tell directions (geometry_problem) or out of memory.
static Locator *create(int rate, int mics, const float *xyz, const char **why) {
    if ((*why = geometry_problem(mics, xyz))) return nullptr;
    Locator *l = (Locator *)calloc(1, sizeof(Locator));
    if (!l) { *why = "out of memory"; return nullptr; }
    l->rate = rate;
    l->mics = mics;
    l->H = rate / 100;
    l->N = 1;
    while (l->N < 2 * l->H) l->N <<= 1;
    float df = (float)rate / l->N;
    l->k0 = (int)ceilf(kLowHz / df);
    l->k1 = (int)floorf(kHighHz / df);
    l->bins = l->k1 - l->k0 + 1;
    size_t table = (size_t)kDirections * mics * l->bins;
    bool ok = (room_fft_init(&l->fft, l->N) == 0);
    l->win = (float *)calloc(l->N, sizeof(float));
    l->frame = (float *)calloc(l->N + 2, sizeof(float));
    l->sr = (float *)calloc(table, sizeof(float));
    l->si = (float *)calloc(table, sizeof(float));
    l->accr = (float *)calloc(l->bins, sizeof(float));
    l->acci = (float *)calloc(l->bins, sizeof(float));
    l->power = (float *)calloc(l->bins, sizeof(float));
    l->noise = (float *)calloc(l->bins, sizeof(float));
    l->weight = (float *)calloc(l->bins, sizeof(float));
    l->recent = (float *)calloc(l->bins, sizeof(float));
    ok = ok && l->win && l->frame && l->sr && l->si && l->accr && l->acci && l->power && l->noise && l->weight && l->recent;
    for (int m = 0; ok && m < mics; m++) {
        l->hist[m] = (float *)calloc(l->N, sizeof(float));
        l->Xr[m] = (float *)calloc(l->N / 2 + 1, sizeof(float));
        l->Xi[m] = (float *)calloc(l->N / 2 + 1, sizeof(float));
        ok = l->hist[m] && l->Xr[m] && l->Xi[m];
    }
    if (!ok) { destroy(l); *why = "out of memory"; return nullptr; }
    for (int i = 0; i < l->N; i++) l->win[i] = 0.5f - 0.5f * cosf(2.0f * (float)M_PI * i / l->N);
    // A plane wave from direction u reaches mic m at t_m = -(p_m . u) / c; multiplying its
    // spectrum by e^{+j w t_m} aligns every mic on the array centre.
    const double el = kElevationDeg * M_PI / 180.0, c = 343.0;
    for (int d = 0; d < kDirections; d++) {
        double az = d * 2.0 * M_PI / kDirections;
        double ux = cos(el) * cos(az), uy = cos(el) * sin(az), uz = sin(el);
        for (int m = 0; m < mics; m++) {
            double t = -(xyz[m * 3] * ux + xyz[m * 3 + 1] * uy + xyz[m * 3 + 2] * uz) / c;
            float *cr = l->sr + ((size_t)d * mics + m) * l->bins, *ci = l->si + ((size_t)d * mics + m) * l->bins;
            for (int k = 0; k < l->bins; k++) {
                double ph = 2.0 * M_PI * (l->k0 + k) * df * t;
                cr[k] = (float)cos(ph);
                ci[k] = (float)sin(ph);
            }
        }
    }
    l->alpha = expf(-10.0f / kSmoothingMs);
    l->echo_alpha = expf(-10.0f / kEchoSmoothingMs);
    l->echo_dir = -1;
    l->pending = -1;
    return l;
}

// The map's peak refined with a parabola through its neighbours, in degrees.
static float peak_degrees(const float *map, int i) {
    float a = map[(i + kDirections - 1) % kDirections], b = map[i], c = map[(i + 1) % kDirections];
    float den = a - 2 * b + c, off = den < 0 ? 0.5f * (a - c) / den : 0.0f;
    return wrap_deg((i + off) * 360.0f / kDirections);
}

enum Mode { kIdle = 0, kListen = 1, kEchoAlone = 2 };

// mode: kListen when the block may move the talker's direction, kEchoAlone when the far end plays
// and nobody in the room talks (the block teaches where the echo comes from), else kIdle.
// far_active: the far end plays (the echo's direction is then masked). near_share: per bin of the
// N-point grid (N/2 + 1 bins), the share of mic power that is not the speaker's echo (roomd's
// canceller's estimate), or nullptr.
static void process(Locator *l, const float *const *mics, int mode, int far_active, const float *near_share) {
    const int listen = mode == kListen, learn = mode == kEchoAlone;
    const int N = l->N, H = l->H;
    for (int m = 0; m < l->mics; m++) {   // keep the last N samples
        memmove(l->hist[m], l->hist[m] + H, (size_t)(N - H) * sizeof(float));
        memcpy(l->hist[m] + N - H, mics[m], (size_t)H * sizeof(float));
    }
    // mic 0 every block: the noise floor is learnt in the pauses too
    for (int m = 0; m < (listen || learn ? l->mics : 1); m++) {
        for (int i = 0; i < N; i++) l->frame[i] = l->hist[m][i] * l->win[i];
        room_fft_forward(&l->fft, l->frame, l->Xr[m], l->Xi[m]);
    }
    {
        const float *xr = l->Xr[0] + l->k0, *xi = l->Xi[0] + l->k0;
        for (int k = 0; k < l->bins; k++) {
            float p = xr[k] * xr[k] + xi[k] * xi[k];
            // onset: this block's power over the last ~50 ms'
            float onset = p > 0 && l->noise_started ? 1.0f - l->recent[k] / p : 0.0f;
            l->weight[k] = onset > 0 ? onset : 0.0f;
            l->recent[k] = l->noise_started ? 0.8f * l->recent[k] + 0.2f * p : p;
            l->power[k] = l->noise_started ? 0.7f * l->power[k] + 0.3f * p : p;
            float rise = l->noise[k] * 1.002f;
            l->noise[k] = !l->noise_started ? l->power[k] : l->power[k] < rise ? l->power[k] : rise;
        }
        l->noise_started = 1;
    }
    if (!listen) {
        if (++l->quiet >= kUnlockBlocks) l->locked = 0;
        if (!learn) return;
    } else {
        l->quiet = 0;
    }
    float W = 0;
    for (int k = 0; k < l->bins; k++) {
        float snr = l->power[k] > 0 ? 1.0f - kNoiseBias * l->noise[k] / l->power[k] : 0.0f;
        float w = snr > 0 ? snr * snr * (kOnsets ? l->weight[k] : 1.0f) : 0.0f;
        // the speaker's echo is a source too, one the room's talker must stand above
        if (near_share && listen) w *= near_share[l->k0 + k] * near_share[l->k0 + k];
        l->weight[k] = sqrtf(w);   // on each mic's spectrum: the pair products get w
        W += w;
    }
    if (W < kMinWeight) return;    // nothing but noise in this block
    for (int m = 0; m < l->mics; m++) {
        float *xr = l->Xr[m] + l->k0, *xi = l->Xi[m] + l->k0;
        for (int k = 0; k < l->bins; k++) {
            float g = l->weight[k] / (sqrtf(xr[k] * xr[k] + xi[k] * xi[k]) + 1e-12f);
            xr[k] *= g;
            xi[k] *= g;
        }
    }
    const float M = (float)l->mics, norm = 1.0f / (W * M * (M - 1.0f));
    float mean = 0;
    for (int d = 0; d < kDirections; d++) {
        float *ar = l->accr, *ai = l->acci;
        memset(ar, 0, (size_t)l->bins * sizeof(float));
        memset(ai, 0, (size_t)l->bins * sizeof(float));
        for (int m = 0; m < l->mics; m++) {
            const float *xr = l->Xr[m] + l->k0, *xi = l->Xi[m] + l->k0;
            const float *cr = l->sr + ((size_t)d * l->mics + m) * l->bins, *ci = l->si + ((size_t)d * l->mics + m) * l->bins;
            for (int k = 0; k < l->bins; k++) {
                ar[k] += xr[k] * cr[k] - xi[k] * ci[k];
                ai[k] += xr[k] * ci[k] + xi[k] * cr[k];
            }
        }
        float p = 0;
        for (int k = 0; k < l->bins; k++) p += ar[k] * ar[k] + ai[k] * ai[k];
        float srp = (p - W * M) * norm;   // the mean (weighted) coherence of the mic pairs there
        float *map = learn ? l->echo_map : l->map;
        const float a = learn ? l->echo_alpha : l->alpha;
        map[d] = a * map[d] + (1.0f - a) * srp;
        mean += map[d];
    }
    mean /= kDirections;
    if (learn) {
        int e = 0;
        for (int d = 1; d < kDirections; d++) if (l->echo_map[d] > l->echo_map[e]) e = d;
        if (l->echo_map[e] - mean >= kMinConfidence) l->echo_dir = e;
        return;
    }
    l->map_weight = l->alpha * l->map_weight + (1.0f - l->alpha);
    // While the far end plays, the echo's direction cannot become a talker's (what is left of
    // the echo after the weighting would otherwise win the map during loud double talk).
    const int mask = far_active && l->echo_dir >= 0 ? kEchoMaskDegrees * kDirections / 360 : -1;
    auto masked = [&](int d) {
        if (mask < 0) return false;
        int dist = abs(d - l->echo_dir);
        return dist <= mask || kDirections - dist <= mask;
    };
    int best = -1;
    for (int d = 0; d < kDirections; d++) if (!masked(d) && (best < 0 || l->map[d] > l->map[best])) best = d;
    l->confidence = (l->map[best] - mean) / l->map_weight;
    if (l->confidence < kMinConfidence) return;
    float az = peak_degrees(l->map, best);
    // pending: where the peak has been lately, and for how many listened blocks
    const int hold = kHoldDegrees * kDirections / 360;
    int dist = abs(best - l->pending);
    if (l->pending >= 0 && (dist <= hold || kDirections - dist <= hold)) l->pending_count++;
    else { l->pending = best; l->pending_count = 1; }
    if (l->locked && far_active) {
        // While the far end plays a held direction stays where it is; a new talker (or the same
        // one moving) waits for the far end's first pause: in double talk what the echo leaves in
        // the map (reflections, the array's side lobes) outweighs a talker often enough to jump
        // the direction around the room (the double-talk bench's dry room: 5-7 false jumps in
        // 8 s with the echo's bins weighted down and its direction masked) or to walk it there
        // in small follows (a sim-card test: −90° to −30° in 5 s). A first lock is still taken.
    } else if (l->locked && fabsf(wrap_deg(az - l->azimuth_deg)) <= kFollowDegrees) {
        l->azimuth_deg = az;                       // the same talker, moving a little
    } else if (l->pending_count >= (l->locked ? kSwitchBlocks : kLockBlocks)) {
        bool moved = !l->has_direction || fabsf(wrap_deg(az - l->azimuth_deg)) > kFollowDegrees;
        l->azimuth_deg = az;
        l->has_direction = 1;
        if (moved) l->changes++;             // a re-lock in the same place is the same talker
        l->locked = 1;
    }
}

}  // namespace roomloc

#endif
