// extern "C" shim over webrtc::AudioProcessing (webrtc-audio-processing 0.3).
#include "capture_chain.h"

#include <cstdio>
#include <new>
#include <vector>
#include <webrtc/modules/audio_processing/include/audio_processing.h>

#include "band_split.h"
#include "kalman_aec.h"
#include "talker_locator.h"
#include "array_beam.h"

// webrtc's legacy AGC by its C entry points: libwebrtc-audio-processing 0.3 exports them but
// installs no header for them, so they are declared here as 0.3 defines them
// (modules/audio_processing/agc/legacy/gain_control.h). Why roomd calls them instead of
// GainControl: GainControl tells the AGC "the stream has echo" only from webrtc's own AEC,
// which is off behind roomd's canceller; told nothing, the AGC raised the canceller's residual
// toward speech level while the far end talked alone (a caller bridged into a room heard
// itself). Here roomd's canceller says when echo is present.
extern "C" {
struct RoomLegacyAgcConfig {
    int16_t target_level_dbfs;
    int16_t compression_gain_db;
    uint8_t limiter_enable;
};
void *WebRtcAgc_Create();
void WebRtcAgc_Free(void *agc);
int WebRtcAgc_Init(void *agc, int32_t min_level, int32_t max_level, int16_t mode, uint32_t fs);
int WebRtcAgc_set_config(void *agc, RoomLegacyAgcConfig config);
int WebRtcAgc_AddFarend(void *agc, const int16_t *far, size_t samples);
int WebRtcAgc_VirtualMic(void *agc, int16_t *const *mic, size_t bands, size_t samples, int32_t level_in, int32_t *level_out);
int WebRtcAgc_Process(void *agc, const int16_t *const *near, size_t bands, size_t samples, int16_t *const *out,
                      int32_t level_in, int32_t *level_out, int16_t echo, uint8_t *saturation_warning);
}
namespace roomagc {
// What the AGC is told as "echo": the speaker plays and the canceller's error is what its echo
// path explains (double-talk factor above one half, the locator's echo-alone test too). Then the
// AGC does not raise its gain: what it hears is the canceller's residual. In double talk the
// talker dominates the error and the AGC follows them as without a far end (told "echo" whenever
// the speaker played, a talker who spoke only over the far end stayed 6 dB down: the
// double-talk bench's rev120-loud, near-end loss 6.0 dB against 0.06).
constexpr float kEchoAloneFactor = 0.5f;
inline bool echo_dominates(const roomaec::Canceller *k) { return k->echo_present && k->dtf > kEchoAloneFactor; }
// Told "echo", the AGC does not raise its gain, but it still applies the gain it has (up to its
// compression gain) to the canceller's residual and the room's noise: the chain sent more than
// the canceller alone (the double-talk bench's rev120-loud, 0.03-0.06 dB; 1.95 dB less with the
// AGC off). A block the canceller calls echo alone and whose level is below any talker's
// (kResidualCeiling, low-band RMS) leaves the AGC no louder than it came in. A talker over the
// far end is not told "echo" (above). Tried and not kept (docs/benchmarks.md, "doubletalk"):
// holding louder blocks near the canceller's recent residual-to-echo ratio, and holding blocks
// at far-end onsets, which the canceller does not yet call echo alone: both cost rev120-loud's
// double talk (PESQ 2.83-2.85 against 3.05).
constexpr float kResidualCeiling = 1.0e-3f;  // -60 dBFS
inline float residual_gain(bool echo, float energy_in, float energy_out, int frames) {
    if (!echo || energy_out <= energy_in || energy_in > kResidualCeiling * kResidualCeiling * (float)frames) return 1.0f;
    return sqrtf(energy_in / energy_out);
}
constexpr int16_t kAdaptiveDigital = 2;     // the legacy AGC's mode numbers
inline int16_t to_s16(float x) {
    float v = x * 32768.0f;
    return (int16_t)(v > 32767.0f ? 32767.0f : v < -32768.0f ? -32768.0f : lrintf(v));
}
}

// The high-pass's corner behind roomd's canceller (kalman_aec.h, set_high_pass): a fourth-order
// Butterworth's magnitude at 80 Hz, which takes a 40 Hz rumble down about as far as webrtc's
// biquad did (WebRTCBandTests: −15.7 dB with the subsonic filter below, the biquad −16.6) and
// leaves more of a voice's lowest harmonics (a man's 100 Hz: −0.7 dB, the biquad −1.4).
static constexpr float kHighPassHz = 80.0f;

// The rumble far below speech, taken off every mic before anything else: a second-order
// Butterworth high-pass at kSubsonicHz in the time domain. The suppressor's gains alone (above)
// left a fan's brown noise 4 dB louder than webrtc's biquad had (`scripts/bench noise`, brown:
// +33.0 against +37.2 dB, PESQ 3.22 against 3.44): what lies under its first bins leaks through
// its 21 ms analysis window into the bins above. Taken off before the window, it cannot (+47.2 dB,
// PESQ 3.79). At 25 Hz it turns 150 Hz by 14° (the biquad: 57°). Also the mics' DC. The
// canceller's copy of the far end goes through the same filter, so the echo path it learns is the
// room's alone: with the filter on the mics only, the double-talk bench's rev120-loud read 2.99 and
// 3.01 against 3.05 and 3.03 without it (alternated runs), the filter's long low tail added to
// every echo path.
static constexpr double kSubsonicHz = 25.0;

