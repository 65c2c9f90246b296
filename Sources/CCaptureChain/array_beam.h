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
// with the smallest loading μ whose white-noise gain stays at or above a floor: an unloaded
// superdirective beam amplifies the mics' own noise and their mismatch without bound at low
// frequencies. Which floor is right depends on the room: −10 dB scored best in the far-field
// rooms (mean STOI 0.849 vs 0.826 at −3 dB), but in a quiet room, where the mics' own noise is
// most of what they hear, its amplified noise opened the voice gate (the HIL rig: 68-82 packets
// sent after a self-test) and cost close talk (PESQ 3.87 vs 3.96). So each beam keeps several
// designs (kCandidateFloorsDB, delay-and-sum among them) and chooses per bin the one that lets
// through the least of the noise the mics hear while nobody talks (adapt): a robust, restricted
// MVDR. Every candidate is distortionless towards the look direction, so a noise estimate that
// caught some speech can cost noise reduction, never the talker; the causal study
// (scripts/study/farfield) found an online MVDR with the true noise statistics no better than a
// fixed superdirective beam (mean STOI 0.855 vs 0.850), so nothing freer is worth its risk in
// double talk. Beam kBeams is mic 0 alone, what the chain hears before a direction is known.
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
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

namespace roombeam {

constexpr int kBeams = 24;                    // 15° apart: at most 7.5° off the talker
constexpr float kElevationDeg = 20.0f;        // the locator's (talker_locator.h)
// The adaptive choice (adapt; docs/audio-engine.md, "The beam"): per beam and bin, one of these
// designs, the one whose output is quietest over what the mics heard while the far end was quiet
// (the talker, the room's reverberation of them, its noise, the mics' own noise). All pass the
// look direction unchanged, so the talker adds the same to every candidate's output and the
// choice is made by the rest: delay-and-sum (the most white-noise gain there is, 10·log10(mics)
// dB) where the mics' own noise is all there is, superdirective where reverberation or a
// diffuse noise is. A quiet room in which nobody has talked for a while gets delay-and-sum.
// The floors go down to −25 dB because the far rooms' low bins want it: below ~300 Hz a 64 mm
// array buys directivity only with very little white-noise gain, and there the far-field bench's
// 2.4 m, 3 m, turns and double-talk rooms gained 0.003-0.009 STOI with −20 and −25 dB beside the
// rest (the sim's mics carry −75 dBFS of their own noise each, more than a MEMS mic's ~−87, so the
// choice pays for the amplified noise as a board would). A −30 dB design as well took walking
// (a talker whose path crosses the beams off their centre) below the MVDR anchor: 0.894.
constexpr int kCandidates = 8;
constexpr double kCandidateFloorsDB[kCandidates] = {0 /* delay-and-sum */, 0, -3, -6, -10, -15, -20, -25};
constexpr int kStartCandidate = 0;            // delay-and-sum until the room says otherwise: the
                                              // design least hurt by a talker off the beam's
                                              // centre (a dry close talker lost 0.5 PESQ through
                                              // the −3 dB design in the double-talk bench's
                                              // rev120-loud room, where the far end's echo leaves
                                              // the choice little time to listen)
constexpr int kFixedCandidate = 2;            // −3 dB: the design of a beam that does not choose
// The design every beam has while the speaker's echo is in the room (Beam.fwr): delay-and-sum,
// as the adaptive beam starts. Measured against the −3 dB design (kFixedCandidate) in the
// double-talk bench's rev120-loud: 3.10 against 2.70 (2026-11-30).
constexpr int kEchoCandidate = kStartCandidate;
// … unless the room says otherwise when a beam is taken up with its echo path still to learn
// (choose_echo_design): then that beam's echo-time design is the one candidate, the same across
// frequency, whose output would be quietest over the room's noise alone (the mics' cross-spectra
// in blocks nobody in the room talks in: qnr/qni), over the codec's band, by at least
// kEchoChoiceMarginDB in the mean of its per-bin powers in dB. Where the mics' own noise is what
// there is (the double-talk bench's rooms: the 0 dB superdirective design came out 0.39-0.41 dB
// quieter than delay-and-sum in rev120-loud and far80-dry-loud) that is delay-and-sum; in a room
// with a vent and reverberation, superdirective (the far-field double-talk scene: −25 dB, the
// deepest). That scene's far end never pauses, so the per-bin choice never runs there: STOI 0.799
// with delay-and-sum; −3, −6, −10, −15 dB: 0.832, 0.833, 0.836, 0.851 (one build); with eight
// designs, −25 dB chosen, 0.867 against 0.859 with six the same afternoon.
constexpr float kEchoChoiceMarginDB = 1.0f;
constexpr float kEchoChoiceLowHz = 300, kEchoChoiceHighHz = 8000;
                                              // (rbeam, ROOMD_BEAM_ADAPT=off)
constexpr int kChoiceBinsPerBlock = 8;        // of the beam in use: 513 bins every ~0.65 s at 48 kHz
constexpr int kBlocksToChoose = 100;          // ~1 s heard before the choices move
// A beam taken up with no beam before it to take choices from (mic 0 alone before: the first
// talker the appliance hears, or the first after a self-test) goes through all its bins
// at kFirstChoiceBinsPerBlock a block (513 bins in 9 blocks at 48 kHz) as soon as
// kFirstChoiceBlocks have been heard, instead of starting from delay-and-sum and revisiting
// 8 bins a block: the talker's first words otherwise went through delay-and-sum for ~1 s.
constexpr int kFirstChoiceBlocks = 30;
constexpr int kFirstChoiceBinsPerBlock = 64;
constexpr float kChoiceMargin = 0.89f;        // another design must be 0.5 dB quieter
constexpr float kMemory = 0.998f;             // the cross-spectra's average: ~5 s (a talker's
                                              // sound, 30 dB above the room's noise, rules the
                                              // choice for ~30 s after they stop)
constexpr int kFarEndHangover = 50;           // blocks after the far end stops: its echo decays
constexpr float kNearOnly = 0.9f;             // while the echo is in the room, a bin is heard only
                                              // where the canceller finds 10 × less echo than rest
constexpr int kFadeBlocks = 3;
// The mics' sensitivities (calibrate): each mic's power over 150-800 Hz, where the array is small
// against the wavelength (0.43 m and more against 64 mm) and every mic hears the same pressure
// whatever the source; in the blocks where mic 0's 300 Hz-4 kHz power is within 3 dB of its floor
// (the room's noise alone). From the 5th such block on, averaged over up to 3000 (30 s of noise);
// never corrected by more than 6 dB.
constexpr float kCalibrationLowHz = 150, kCalibrationHighHz = 800;
constexpr float kCalibrationGateLowHz = 300, kCalibrationGateHighHz = 4000, kCalibrationFloorFactor = 2.0f;
constexpr float kCalibrationMaxDB = 6;
constexpr int kCalibrationFirstBlocks = 5, kCalibrationBlocks = 3000;
// Gains measured in an earlier run (seed_calibration) count as this many blocks of noise (10 s):
// a board's mics do not change, so the estimate starts there and what this run measures refines
// it; a state directory moved to another board is corrected within a minute of quiet.
constexpr int kCalibrationSeedBlocks = 1000;
// A mic's gain moved this far since the canceller was last told (cal_moved): it relearns the
// echo paths of the beams, which the gains are part of.
constexpr float kCalibrationRelearnDB = 0.2f;
constexpr int kMaxMics = 8;
// How far (degrees) the talker must be from the current beam's centre before another beam takes
// over: half the spacing and a margin, so a talker between two beams does not flip them.
constexpr float kSwitchDegrees = 360.0f / kBeams / 2 + 3.0f;

struct Beam {
    int mics, H, Nr, Kr, D;
    RoomFFT fft;
    float *hist[kMaxMics];                    // last Nr samples per mic
    float *wa, *ws, *frame;
    float *Xr[kMaxMics], *Xi[kMaxMics];       // this block's spectra
    float *wr, *wi;                           // [beam][mic][bin]: conj(w), so Y = Σ (wr + i·wi)·X
    float *Yr, *Yi;
    float *ola, *rt;
    int current, previous, fade;              // fade: blocks of the fade still to come
    // While the speaker's echo is in the room (the far end plays, and its hangover) every beam is
    // one design across frequency (fwr/fwi: kEchoCandidate, or a beam that does not choose its
    // own), and the adaptive choice (wr/wi) only in the far end's pauses. Why: a choice per bin
    // puts different designs side by side in frequency, which the beam's short frames cannot
    // apply as a time-invariant filter; the canceller behind it then found no echo path to learn
    // below ~20 dB of echo reduction (a caller bridged into a two-appliance room heard itself at
    // -24 dB; with delay-and-sum during the echo -52.8 dB: scripts/bench call, BeamEchoTests).
    // So the banks model the fixed design alone, and a choice moving changes no echo path.
    float *fwr, *fwi;
    unsigned char echo_choice[kBeams];        // the candidate in fwr/fwi per beam (choose_echo_design)
    int rate;
    bool echo_design, previous_echo_design;   // the tables in use now and before the fade
    // The echo's relative transfer from mic 0 to each mic, learnt while the far end plays alone
    // (learn_echo): smoothed cross-spectra X_m·X_0* and |X_0|². With it, the echo path a beam
    // hears is the mic-0 path times Σ_m conj(w_m)·RTF_m per bin (echo_gain), which is how the
    // canceller starts a beam it has not served before (kalman_aec.h, select_bank).
    float *cr[kMaxMics], *ci[kMaxMics], *p00;
    int learn_echo;
    long echo_blocks;
    // The adaptive choice (NULL tables: a fixed beam, as rbeam's). cwr/cwi hold every candidate
    // design [beam][bin][candidate][mic] (conjugated, as wr/wi; a bin's candidates side by side
    // for the comparison); wr/wi hold the chosen one per beam and bin, so a block reads one table
    // whatever was chosen. Only the beam in use is revisited: a beam keeps the choices it made
    // while it was in use, and revisits them within ~0.65 s of being used again.
    float *cwr, *cwi;
    unsigned char *chosen;                    // [beam][bin]
    unsigned char used[kBeams];               // steered to before: its choices are its own
    float *rnr, *rni;                         // [bin][pair]: the mics' cross-spectra, upper triangle
    // The same over the blocks in which nobody in the room talks (room_quiet): the room's noise
    // alone, what the echo-time design is chosen by (choose_echo_design). A talker, even one a
    // little off the beam's design direction, would make a design that bends away from them look
    // quieter: with every block counted, the double-talk bench's rev120-loud took the 0 dB
    // superdirective design and fell from 3.06 to 2.77 PESQ.
    float *qnr, *qni;
    int quiet_blocks;
    int room_quiet;                           // set by the owner before each block
    bool fixed_echo_design;                   // ROOMD_BEAM_ECHO_CHOICE=off: kEchoCandidate always
    int heard_blocks;                         // blocks averaged into them (up to kBlocksToChoose)
    int adapt;                                // choose (the APM's beam, unless ROOMD_BEAM_ADAPT=off)
    int hold;                                 // a self-test: neither listen nor choose
    int far_active, far_hangover;
    // The canceller's near-end share per bin (the echo's share of the residual's complement), the
    // canceller's last block: while the far end plays, the bins the talker and the room hold.
    // NULL without roomd's canceller: nothing is heard while the far end plays.
    const float *near_share;
    int sweep;                                // the next bin whose choice is revisited
    int first_sweep_left;                     // bins of a first choice still to go (kFirstChoiceBlocks)
    // The mics' sensitivities (calibrate): each mic's band power over the blocks that hold the
    // room's noise alone, and the gain that brings it to mic 0's.
    double cal_power[kMaxMics];
    float cal_gain[kMaxMics], cal_floor;
    int cal_blocks;
    // Blocks measured by this run (the seed not counted): whether the estimate holds anything new.
    int64_t cal_measured;
    // seed_calibration's gains, not yet weighed against a measured level (the first
    // kCalibrationFirstBlocks measured blocks do it).
    bool cal_seeded;
    // The gains when the owner was last told they moved (cal_moved): every beam's echo path is
    // Σ w·g·H, so a bank learnt before a move is off by it (apm_shim.cpp: the canceller relearns).
    float cal_told[kMaxMics];
    int cal_moved;
    bool calibrate;
    int cal_k0, cal_k1, gate_k0, gate_k1;
};

static void destroy(Beam *b) {
    if (!b) return;
    room_fft_free(&b->fft);
    for (int m = 0; m < kMaxMics; m++) { free(b->hist[m]); free(b->Xr[m]); free(b->Xi[m]); free(b->cr[m]); free(b->ci[m]); }
    free(b->p00);
    free(b->wa); free(b->ws); free(b->frame); free(b->wr); free(b->wi);
    free(b->Yr); free(b->Yi); free(b->ola); free(b->rt);
    free(b->cwr); free(b->cwi); free(b->chosen); free(b->rnr); free(b->rni); free(b->qnr); free(b->qni);
    free(b->fwr); free(b->fwi);
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

// The candidates' weights for steering d into w[candidate] — every one, or (all false)
// the fixed design alone at fixed_floor_db. The superdirective floors fall in order, so each
// one's loading lies at or below the last one's: its bisection starts there, and where the
// unloaded design (solved once) already meets a floor, it is that design.
static void design_bin(const double *G, const std::complex<double> *d, int M, bool all,
                       double fixed_floor_db, std::complex<double> (*w)[kMaxMics]) {
    for (int m = 0; m < M; m++) w[0][m] = d[m] / (double)M;   // delay-and-sum: d/(dᴴd), |d_m| = 1
    std::complex<double> unloaded[kMaxMics];
    const double unloaded_norm = loaded_weights(G, d, 1e-8, M, unloaded);
    double hi = 3;   // log10 μ: the bisection's upper end, the last candidate's loading
    for (int c = 1; c < kCandidates; c++) {
        if (!all && c != kFixedCandidate) continue;
        // The same floor at every frequency. Below 1 kHz a 64 mm array's superdirective gain is
        // bought with the mics' own noise and their mismatch, but there is also most of a
        // room's reverberant speech energy: a floor rising to 0 dB at DC below 1 kHz cost the
        // far-field bench 0.014-0.019 STOI per room, and where the mics' own noise is what there
        // is, the choice (adapt) takes delay-and-sum. Offline (scripts/study/farfield,
        // PERTURB=1:-30: ±1 dB gain error, self-noise −30 dB) the −15 dB design did no worse than −10.
        const double limit = 1.0 / pow(10, (all ? kCandidateFloorsDB[c] : fixed_floor_db) / 10);
        if (unloaded_norm <= limit) {
            for (int m = 0; m < M; m++) w[c][m] = unloaded[m];
            continue;
        }
        // the smallest loading (bisection on log10 μ over 1e-8 … hi) with wᴴw ≤ 1/WNG
        double lo = -8;
        for (int it = 0; it < 24; it++) {
            double mid = 0.5 * (lo + hi);
            if (loaded_weights(G, d, pow(10, mid), M, w[c]) <= limit) hi = mid; else lo = mid;
        }
        loaded_weights(G, d, pow(10, hi), M, w[c]);
    }
}

// kBeams + 1 beams over `mics` mics at xyz (metres, board frame), blocks of H samples, frames of
// Nr (the canceller suppressor's), delay D. `adaptive`: every candidate design is kept and the
// beam chooses among them as it hears the room's noise (else the start design alone, fixed).
// NULL when out of memory.
static Beam *create(int rate, int mics, const float *xyz, int H, int Nr, int D, bool adaptive = false) {
    if (mics < 2 || mics > kMaxMics) return nullptr;
    Beam *b = (Beam *)calloc(1, sizeof(Beam));
    if (!b) return nullptr;
    b->mics = mics; b->H = H; b->Nr = Nr; b->Kr = Nr / 2 + 1; b->D = D; b->rate = rate;
    memset(b->echo_choice, kEchoCandidate, sizeof b->echo_choice);
    const int Kr = b->Kr;
    const size_t table = (size_t)(kBeams + 1) * mics * Kr;
    bool ok = (room_fft_init(&b->fft, Nr) == 0);
    b->wa = (float *)calloc(Nr, sizeof(float)); b->ws = (float *)calloc(Nr, sizeof(float));
    b->frame = (float *)calloc(Nr, sizeof(float));
    b->wr = (float *)calloc(table, sizeof(float)); b->wi = (float *)calloc(table, sizeof(float));
    b->Yr = (float *)calloc(Kr, sizeof(float)); b->Yi = (float *)calloc(Kr, sizeof(float));
    b->ola = (float *)calloc(Nr, sizeof(float)); b->rt = (float *)calloc(Nr, sizeof(float));
    b->p00 = (float *)calloc(Kr, sizeof(float));
    b->fwr = (float *)calloc(table, sizeof(float)); b->fwi = (float *)calloc(table, sizeof(float));
    ok = ok && b->fwr && b->fwi && b->wa && b->ws && b->frame && b->wr && b->wi && b->Yr && b->Yi && b->ola && b->rt && b->p00;
    for (int m = 0; ok && m < mics; m++) {
        b->hist[m] = (float *)calloc(Nr, sizeof(float));
        b->Xr[m] = (float *)calloc(Kr, sizeof(float)); b->Xi[m] = (float *)calloc(Kr, sizeof(float));
        b->cr[m] = (float *)calloc(Kr, sizeof(float)); b->ci[m] = (float *)calloc(Kr, sizeof(float));
        ok = b->hist[m] && b->Xr[m] && b->Xi[m] && b->cr[m] && b->ci[m];
    }
    for (int m = 0; m < kMaxMics; m++) b->cal_gain[m] = b->cal_told[m] = 1;
    b->cal_k0 = (int)ceilf(kCalibrationLowHz * Nr / rate);
    b->cal_k1 = (int)(kCalibrationHighHz * Nr / rate);
    b->gate_k0 = (int)ceilf(kCalibrationGateLowHz * Nr / rate);
    b->gate_k1 = (int)(kCalibrationGateHighHz * Nr / rate);
    b->calibrate = true;
    // ROOMD_MIC_CALIBRATION=off (a measurement override): the mics as they come
    if (const char *e = getenv("ROOMD_MIC_CALIBRATION")) b->calibrate = strcmp(e, "off") != 0;
    // ROOMD_BEAM_ADAPT=off (a measurement override, read once here): the start design, fixed
    if (const char *e = getenv("ROOMD_BEAM_ADAPT")) if (strcmp(e, "off") == 0) adaptive = false;
    // ROOMD_BEAM_ECHO_CHOICE=off (a measurement override): every beam's echo-time design stays
    // kEchoCandidate, as before choose_echo_design
    if (const char *e = getenv("ROOMD_BEAM_ECHO_CHOICE")) b->fixed_echo_design = strcmp(e, "off") == 0;
    const int pairs = mics * (mics + 1) / 2;
    if (ok && adaptive) {
        const size_t all = (size_t)kCandidates * kBeams * mics * Kr;
        b->cwr = (float *)calloc(all, sizeof(float)); b->cwi = (float *)calloc(all, sizeof(float));
        b->chosen = (unsigned char *)malloc((size_t)kBeams * Kr);
        b->rnr = (float *)calloc((size_t)Kr * pairs, sizeof(float)); b->rni = (float *)calloc((size_t)Kr * pairs, sizeof(float));
        b->qnr = (float *)calloc((size_t)Kr * pairs, sizeof(float)); b->qni = (float *)calloc((size_t)Kr * pairs, sizeof(float));
        ok = b->cwr && b->cwi && b->chosen && b->rnr && b->rni && b->qnr && b->qni;
        if (ok) memset(b->chosen, kStartCandidate, (size_t)kBeams * Kr);
        b->adapt = ok;
    }
    if (!ok) { destroy(b); return nullptr; }
    roomaec::lowdelay_windows(Nr, H, D, b->wa, b->ws);
    const double c = 343.0, el = kElevationDeg * M_PI / 180.0;
    // ROOMD_BEAM_WNG_DB (a measurement override, read once here): another floor for the fixed
    // design (a beam that does not choose)
    double fixed_floor_db = kCandidateFloorsDB[kFixedCandidate];
    if (const char *e = getenv("ROOMD_BEAM_WNG_DB")) {
        char *end = nullptr;
        double db = strtod(e, &end);
        if (end != e && *end == 0 && db >= -30 && db <= 6) fixed_floor_db = db;
    }
    double dist[kMaxMics * kMaxMics];
    for (int i = 0; i < mics; i++)
        for (int j = 0; j < mics; j++) {
            double dx = xyz[i * 3] - xyz[j * 3], dy = xyz[i * 3 + 1] - xyz[j * 3 + 1], dz = xyz[i * 3 + 2] - xyz[j * 3 + 2];
            dist[i * mics + j] = sqrt(dx * dx + dy * dy + dz * dz);
        }
    double G[kMaxMics * kMaxMics];
    std::complex<double> d[kMaxMics], w[kCandidates][kMaxMics];
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
            design_bin(G, d, mics, b->adapt, fixed_floor_db, w);
            const int in_use = b->adapt ? kStartCandidate : kFixedCandidate;
            for (int m = 0; m < mics; m++) {
                const size_t at = ((size_t)beam * mics + m) * Kr + k;
                b->wr[at] = (float)w[in_use][m].real();
                b->wi[at] = (float)-w[in_use][m].imag();   // stored conjugated
                const int in_echo = b->adapt ? kEchoCandidate : in_use;   // a fixed beam stays itself
                b->fwr[at] = (float)w[in_echo][m].real();
                b->fwi[at] = (float)-w[in_echo][m].imag();
                for (int cand = 0; b->adapt && cand < kCandidates; cand++) {
                    const size_t cat = (((size_t)beam * Kr + k) * kCandidates + cand) * mics + m;
                    b->cwr[cat] = (float)w[cand][m].real();
                    b->cwi[cat] = (float)-w[cand][m].imag();
                }
            }
        }
        b->wr[((size_t)kBeams * mics + 0) * Kr + k] = 1;   // beam kBeams: mic 0
        b->fwr[((size_t)kBeams * mics + 0) * Kr + k] = 1;
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

// Beam `beam` at bin k uses candidate `cand` from now on (its weights into the table a block reads).
static inline void use_candidate(Beam *b, int beam, int k, int cand) {
    const int M = b->mics, Kr = b->Kr;
    b->chosen[(size_t)beam * Kr + k] = (unsigned char)cand;
    const float *cr = b->cwr + (((size_t)beam * Kr + k) * kCandidates + cand) * M;
    const float *ci = b->cwi + (((size_t)beam * Kr + k) * kCandidates + cand) * M;
    for (int m = 0; m < M; m++) {
        b->wr[((size_t)beam * M + m) * Kr + k] = cr[m];
        b->wi[((size_t)beam * M + m) * Kr + k] = ci[m];
    }
}

// Points the beam at `beam` (kBeams: mic 0); a change fades over kFadeBlocks blocks. A beam used
// for the first time takes the choices of the one it follows (the room's sound is much the same
// from a neighbouring direction; a talker who walks would otherwise be heard through the start
// design at every new beam).
static void steer(Beam *b, int beam) {
    if (beam == b->current || beam < 0 || beam > kBeams) return;
    if (b->adapt && beam < kBeams && !b->used[beam]) {
        b->used[beam] = 1;
        if (b->current < kBeams)
            for (int k = 0; k < b->Kr; k++) use_candidate(b, beam, k, b->chosen[(size_t)b->current * b->Kr + k]);
        else
            b->first_sweep_left = b->Kr;
    } else {
        b->first_sweep_left = 0;   // a beam with choices of its own (or mic 0): revisited as usual
    }
    b->previous = b->current;
    b->previous_echo_design = b->echo_design;
    b->current = beam;
    b->fade = kFadeBlocks;
}

// How beam `beam` hears the echo relative to mic 0 at bin k: Σ_m conj(w_m)·RTF_m. 1 before the
// far end has been heard alone for ~0.3 s (no transfer learnt: the beam is taken to hear it as
// mic 0 does). 
static inline void echo_gain(const Beam *b, int beam, int k, float *gr, float *gi) {
    if (b->echo_blocks < 30 || b->p00[k] <= 0) { *gr = 1; *gi = 0; return; }
    const size_t base = (size_t)beam * b->mics * b->Kr + k;
    float sr = b->fwr[base], si = b->fwi[base];   // mic 0: RTF 1
    const float inv = 1 / b->p00[k];
    for (int m = 1; m < b->mics; m++) {
        const float rr = b->cr[m][k] * inv, ri = b->ci[m][k] * inv;
        const float wr = b->fwr[base + (size_t)m * b->Kr], wi = b->fwi[base + (size_t)m * b->Kr];
        sr += wr * rr - wi * ri; si += wr * ri + wi * rr;
    }
    *gr = sr; *gi = si;
}

// The power of beam `beam`'s candidate `cand` at bin k over what the mics heard: wᴴ·R·w.
static inline float power_through(const Beam *b, int cand, int beam, int k, bool quiet = false) {
    const int M = b->mics, Kr = b->Kr, pairs = M * (M + 1) / 2;
    const float *rr = (quiet ? b->qnr : b->rnr) + (size_t)k * pairs, *ri = (quiet ? b->qni : b->rni) + (size_t)k * pairs;
    const float *vr = b->cwr + (((size_t)beam * Kr + k) * kCandidates + cand) * M;   // conj(w)
    const float *vi = b->cwi + (((size_t)beam * Kr + k) * kCandidates + cand) * M;
    // Σ_ij v_i·R_ij·conj(v_j): the diagonal, and twice the real part above it
    float sum = 0;
    int q = 0;
    for (int i = 0; i < M; i++)
        for (int j = i; j < M; j++, q++) {
            const float pr = vr[i] * vr[j] + vi[i] * vi[j], pi = vi[i] * vr[j] - vr[i] * vi[j];   // v_i·conj(v_j)
            const float re = rr[q] * pr - ri[q] * pi;
            sum += i == j ? re : 2 * re;
        }
    return sum;
}

// The echo-time design of beam `beam` (its fwr/fwi table): the candidate whose output would be
// quietest over what the mics heard (kEchoChoiceLowHz … kEchoChoiceHighHz, the mean of the
// per-bin powers in dB, kEchoChoiceMarginDB to leave the one in use), one design at every
// frequency, so the canceller behind the beam still sees a time-invariant echo path. Called when
// the beam is taken up with an echo path still to learn (rapm_steer: its bank is new), before
// that bank's start is mapped through echo_gain. Returns whether the design changed. Needs the
// adaptive tables and ~1 s heard; about 40 k multiply-adds (8 designs), nothing allocated.
static bool choose_echo_design(Beam *b, int beam) {
    if (!b->adapt || beam < 0 || beam >= kBeams || b->quiet_blocks < kBlocksToChoose) return false;
    const int Kr = b->Kr, M = b->mics;
    int k0 = (int)(kEchoChoiceLowHz * b->Nr / b->rate), k1 = (int)(kEchoChoiceHighHz * b->Nr / b->rate);
    if (k0 < 1) k0 = 1;
    if (k1 > Kr - 1) k1 = Kr - 1;
    if (k1 <= k0) return false;
    float mean_db[kCandidates] = {0};
    for (int k = k0; k <= k1; k++)
        for (int cand = 0; cand < kCandidates; cand++)
            mean_db[cand] += 10 * log10f(power_through(b, cand, beam, k, true) + 1e-30f);
    const int sel = b->echo_choice[beam];
    int best = sel;
    float least = mean_db[sel] / (k1 - k0 + 1) - kEchoChoiceMarginDB;
    for (int cand = 0; cand < kCandidates; cand++) {
        const float db = mean_db[cand] / (k1 - k0 + 1);
        if (cand != sel && db < least) { least = db; best = cand; }
    }
    if (b->fixed_echo_design) return false;
    if (best == sel) return false;
    b->echo_choice[beam] = (unsigned char)best;
    for (int k = 0; k < Kr; k++) {
        const float *cr = b->cwr + (((size_t)beam * Kr + k) * kCandidates + best) * M;
        const float *ci = b->cwi + (((size_t)beam * Kr + k) * kCandidates + best) * M;
        for (int m = 0; m < M; m++) {
            b->fwr[((size_t)beam * M + m) * Kr + k] = cr[m];
            b->fwi[((size_t)beam * M + m) * Kr + k] = ci[m];
        }
    }
    return true;
}

// Revisits beam `beam`'s choice at bin k: another design takes over where it would have let
// through kChoiceMargin less of what the mics heard.
static inline void choose_bin(Beam *b, int beam, int k) {
    const int sel = b->chosen[(size_t)beam * b->Kr + k];
    int best = sel;
    float least = power_through(b, sel, beam, k) * kChoiceMargin;
    for (int cand = 0; cand < kCandidates; cand++) {
        if (cand == sel) continue;
        const float n = power_through(b, cand, beam, k);
        if (n < least) { least = n; best = cand; }
    }
    if (best != sel) use_candidate(b, beam, k, best);
}

// The adaptive choice, once per block after the mics' spectra: average what the mics hear (while
// the far end's echo is in the room only the bins the canceller finds free of it: the echo is
// the canceller's to take, and a beam chosen against it would bend towards the speaker), then
// revisit kChoiceBinsPerBlock bins of the beam in use. A change is recorded (changes) with the factor
// by which it changes what that beam hears of the echo, so the canceller can carry its filter
// across.
static void adapt(Beam *b) {
    if (!b->adapt || b->hold) return;
    const int M = b->mics, Kr = b->Kr, pairs = M * (M + 1) / 2;
    const bool echo = b->echo_design;
    if (!echo || b->near_share) {
        for (int k = 0; k < Kr; k++) {
            if (echo && b->near_share[k] < kNearOnly) continue;
            float *rr = b->rnr + (size_t)k * pairs, *ri = b->rni + (size_t)k * pairs;
            float *qr = b->qnr + (size_t)k * pairs, *qi = b->qni + (size_t)k * pairs;
            int q = 0;
            for (int i = 0; i < M; i++)
                for (int j = i; j < M; j++, q++) {
                    // X_i·conj(X_j)
                    const float re = b->Xr[i][k] * b->Xr[j][k] + b->Xi[i][k] * b->Xi[j][k];
                    const float im = b->Xi[i][k] * b->Xr[j][k] - b->Xr[i][k] * b->Xi[j][k];
                    rr[q] += (1 - kMemory) * (re - rr[q]);
                    ri[q] += (1 - kMemory) * (im - ri[q]);
                    if (b->room_quiet) { qr[q] += (1 - kMemory) * (re - qr[q]); qi[q] += (1 - kMemory) * (im - qi[q]); }
                }
        }
        if (b->heard_blocks < kBlocksToChoose) b->heard_blocks++;
        if (b->room_quiet && b->quiet_blocks < kBlocksToChoose) b->quiet_blocks++;
    }
    if (echo) return;   // choices move in the far end's pauses
    const int beam = b->current;
    if (beam >= kBeams) return;   // mic 0 alone: nothing to choose
    int bins = kChoiceBinsPerBlock;
    if (b->first_sweep_left > 0) {
        if (b->heard_blocks < kFirstChoiceBlocks) return;
        bins = b->first_sweep_left < kFirstChoiceBinsPerBlock ? b->first_sweep_left : kFirstChoiceBinsPerBlock;
        b->first_sweep_left -= bins;
    } else if (b->heard_blocks < kBlocksToChoose) {
        return;
    }
    for (int s = 0; s < bins; s++) {
        const int k = b->sweep;
        b->sweep = (k + 1) % Kr;
        choose_bin(b, beam, k);
    }
}

// Y += gain · (beam's weights)·X, the fixed design's weights while the echo is in the room
static inline void add_beam(Beam *b, int beam, bool echo_design, float gain) {
    const int Kr = b->Kr;
    const float *tr = echo_design ? b->fwr : b->wr, *ti = echo_design ? b->fwi : b->wi;
    for (int m = 0; m < b->mics; m++) {
        const float *wr = tr + ((size_t)beam * b->mics + m) * Kr, *wi = ti + ((size_t)beam * b->mics + m) * Kr;
        const float *xr = b->Xr[m], *xi = b->Xi[m];
        float *yr = b->Yr, *yi = b->Yi;
        for (int k = 0; k < Kr; k++) {
            yr[k] += gain * (wr[k] * xr[k] - wi[k] * xi[k]);
            yi[k] += gain * (wr[k] * xi[k] + wi[k] * xr[k]);
        }
    }
}

// Brings every mic to mic 0's sensitivity, which the beams' designs assume. Real MEMS mics differ
// by up to ±1 dB, and a superdirective beam is built on small differences between mics: with
// mics 1-3 at +1, −1 and +0.5 dB the far-field bench's mean STOI fell from 0.864 to 0.832
// (walking 0.896 → 0.851, 2.4 m 0.834 → 0.784, 3 m 0.788 → 0.758). Measured where the room's
// noise alone is heard: a block at mic 0's noise floor, the speaker quiet (an echo from a speaker
// off the array's centre reaches the mics at levels of their own). Not gated by the voice
// detector: it took the 2.4 m room's 12 dB fan for voice, and the calibration started 3 s late.
// Over 300 Hz-4 kHz instead of 150-800 Hz the estimate carried the simulated rooms' own level
// differences between mics (±0.3 dB) and cost the 3 m room 0.008 STOI with matched mics.
static inline float band_power(const Beam *b, int m, int k0, int k1) {
    float s = 0;
    for (int k = k0; k < k1; k++) s += b->Xr[m][k] * b->Xr[m][k] + b->Xi[m][k] * b->Xi[m][k];
    return s;
}

// Starts the estimate from gains (dB, mic 0 first) an earlier run measured: applied from the first
// block, so a room where the far end never pauses (no block to measure in) still has matched mics.
// The first kCalibrationFirstBlocks measured blocks turn them into band powers at their mean level
// (cal_power holds powers, not ratios) weighted as kCalibrationSeedBlocks blocks. False (nothing
// changed) for a count that is not the array's, a value that is not finite, or with the
// calibration off.
static bool seed_calibration(Beam *b, const float *gain_db, int count) {
    if (!b->calibrate || count != b->mics) return false;
    for (int m = 0; m < count; m++)
        if (!isfinite(gain_db[m])) return false;
    for (int m = 1; m < count; m++) {
        const float db = fminf(kCalibrationMaxDB, fmaxf(-kCalibrationMaxDB, gain_db[m] - gain_db[0]));
        b->cal_gain[m] = b->cal_told[m] = powf(10.0f, db / 20);
    }
    b->cal_seeded = true;
    return true;
}

static void calibrate(Beam *b, bool echo) {
    if (!b->calibrate || b->hold || echo) return;
    const float wide = band_power(b, 0, b->gate_k0, b->gate_k1);
    float p[kMaxMics];
    for (int m = 0; m < b->mics; m++) p[m] = band_power(b, m, b->cal_k0, b->cal_k1);
    if (!(wide > 1e-12f) || !(p[0] > 1e-14f)) return;   // digital silence says nothing
    // the floor follows mic 0's dips at once and rises ~0.9 dB/s
    b->cal_floor = b->cal_floor <= 0 || wide < b->cal_floor ? wide : b->cal_floor * 1.002f;
    if (wide > kCalibrationFloorFactor * b->cal_floor) return;
    if (b->cal_measured < INT64_MAX) b->cal_measured++;
    if (b->cal_blocks < kCalibrationBlocks) b->cal_blocks++;
    const double a = 1.0 / b->cal_blocks;
    for (int m = 0; m < b->mics; m++) b->cal_power[m] += a * (p[m] - b->cal_power[m]);
    if (b->cal_blocks < kCalibrationFirstBlocks) return;
    if (b->cal_seeded) {
        // The start joins the average as kCalibrationSeedBlocks blocks at the mean level of the
        // first measured ones (one block's level would make its weight that block's loudness).
        b->cal_seeded = false;
        const double level = b->cal_power[0], n = b->cal_blocks, w = kCalibrationSeedBlocks;
        for (int m = 1; m < b->mics; m++) {
            const double g = b->cal_gain[m];
            b->cal_power[m] = (w * level / (g * g) + n * b->cal_power[m]) / (w + n);
        }
        b->cal_blocks += kCalibrationSeedBlocks;
    }
    const float lim = powf(10.0f, kCalibrationMaxDB / 20), tell = powf(10.0f, kCalibrationRelearnDB / 20);
    for (int m = 1; m < b->mics; m++) {
        float g = b->cal_power[m] > 0 ? sqrtf((float)(b->cal_power[0] / b->cal_power[m])) : 1.0f;
        if (!isfinite(g)) { b->cal_power[m] = b->cal_power[0]; g = b->cal_gain[m]; }   // a non-finite block: keep the last
        g = g > lim ? lim : g < 1 / lim ? 1 / lim : g;
        // the echo's relative transfers were learnt through the old gain: X_m·X_0* scales with it
        const float r = g / b->cal_gain[m];
        if (r != 1.0f)
            for (int k = 0; k < b->Kr; k++) { b->cr[m][k] *= r; b->ci[m][k] *= r; }
        b->cal_gain[m] = g;
    }
    for (int m = 1; m < b->mics; m++)
        if (b->cal_gain[m] > b->cal_told[m] * tell || b->cal_gain[m] * tell < b->cal_told[m]) {
            for (int n = 1; n < b->mics; n++) b->cal_told[n] = b->cal_gain[n];
            b->cal_moved = 1;
            break;
        }
}

// One block: H samples per mic → H samples of the beam, delayed by D.
static void process(Beam *b, const float *const *mics, float *out) {
    const int Nr = b->Nr, H = b->H, D = b->D;
    for (int m = 0; m < b->mics; m++) {
        memmove(b->hist[m], b->hist[m] + H, sizeof(float) * (Nr - H));
        memcpy(b->hist[m] + Nr - H, mics[m], sizeof(float) * H);
        for (int i = 0; i < Nr; i++) b->frame[i] = b->hist[m][i] * b->wa[i];
        room_fft_forward(&b->fft, b->frame, b->Xr[m], b->Xi[m]);
    }
    if (b->far_active) b->far_hangover = kFarEndHangover;
    else if (b->far_hangover > 0) b->far_hangover--;
    const bool echo = b->far_active || b->far_hangover > 0;
    calibrate(b, echo);
    for (int m = 1; m < b->mics; m++) {
        const float g = b->cal_gain[m];
        if (g == 1.0f) continue;
        for (int k = 0; k < b->Kr; k++) { b->Xr[m][k] *= g; b->Xi[m][k] *= g; }
    }
    if (echo != b->echo_design) {
        // the same beam, the other table: faded as a turn is
        if (b->fade == 0) { b->previous = b->current; b->previous_echo_design = b->echo_design; b->fade = kFadeBlocks; }
        b->echo_design = echo;
    }
    adapt(b);
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
        add_beam(b, b->current, b->echo_design, g);
        add_beam(b, b->previous, b->previous_echo_design, 1 - g);
        b->fade--;
    } else {
        add_beam(b, b->current, b->echo_design, 1);
    }
    room_fft_inverse(&b->fft, b->Yr, b->Yi, b->rt, 1.0f / b->fft.n);
    memmove(b->ola, b->ola + H, sizeof(float) * (Nr - H));
    memset(b->ola + Nr - H, 0, sizeof(float) * H);
    for (int i = Nr - H - D; i < Nr; i++) b->ola[i] += b->rt[i] * b->ws[i];
    memcpy(out, b->ola + Nr - H - D, sizeof(float) * H);
}

}  // namespace roombeam

#endif