// One biquad high-pass per mic and one for the far end: coefficients, state, the filtered block.
struct Subsonic {
    double b0, b1, b2, a1, a2;
    double z[8][2], zfar[2];
    float *out[8];
    int mics, frames;
};

// x → y (may be the same buffer), n samples, through the biquad with state z (transposed direct
// form II, in double: a 25 Hz pole pair at 48 kHz sits 0.3 % inside the unit circle).
static inline void subsonic_run(const Subsonic *f, double z[2], const float *x, float *y, int n) {
    double z1 = z[0], z2 = z[1];
    for (int i = 0; i < n; i++) {
        const double v = x[i], o = f->b0 * v + z1;
        z1 = f->b1 * v - f->a1 * o + z2;
        z2 = f->b2 * v - f->a2 * o;
        y[i] = (float)o;
    }
    z[0] = z1; z[1] = z2;
}

static bool subsonic_init(Subsonic *f, int rate, int mics, int frames) {
    const double K = tan(M_PI * kSubsonicHz / rate), q = M_SQRT1_2, n = 1 / (1 + K / q + K * K);
    f->b0 = n; f->b1 = -2 * n; f->b2 = n;
    f->a1 = 2 * (K * K - 1) * n; f->a2 = (1 - K / q + K * K) * n;
    f->mics = mics; f->frames = frames;
    f->zfar[0] = f->zfar[1] = 0;
    for (int m = 0; m < mics; m++) {
        f->z[m][0] = f->z[m][1] = 0;
        f->out[m] = (float *)calloc((size_t)frames, sizeof(float));
        if (!f->out[m]) return false;
    }
    return true;
}

static void subsonic_free(Subsonic *f) { for (int m = 0; m < f->mics; m++) free(f->out[m]); f->mics = 0; }

// The block's mics, filtered.
static const float *const *subsonic_apply(Subsonic *f, const float *const *mics) {
    for (int m = 0; m < f->mics; m++) subsonic_run(f, f->z[m], mics[m], f->out[m], f->frames);
    return f->out;
}

struct rapm {
    webrtc::AudioProcessing *apm;
    // roomd's echo canceller (echo_canceller = 1): one per capture channel, in front of the APM.
    roomaec::Canceller *kc[8];
    int kc_count;
    bool own_ns;                // noise suppressed in roomd's canceller (webrtc's NS off)
    float *far;                 // the render block (mono), kept for the capture call
    float *cleaned[8];          // the cancellers' outputs, fed to the APM
    int render_channels;
    webrtc::StreamConfig capture_in;
    webrtc::StreamConfig capture_out;
    webrtc::StreamConfig render;
    int frames;
    int voice;
    int echo;
    // Low-band mode (band_split.h): webrtc at 16 kHz behind the 48 kHz canceller.
    bool low_band;
    int low_frames;
    roomband::Filter band;
    roomband::Channel *band_ch[8];
    float *low_in[8];           // decimated canceller output, fed to webrtc
    float *low_out[8];          // webrtc's output
    // roomd's call of webrtc's AGC in low-band mode (above): one per channel, told of echo.
    void *agc[8];
    bool agc_on;
    roomband::Channel *far_band; // the render's decimator: the AGC's far-end voice detector
    float *far_low;
    int16_t *agc_buf;           // one channel's block at 16 kHz, in and out
    // The array (config.array): the mics make one beam; the canceller and webrtc see it alone.
    roombeam::Beam *beam;
    float *beam_out;
    float *map_r, *map_i;       // K: echo path factor from the bank left to a new one (select_bank)
    bool dereverb;              // configured (a self-test holds it off for a while)
    bool self_test;             // rapm_self_test: the chain hears mic 0, rapm_steer waits
    const float *beam_in[1];
    Subsonic subsonic;          // with roomd's canceller and the high-pass on (mics 0: off)
};

static void set_err(char *err, int len, const char *what, int code) {
    if (err && len > 0) snprintf(err, (size_t)len, "%s (webrtc error %d)", what, code);
}

#define CHECK(call, what)                         \
    do {                                          \
        int rc_ = (call);                         \
        if (rc_ != webrtc::AudioProcessing::kNoError) { \
            set_err(err, err_len, what, rc_);     \
            rapm_destroy(a);                      \
            return nullptr;                       \
        }                                         \
    } while (0)

extern "C" rapm_t *rapm_create(const rapm_config_t *c, char *err, int err_len) {
    if (!c) { set_err(err, err_len, "no configuration", -1); return nullptr; }
    if (c->sample_rate != 8000 && c->sample_rate != 16000 && c->sample_rate != 32000 && c->sample_rate != 48000) {
        set_err(err, err_len, "sample rate must be 8000, 16000, 32000 or 48000", -1); return nullptr;
    }
    if (c->capture_channels < 1 || c->capture_channels > 8) { set_err(err, err_len, "capture channels must be 1..8", -1); return nullptr; }
    if (c->render_channels < 1 || c->render_channels > 2) { set_err(err, err_len, "render channels must be 1..2", -1); return nullptr; }
    bool beamform = c->beamform && c->capture_channels >= 2 && c->mic_xyz;
    if (c->beamform && !beamform) { set_err(err, err_len, "beamformer needs at least 2 microphones with positions", -1); return nullptr; }
    bool array = c->array != 0;
    if (array && (c->capture_channels < 2 || !c->mic_xyz)) { set_err(err, err_len, "array processing needs at least 2 microphones with positions", -1); return nullptr; }
    if (array && beamform) { set_err(err, err_len, "array processing and webrtc's beamformer exclude each other", -1); return nullptr; }
    // webrtc and the canceller see one channel (the beam) with the array
    const int channels = array ? 1 : c->capture_channels;

    bool own_aec = c->echo_cancel && c->echo_canceller == 1;
    bool own_ns = own_aec && c->ns_in_canceller;

    webrtc::Config config;
    config.Set<webrtc::ExtendedFilter>(new webrtc::ExtendedFilter(c->aec_extended_filter != 0));
    config.Set<webrtc::DelayAgnostic>(new webrtc::DelayAgnostic(c->aec_delay_agnostic != 0));
    // On by default in 0.3 and it would override the AGC mode we ask for: switch it off.
    config.Set<webrtc::ExperimentalAgc>(new webrtc::ExperimentalAgc(false));
    config.Set<webrtc::ExperimentalNs>(new webrtc::ExperimentalNs(false));
    if (beamform) {
        std::vector<webrtc::Point> geometry;
        for (int i = 0; i < c->capture_channels; i++)
            geometry.push_back(webrtc::Point(c->mic_xyz[3 * i], c->mic_xyz[3 * i + 1], c->mic_xyz[3 * i + 2]));
        config.Set<webrtc::Beamforming>(new webrtc::Beamforming(true, geometry));
    }

    rapm *a = new (std::nothrow) rapm();
    if (!a) { set_err(err, err_len, "out of memory", -1); return nullptr; }
    a->apm = webrtc::AudioProcessing::Create(config);
    if (!a->apm) { set_err(err, err_len, "AudioProcessing::Create failed", -1); delete a; return nullptr; }
    a->frames = c->sample_rate / 100;
    a->own_ns = own_ns;
    a->render_channels = c->render_channels;
    if (own_aec) {
        roomaec::Params prm = roomaec::default_params(c->sample_rate, c->aec_suppression);
        if (c->aec_tail_ms > 0) prm.tail_ms = (float)c->aec_tail_ms;
        prm.ns_level = c->ns_level;
        a->far = (float *)calloc((size_t)a->frames, sizeof(float));
        if (!a->far) { set_err(err, err_len, "out of memory", -1); rapm_destroy(a); return nullptr; }
        for (int i = 0; i < channels; i++) {
            // without a direction the canceller serves mic 0 alone: the beam's last bank
            a->kc[i] = array ? roomaec::create(prm, roombeam::kBeams + 1, roombeam::kBeams) : roomaec::create(prm);
            a->cleaned[i] = (float *)calloc((size_t)a->frames, sizeof(float));
            a->kc_count = i + 1;
            if (!a->kc[i] || !a->cleaned[i]) { set_err(err, err_len, "out of memory (echo canceller)", -1); rapm_destroy(a); return nullptr; }
            a->kc[i]->ns.on = own_ns && c->noise_suppress != 0;
            a->kc[i]->derev.on = c->dereverb != 0;
            a->dereverb = c->dereverb != 0;
            a->kc[i]->derev.wpe = (c->dereverb & 1) != 0;
            a->kc[i]->derev.late = (c->dereverb & 2) != 0;
            // roomd's canceller takes the rumble off in its suppressor, with no phase (kalman_aec.h,
            // set_high_pass), and webrtc's high-pass stays off
            roomaec::set_high_pass(a->kc[i], c->high_pass ? kHighPassHz : 0);
        }
        if (c->high_pass && !subsonic_init(&a->subsonic, c->sample_rate, c->capture_channels, a->frames)) {
            set_err(err, err_len, "out of memory (high-pass)", -1); rapm_destroy(a); return nullptr;
        }
    }
    if (array) {
        // the canceller suppressor's frames, so the beam delays the mics as it delays the residual
        const int H = a->frames, Nr = a->kc_count > 0 ? a->kc[0]->Nr : roomaec::next_pow2(4 * H) / 2;
        a->beam = roombeam::create(c->sample_rate, c->capture_channels, c->mic_xyz, H, Nr, c->sample_rate / 500, true);
        a->beam_out = (float *)calloc((size_t)H, sizeof(float));
        const int K = a->kc_count > 0 ? a->kc[0]->K : 1;
        a->map_r = (float *)calloc((size_t)K, sizeof(float));
        a->map_i = (float *)calloc((size_t)K, sizeof(float));
        if (!a->beam || !a->beam_out || !a->map_r || !a->map_i) { set_err(err, err_len, "out of memory (beam)", -1); rapm_destroy(a); return nullptr; }
        a->beam_in[0] = a->beam_out;
        if (a->kc_count > 0) {
            a->kc[0]->near_share_on = true;
            a->beam->near_share = a->kc[0]->near_share;
        }
    }
    // webrtc's rate: the card's, or 16 kHz behind roomd's canceller in low-band mode.
    int webrtc_rate = c->sample_rate;
    // (Nothing of webrtc's on the capture path: nothing to split for.)
    const bool webrtc_high_pass = c->high_pass && !own_aec;
    bool webrtc_stages = webrtc_high_pass || c->gain_control || c->voice_detect || (c->noise_suppress && !own_ns);
    a->low_band = c->low_band && own_aec && !beamform && webrtc_stages && c->sample_rate == 16000 * roomband::kFactor;
    if (a->low_band) {
        webrtc_rate = 16000;
        a->low_frames = webrtc_rate / 100;
        roomband::design(&a->band);
        for (int i = 0; i < channels; i++) {
            a->band_ch[i] = (roomband::Channel *)calloc(1, sizeof(roomband::Channel));
            a->low_in[i] = (float *)calloc((size_t)a->low_frames, sizeof(float));
            a->low_out[i] = (float *)calloc((size_t)a->low_frames, sizeof(float));
            if (!a->band_ch[i] || !a->low_in[i] || !a->low_out[i]) { set_err(err, err_len, "out of memory (band split)", -1); rapm_destroy(a); return nullptr; }
        }
        // The AGC is roomd's to call here (the declarations above say why); webrtc's
        // GainControl stays off. Made whether or not the AGC is on, so switching it on at run
        // time allocates nothing.
        a->far_band = (roomband::Channel *)calloc(1, sizeof(roomband::Channel));
        a->far_low = (float *)calloc((size_t)a->low_frames, sizeof(float));
        a->agc_buf = (int16_t *)calloc((size_t)a->low_frames, sizeof(int16_t));
        if (!a->far_band || !a->far_low || !a->agc_buf) { set_err(err, err_len, "out of memory (gain control)", -1); rapm_destroy(a); return nullptr; }
        for (int i = 0; i < channels; i++) {
            a->agc[i] = WebRtcAgc_Create();
            if (!a->agc[i]) { set_err(err, err_len, "out of memory (gain control)", -1); rapm_destroy(a); return nullptr; }
            // Level range 0-255 and the config as webrtc's GainControl gives them.
            RoomLegacyAgcConfig cfg = {(int16_t)c->agc_target_dbfs, (int16_t)c->agc_compression_db, (uint8_t)(c->agc_limiter != 0)};
            if (WebRtcAgc_Init(a->agc[i], 0, 255, roomagc::kAdaptiveDigital, (uint32_t)webrtc_rate) != 0 ||
                WebRtcAgc_set_config(a->agc[i], cfg) != 0) {
                set_err(err, err_len, "gain control: target level 0..31 dBFS and compression gain 0..90 dB", -1); rapm_destroy(a); return nullptr;
            }
        }
        a->agc_on = c->gain_control != 0;
    }
    a->capture_in = webrtc::StreamConfig(webrtc_rate, channels);
    a->capture_out = webrtc::StreamConfig(webrtc_rate, beamform ? 1 : channels);
    a->render = webrtc::StreamConfig(webrtc_rate, c->render_channels);
    webrtc::ProcessingConfig pc = {{a->capture_in, a->capture_out, a->render, a->render}};
    CHECK(a->apm->Initialize(pc), "Initialize");

    CHECK(a->apm->high_pass_filter()->Enable(webrtc_high_pass), "high-pass filter");

    webrtc::EchoCancellation *aec = a->apm->echo_cancellation();
    webrtc::EchoCancellation::SuppressionLevel sl =
        c->aec_suppression <= 0 ? webrtc::EchoCancellation::kLowSuppression
        : c->aec_suppression == 1 ? webrtc::EchoCancellation::kModerateSuppression
                                  : webrtc::EchoCancellation::kHighSuppression;
    CHECK(a->apm->echo_control_mobile()->Enable(false), "echo control mobile off");
    CHECK(aec->enable_drift_compensation(false), "AEC drift compensation");
    CHECK(aec->set_suppression_level(sl), "AEC suppression level");
    CHECK(aec->enable_metrics(true), "AEC metrics");
    CHECK(aec->enable_delay_logging(true), "AEC delay logging");
    // With roomd's canceller in front, webrtc's AEC stays off (one canceller, not two in series).
    CHECK(aec->Enable(c->echo_cancel != 0 && !own_aec), "echo canceller");

    webrtc::NoiseSuppression::Level nl =
        c->ns_level <= 0 ? webrtc::NoiseSuppression::kLow
        : c->ns_level == 1 ? webrtc::NoiseSuppression::kModerate
        : c->ns_level == 2 ? webrtc::NoiseSuppression::kHigh
                           : webrtc::NoiseSuppression::kVeryHigh;
    CHECK(a->apm->noise_suppression()->set_level(nl), "noise suppression level");
    // With roomd's canceller, noise is suppressed in its spectrum (spectral_ns.h: no added
    // delay; webrtc's NS costs 7 ms), so webrtc's stays off.
    CHECK(a->apm->noise_suppression()->Enable(c->noise_suppress != 0 && !own_ns), "noise suppression");

    webrtc::GainControl *agc = a->apm->gain_control();
    CHECK(agc->set_mode(webrtc::GainControl::kAdaptiveDigital), "AGC mode");
    CHECK(agc->set_target_level_dbfs(c->agc_target_dbfs), "AGC target level");
    CHECK(agc->set_compression_gain_db(c->agc_compression_db), "AGC compression gain");
    CHECK(agc->enable_limiter(c->agc_limiter != 0), "AGC limiter");
    CHECK(agc->Enable(c->gain_control != 0 && !a->low_band), "gain control");

    webrtc::VoiceDetection::Likelihood vl =
        c->vad_likelihood <= 0 ? webrtc::VoiceDetection::kVeryLowLikelihood
        : c->vad_likelihood == 1 ? webrtc::VoiceDetection::kLowLikelihood
        : c->vad_likelihood == 2 ? webrtc::VoiceDetection::kModerateLikelihood
                                 : webrtc::VoiceDetection::kHighLikelihood;
    CHECK(a->apm->voice_detection()->set_likelihood(vl), "VAD likelihood");
    CHECK(a->apm->voice_detection()->set_frame_size_ms(10), "VAD frame size");
    CHECK(a->apm->voice_detection()->Enable(c->voice_detect != 0), "voice detection");
    CHECK(a->apm->level_estimator()->Enable(false), "level estimator off");
    return a;
}

extern "C" void rapm_destroy(rapm_t *a) {
    if (!a) return;
    for (int i = 0; i < 8; i++) {
        roomaec::destroy(a->kc[i]); free(a->cleaned[i]);
        free(a->band_ch[i]); free(a->low_in[i]); free(a->low_out[i]);
        if (a->agc[i]) WebRtcAgc_Free(a->agc[i]);
    }
    free(a->far_band); free(a->far_low); free(a->agc_buf);
    free(a->far);
    roombeam::destroy(a->beam);
    free(a->beam_out); free(a->map_r); free(a->map_i);
    subsonic_free(&a->subsonic);
    delete a->apm;
    delete a;
}

extern "C" int rapm_frames_per_block(const rapm_t *a) { return a->frames; }
extern "C" int rapm_output_channels(const rapm_t *a) { return (int)a->capture_out.num_channels(); }

extern "C" int rapm_process_render(rapm_t *a, const float *const *render) {
    if (a->kc_count > 0) {
        // roomd's canceller takes the speaker's mono mix; webrtc's AEC is off.
        for (int i = 0; i < a->frames; i++) {
            float s = 0;
            for (int ch = 0; ch < a->render_channels; ch++) s += render[ch][i];
            a->far[i] = s / a->render_channels;
        }
        if (a->subsonic.mics > 0) subsonic_run(&a->subsonic, a->subsonic.zfar, a->far, a->far, a->frames);
        // The gain control still hears the speaker: its far-end voice detector holds the
        // digital gain while the far end talks, so the canceller's residual is not raised to
        // speech level. Without it, a caller bridged into a two-appliance room heard itself at
        // -7 dB after a 23 s turn, growing (both AGCs raising the residual, the loop through the
        // room closing): scripts/bench call, docs/benchmarks.md "call".
        if (a->low_band) {
            if (!a->agc_on) return 0;
            roomband::decimate(&a->band, a->far_band, a->far, a->frames, a->far_low);
            for (int i = 0; i < a->low_frames; i++) a->agc_buf[i] = roomagc::to_s16(a->far_low[i]);
            for (int i = 0; i < a->kc_count; i++)
                if (WebRtcAgc_AddFarend(a->agc[i], a->agc_buf, (size_t)a->low_frames) != 0) return -1;
            return 0;
        }
        if (!a->apm->gain_control()->is_enabled()) return 0;
        float *const *dst = const_cast<float *const *>(render);
        return a->apm->ProcessReverseStream(render, a->render, a->render, dst);
    }
    // Output pointer may alias input when no render-side processing changes the signal.
    float *const *dst = const_cast<float *const *>(render);
    return a->apm->ProcessReverseStream(render, a->render, a->render, dst);
}

extern "C" int rapm_process_capture(rapm_t *a, const float *const *mics, float *const *out, int delay_ms) {
    if (a->subsonic.mics > 0) mics = subsonic_apply(&a->subsonic, mics);
    a->apm->set_stream_delay_ms(delay_ms < 0 ? 0 : delay_ms);
    if (a->beam) {
        // Nobody in the room talks (the beam's noise-only cross-spectra): while the far end plays,
        // the canceller's error is what its echo path explains (as the gain control is told echo);
        // otherwise the last block's voice detector heard no voice.
        a->beam->room_quiet = a->kc_count > 0 && a->kc[0]->far_active ? a->kc[0]->dtf > roomagc::kEchoAloneFactor : !a->voice;
        roombeam::process(a->beam, mics, a->beam_out);
        mics = a->beam_in;
        if (a->beam->cal_moved) {
            // A mic's calibration moved (in a pause of the far end: it does not move during echo):
            // every beam's echo path moved with it. The banks keep their taps and relearn at the
            // pace of a new start (as after a stream restart); mic 0's path, which did not move,
            // is still cancelled from the first block.
            a->beam->cal_moved = 0;
            for (int i = 0; i < a->kc_count; i++) roomaec::forget_certainty(a->kc[i]);
        }
    }
    if (a->kc_count > 0) {
        for (int i = 0; i < a->kc_count; i++) roomaec::process(a->kc[i], a->far, mics[i], a->cleaned[i]);
        mics = a->cleaned;
    }
    int rc;
    if (a->low_band) {
        for (int i = 0; i < a->kc_count; i++) roomband::decimate(&a->band, a->band_ch[i], a->cleaned[i], a->frames, a->low_in[i]);
        rc = a->apm->ProcessStream(a->low_in, a->capture_in, a->capture_out, a->low_out);
        if (rc == 0 && a->agc_on) {
            // As GainControl would: the virtual mic's gain, then the AGC proper, told by the
            // canceller whether echo is present (then the AGC does not raise its level).
            int16_t *bands[1] = {a->agc_buf};
            for (int i = 0; i < a->kc_count && rc == 0; i++) {
                float energy_in = 0.0f, energy_out = 0.0f;
                for (int j = 0; j < a->low_frames; j++) {
                    a->agc_buf[j] = roomagc::to_s16(a->low_out[i][j]);
                    energy_in += a->low_out[i][j] * a->low_out[i][j];
                }
                int32_t level = 0, level_after = 0;
                uint8_t saturated = 0;
                bool echo = roomagc::echo_dominates(a->kc[i]);
                if (WebRtcAgc_VirtualMic(a->agc[i], bands, 1, (size_t)a->low_frames, 0, &level) != 0 ||
                    WebRtcAgc_Process(a->agc[i], bands, 1, (size_t)a->low_frames, bands, level, &level_after,
                                      (int16_t)(echo ? 1 : 0), &saturated) != 0) { rc = -1; break; }
                for (int j = 0; j < a->low_frames; j++) {
                    float y = a->agc_buf[j] * (1.0f / 32768.0f);
                    a->low_out[i][j] = y;
                    energy_out += y * y;
                }
                float g = roomagc::residual_gain(echo, energy_in, energy_out, a->low_frames);
                if (g < 1.0f)
                    for (int j = 0; j < a->low_frames; j++) a->low_out[i][j] *= g;
            }
        }
        for (int i = 0; i < a->kc_count; i++) roomband::merge(&a->band, a->band_ch[i], a->low_out[i], a->low_in[i], a->frames, out[i]);
    } else {
        rc = a->apm->ProcessStream(mics, a->capture_in, a->capture_out, out);
    }
    a->voice = a->apm->voice_detection()->is_enabled() && a->apm->voice_detection()->stream_has_voice() ? 1 : 0;
    if (a->kc_count > 0) a->echo = a->kc[0]->echo_present;
    else a->echo = a->apm->echo_cancellation()->is_enabled() && a->apm->echo_cancellation()->stream_has_echo() ? 1 : 0;
    return rc;
}

// How much less sure the canceller is of a new beam's echo path when it was mapped from the one
// it leaves through the learnt relative transfer functions: none. The mapping leaves out the
// room's late reverberation (it differs per mic beyond one factor per bin), but the uncertainty
// let the filter chase the near-end talker when a beam change fell into double talk: the
// double-talk bench's rev120-loud (one such change at 7.0 s) 2.77 with 0.25, 2.99-3.00 with 0.05,
// 3.02 with 0.01, 3.03-3.06 with none; the other rooms within ±0.04 and the farfield bench's
// rooms within ±0.002 STOI (scripts/bench doubletalk farfield, 2026-11-29).
static constexpr float kMappedBankUncertainty = 0.0f;

// The signal the dereverberation sees comes through another beam (or mic 0) from now on.
static void dereverb_new_path(rapm_t *a) {
    for (int i = 0; i < a->kc_count; i++) roomaec::derev_new_path(&a->kc[i]->derev);
}

extern "C" void rapm_steer(rapm_t *a, float azimuth_deg, int has_direction, int echo_alone, int far_active) {
    if (!a->beam || a->self_test) return;
    a->beam->learn_echo = echo_alone != 0;
    a->beam->far_active = far_active != 0;
    if (far_active) return;
    const int b = has_direction ? roombeam::beam_for(a->beam, azimuth_deg) : roombeam::kBeams;
    if (b == a->beam->current) return;
    const int from = a->beam->current;
    roombeam::steer(a->beam, b);
    if (a->kc_count == 0) return;
    dereverb_new_path(a);
    roomaec::Canceller *k = a->kc[0];
    // a beam whose echo path is still to learn takes the echo-time design the room calls for
    if (b < roombeam::kBeams && k->bLeft[b] < 0) roombeam::choose_echo_design(a->beam, b);
    if (k->bLeft[b] >= 0 || a->beam->echo_blocks < 30) { roomaec::select_bank(k, b); return; }
    // A beam not served before: its echo path from the left one's through the relative transfer
    // functions, per bin of the filter (the beam's grid has half the bins: nearest).
    const int Kr = a->beam->Kr, step = k->N / k->Nr;
    for (int kk = 0; kk < k->K; kk++) {
        int kb = (kk + step / 2) / step;
        if (kb >= Kr) kb = Kr - 1;
        float nr, ni, fr, fi;
        roombeam::echo_gain(a->beam, b, kb, &nr, &ni);
        roombeam::echo_gain(a->beam, from, kb, &fr, &fi);
        const float den = fmaxf(fr * fr + fi * fi, 0.01f);
        a->map_r[kk] = (nr * fr + ni * fi) / den;   // new · conj(from) / |from|²
        a->map_i[kk] = (ni * fr - nr * fi) / den;
    }
    roomaec::select_bank(k, b, a->map_r, a->map_i, kMappedBankUncertainty);
}

extern "C" void rapm_self_test(rapm_t *a, int on) {
    a->self_test = on != 0;
    for (int i = 0; i < a->kc_count; i++) a->kc[i]->derev.on = !on && a->dereverb;
    // The voice detector's noise model spent the test on the sweep, the noise burst's residue and
    // the test talker: it starts again from the room (webrtc re-initialises a component that is
    // enabled again; its handle exists, nothing is allocated). Kept, it could take the room's
    // -70 dBFS noise for voice after the test and open the voice gate for as long as it ran (the
    // rig's scenario 50 saw ~100 packets a second go on for 4 s and more, in 1 run in 3).
    if (!on && a->apm->voice_detection()->is_enabled()) {
        a->apm->voice_detection()->Enable(false);
        a->apm->voice_detection()->Enable(true);
    }
    if (!a->beam) return;
    a->beam->hold = on != 0;   // the test's sweeps and talker are not the room's noise
    roomaec::Canceller *k = a->kc_count > 0 ? a->kc[0] : nullptr;
    // the dereverberation comes back to mic 0's signal (the test steered there), not the beam's
    // its prediction was learnt through
    if (!on) dereverb_new_path(a);
    if (on) {
        a->beam->learn_echo = 0;
        if (a->beam->current != roombeam::kBeams) {
            roombeam::steer(a->beam, roombeam::kBeams);
            if (k) roomaec::select_bank(k, roombeam::kBeams);
        }
    } else if (k) {
        // The bank in use (mic 0's) has just learnt the echo path from the sweep and noise,
        // fresher than what any beam's bank holds: each beam starts again from it (mapped through
        // the relative transfer functions) when next used.
        for (int b = 0; b < k->banks; b++) if (b != k->bank) k->bLeft[b] = -1;
    }
}

extern "C" void rapm_streams_restarted(rapm_t *a) {
    for (int i = 0; i < a->kc_count; i++) roomaec::forget_certainty(a->kc[i]);
}

extern "C" float rapm_dereverb_settled(const rapm_t *a) {
    if (a->kc_count == 0 || !a->dereverb) return -1.0f;
    return roomaec::derev_settle(&a->kc[0]->derev);
}

extern "C" float rapm_reverberance(const rapm_t *a) {
    return a->kc_count > 0 && a->dereverb ? a->kc[0]->derev.reverberance : -1.0f;
}

extern "C" int rapm_beam(const rapm_t *a, float *azimuth_deg) {
    if (!a->beam || a->beam->current >= roombeam::kBeams) return 0;
    float d = a->beam->current * 360.0f / roombeam::kBeams;
    *azimuth_deg = d > 180 ? d - 360 : d;
    return 1;
}

extern "C" int rapm_mic_corrections_db(const rapm_t *a, float *db, int capacity) {
    if (!a->beam) return 0;
    const int n = a->beam->mics < capacity ? a->beam->mics : capacity;
    for (int m = 0; m < n; m++) db[m] = 20.0f * log10f(a->beam->cal_gain[m]);
    return n;
}

extern "C" int rapm_start_mic_corrections_db(rapm_t *a, const float *db, int count) {
    return a->beam && roombeam::seed_calibration(a->beam, db, count) ? 0 : -1;
}

extern "C" long rapm_mic_calibration_blocks(const rapm_t *a) { return a->beam ? a->beam->cal_measured : 0; }

extern "C" int rapm_voice_detected(const rapm_t *a) { return a->voice; }
extern "C" int rapm_echo_present(const rapm_t *a) { return a->echo; }

extern "C" float rapm_double_talk_factor(const rapm_t *a) {
    // roomd's canceller on mic 0: its step reduction, low when the error stands far above what
    // the filter's own uncertainty explains (someone in the room talks over the far end)
    return a->kc_count > 0 ? a->kc[0]->dtf : 1.0f;
}

extern "C" int rapm_aec_stats(rapm_t *a, rapm_aec_stats_t *s) {
    if (a->kc_count > 0) {
        roomaec::Canceller *k = a->kc[0];
        bool some = k->in_energy > 0 && k->out_energy > 0;
        s->erle_db = some ? (float)(10 * log10(k->in_energy / k->out_energy)) : 0.0f;
        s->erl_db = 0;
        k->in_energy = k->out_energy = 0;
        s->delay_median_ms = roomaec::delay_ms(k);
        s->delay_std_ms = -1;
        s->fraction_poor_delays = 0;
        return 0;
    }
    webrtc::EchoCancellation::Metrics m;
    int rc = a->apm->echo_cancellation()->GetMetrics(&m);
    s->erle_db = rc == 0 ? (float)m.echo_return_loss_enhancement.average : 0.0f;
    s->erl_db = rc == 0 ? (float)m.echo_return_loss.average : 0.0f;
    int median = -1, std_ = -1;
    float poor = 0;
    if (a->apm->echo_cancellation()->GetDelayMetrics(&median, &std_, &poor) != 0) { median = -1; std_ = -1; poor = 0; }
    s->delay_median_ms = median;
    s->delay_std_ms = std_;
    s->fraction_poor_delays = poor;
    return rc;
}

extern "C" int rapm_set_noise_suppression(rapm_t *a, int on) {
    if (a->own_ns) {
        for (int i = 0; i < a->kc_count; i++) a->kc[i]->ns.on = on != 0;
        return 0;
    }
    return a->apm->noise_suppression()->Enable(on != 0);
}

extern "C" void rapm_set_canceller_idle_skip(rapm_t *a, int on) {
    for (int i = 0; i < a->kc_count; i++) a->kc[i]->idle_skip = on != 0;
}

extern "C" void rapm_set_output_band(rapm_t *a, int top_hz) {
    for (int i = 0; i < a->kc_count; i++) roomaec::set_band(a->kc[i], (float)top_hz);
}

extern "C" long rapm_canceller_idle_blocks(const rapm_t *a) {
    return a->kc_count > 0 ? a->kc[0]->idle_blocks : 0;
}

extern "C" int rapm_set_gain_control(rapm_t *a, int on) {
    if (a->low_band) { a->agc_on = on != 0; return 0; }
    return a->apm->gain_control()->Enable(on != 0);
}

// ---- the talker's direction -------------------------------------------------------------------

struct rloc { roomloc::Locator *l; };

extern "C" rloc_t *rloc_create(int sample_rate, int mics, const float *mic_xyz, char *err, int err_len) {
    const char *why = nullptr;
    if (sample_rate < 8000 || sample_rate % 100 != 0) why = "sample rate must be a multiple of 100 Hz, at least 8000";
    roomloc::Locator *l = why ? nullptr : roomloc::create(sample_rate, mics, mic_xyz, &why);
    rloc_t *r = l ? new (std::nothrow) rloc_t{l} : nullptr;
    if (!r) {
        roomloc::destroy(l);
        if (err && err_len > 0) snprintf(err, (size_t)err_len, "%s", why ? why : "out of memory");
        return nullptr;
    }
    return r;
}

extern "C" int rloc_geometry_problem(int mics, const float *mic_xyz, char *err, int err_len) {
    const char *why = roomloc::geometry_problem(mics, mic_xyz);
    if (why && err && err_len > 0) snprintf(err, (size_t)err_len, "%s", why);
    return why ? 1 : 0;
}

extern "C" void rloc_destroy(rloc_t *r) {
    if (!r) return;
    roomloc::destroy(r->l);
    delete r;
}

extern "C" void rloc_process(rloc_t *r, const float *const *mics, rloc_mode_t mode, int far_active, const float *near_share) {
    roomloc::process(r->l, mics, (int)mode, far_active, near_share);
}

extern "C" int rloc_echo_direction(const rloc_t *r, float *azimuth_deg) {
    if (r->l->echo_dir < 0) return 0;
    *azimuth_deg = roomloc::wrap_deg(r->l->echo_dir * 360.0f / roomloc::kDirections);
    return 1;
}

extern "C" int rloc_bins(const rloc_t *r) { return r->l->N / 2 + 1; }

extern "C" const float *rapm_near_share(const rapm_t *a, int *bins) {
    if (a->kc_count == 0) { *bins = 0; return nullptr; }
    *bins = a->kc[0]->Kr;
    a->kc[0]->near_share_on = true;
    return a->kc[0]->near_share;
}

extern "C" void rloc_state(const rloc_t *r, rloc_state_t *s) {
    s->azimuth_deg = r->l->azimuth_deg;
    s->confidence = r->l->confidence;
    s->locked = r->l->locked;
    s->has_direction = r->l->has_direction;
    s->changes = r->l->changes;
}

// ---- the beam on its own ------------------------------------------------------------------------

struct rbeam { roombeam::Beam *b; int frames; };

static rbeam_t *rbeam_make(int sample_rate, int mics, const float *mic_xyz, bool adaptive) {
    if (sample_rate < 8000 || sample_rate % 100 != 0 || !mic_xyz) return nullptr;
    const int H = sample_rate / 100;
    roombeam::Beam *b = roombeam::create(sample_rate, mics, mic_xyz, H, roomaec::next_pow2(4 * H) / 2, sample_rate / 500, adaptive);
    rbeam_t *r = b ? new (std::nothrow) rbeam_t{b, H} : nullptr;
    if (!r) roombeam::destroy(b);
    return r;
}

extern "C" rbeam_t *rbeam_create(int sample_rate, int mics, const float *mic_xyz) {
    return rbeam_make(sample_rate, mics, mic_xyz, false);
}

extern "C" rbeam_t *rbeam_create_adaptive(int sample_rate, int mics, const float *mic_xyz) {
    return rbeam_make(sample_rate, mics, mic_xyz, true);
}

extern "C" void rbeam_set_room_quiet(rbeam_t *r, int quiet) { r->b->room_quiet = quiet != 0; }

extern "C" int rbeam_echo_design(rbeam_t *r, float azimuth_deg) {
    const int beam = roombeam::nearest_beam(azimuth_deg);
    if (!r->b->adapt || r->b->quiet_blocks < roombeam::kBlocksToChoose) return -1;
    roombeam::choose_echo_design(r->b, beam);
    return r->b->echo_choice[beam];
}

extern "C" void rbeam_take_up(rbeam_t *r, float azimuth_deg) { roombeam::steer(r->b, roombeam::nearest_beam(azimuth_deg)); }

extern "C" float rbeam_superdirective_share(const rbeam_t *r, float azimuth_deg) {
    if (!r->b->adapt) return -1;
    const int beam = roombeam::nearest_beam(azimuth_deg), Kr = r->b->Kr;
    int n = 0;
    for (int k = 0; k < Kr; k++) n += r->b->chosen[(size_t)beam * Kr + k] != 0;
    return (float)n / Kr;
}

extern "C" void rbeam_destroy(rbeam_t *r) {
    if (!r) return;
    roombeam::destroy(r->b);
    delete r;
}

extern "C" void rbeam_steer(rbeam_t *r, float azimuth_deg) {
    r->b->current = r->b->previous = roombeam::nearest_beam(azimuth_deg);
    r->b->fade = 0;
}

extern "C" void rbeam_process(rbeam_t *r, const float *const *mics, float *out) { roombeam::process(r->b, mics, out); }

extern "C" int rbeam_frames_per_block(const rbeam_t *r) { return r->frames; }
