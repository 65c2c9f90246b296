// The other C targets and C libraries of roomd on aarch64 (scripts/cross-arm64), each used the
// way the Swift code uses it:
//   clinux    CLinux's epoll/eventfd/signalfd wrappers (clinux.c, compiled for aarch64 with its
//             _Static_asserts): 64-bit tokens come back intact from two ready eventfds
//             (epoll_event is packed on x86_64, not on arm64), a blocked signal is read
//   opus      COpus's shim.h wrappers: encode 1 s of a tone, decode it, lookahead
//   apm       CCaptureChain (apm_shim.cpp) over webrtc-audio-processing: the echo canceller removes
//             a delayed copy of white noise (residual echo well below the echo)
//   crypto    libcrypto HMAC-SHA256 (RFC 4231 test case 2), as RoomCrypto uses it
//   gpiod     libgpiod v1 links and reports its version
// Prints one PASS/FAIL line per check and exits 1 when any failed.
#define _GNU_SOURCE
#include <errno.h>
#include <stdarg.h>
#include <math.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <gpiod.h>
#include <openssl/hmac.h>
#include <openssl/crypto.h>

#include "clinux.h"
#include "capture_chain.h"
#include COPUS_SHIM  // Sources/COpus/shim.h (the path is passed by scripts/cross-arm64)

#include "check.h"

static void check_clinux(void) {
    int ep = clinux_epoll_create();
    int a = clinux_eventfd(0), b = clinux_eventfd(0);
    if (ep < 0 || a < 0 || b < 0) { result(0, "clinux", "epoll/eventfd: %s", strerror(errno)); return; }
    const unsigned long long ta = 0x1122334455667788ULL, tb = 0xfedcba9876543210ULL;
    if (clinux_epoll_ctl(ep, CLINUX_EPOLL_CTL_ADD, a, CLINUX_EPOLLIN, ta) != 0 ||
        clinux_epoll_ctl(ep, CLINUX_EPOLL_CTL_ADD, b, CLINUX_EPOLLIN, tb) != 0) {
        result(0, "clinux", "epoll_ctl: %s", strerror(errno));
        return;
    }
    uint64_t one = 1;
    if (write(a, &one, 8) != 8 || write(b, &one, 8) != 8) { result(0, "clinux", "eventfd write: %s", strerror(errno)); return; }
    struct clinux_event ev[4];
    memset(ev, 0xa5, sizeof ev);
    int n = clinux_epoll_wait(ep, ev, 4, 1000);
    int seen_a = 0, seen_b = 0, bad = 0;
    for (int i = 0; i < n; i++) {
        if (ev[i].events != CLINUX_EPOLLIN) bad = 1;
        if (ev[i].token == ta) seen_a = 1;
        else if (ev[i].token == tb) seen_b = 1;
        else bad = 1;
    }
    int epoll_ok = n == 2 && seen_a && seen_b && !bad;

    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGUSR1);
    sigprocmask(SIG_BLOCK, &set, NULL);
    int sfd = clinux_signalfd(&set);
    int before = sfd >= 0 ? clinux_signalfd_read(sfd) : -1;
    raise(SIGUSR1);
    int sig = sfd >= 0 ? clinux_signalfd_read(sfd) : -1;
    int signal_ok = before == 0 && sig == SIGUSR1;

    result(epoll_ok && signal_ok, "clinux",
           "epoll_wait returned %d events, tokens %s (0x%llx, 0x%llx); signalfd read %d before and %d after raise(SIGUSR1) (expected 0, %d); "
           "sizeof(struct clinux_event) = %zu",
           n, seen_a && seen_b && !bad ? "intact" : "WRONG", n > 0 ? ev[0].token : 0ULL, n > 1 ? ev[1].token : 0ULL,
           before, sig, SIGUSR1, sizeof(struct clinux_event));
    close(a); close(b); close(ep);
    if (sfd >= 0) close(sfd);
}

static void check_opus(void) {
    int err = 0;
    OpusEncoder *enc = opus_encoder_create(48000, 1, copus_application_voip(), &err);
    OpusDecoder *dec = opus_decoder_create(48000, 1, &err);
    if (!enc || !dec) { result(0, "opus", "create: %s", opus_strerror(err)); return; }
    int rc = 0;
    rc |= copus_set_bitrate(enc, 32000);
    rc |= copus_set_complexity(enc, 5);
    rc |= copus_set_inband_fec(enc, 1);
    rc |= copus_set_packet_loss_perc(enc, 10);
    rc |= copus_set_dtx(enc, 0);
    rc |= copus_set_signal_voice(enc);
    rc |= copus_set_max_bandwidth(enc, copus_bandwidth_fullband());
    opus_int32 lookahead = -1;
    rc |= copus_get_lookahead(enc, &lookahead);
    if (rc != OPUS_OK) { result(0, "opus", "a ctl wrapper failed"); return; }
    static float pcm[960], out[960 * 50];
    unsigned char packet[1500];
    long bytes = 0;
    for (int f = 0; f < 50; f++) {  // 1 s of a 440 Hz tone in 20 ms frames
        for (int i = 0; i < 960; i++) pcm[i] = 0.5f * sinf(2.0f * 3.14159265f * 440.0f * (float)(f * 960 + i) / 48000.0f);
        int n = opus_encode_float(enc, pcm, 960, packet, sizeof packet);
        if (n <= 0) { result(0, "opus", "encode frame %d: %s", f, opus_strerror(n)); return; }
        bytes += n;
        int d = opus_decode_float(dec, packet, n, out + f * 960, 960, 0);
        if (d != 960) { result(0, "opus", "decode frame %d: %d", f, d); return; }
    }
    // RMS of the decoded tone over the last 0.5 s (after the codec's start-up): ~0.354 expected
    double sum = 0;
    for (int i = 960 * 25; i < 960 * 50; i++) sum += (double)out[i] * out[i];
    double rms = sqrt(sum / (960 * 25));
    opus_int32 duration = 0;
    copus_decoder_last_packet_duration(dec, &duration);
    result(rms > 0.30 && rms < 0.40 && duration == 960, "opus",
           "%s, 1 s tone at 32 kbit/s: %ld bytes, decoded RMS %.3f (0.354 sent), lookahead %d, last packet %d samples",
           opus_get_version_string(), bytes, rms, (int)lookahead, (int)duration);
    opus_encoder_destroy(enc);
    opus_decoder_destroy(dec);
}

static uint32_t rng = 12345;
static float noise(void) {
    rng = rng * 1664525u + 1013904223u;
    return ((float)(rng >> 8) / 16777216.0f - 0.5f) * 0.5f;
}

static void check_apm(void) {
    rapm_config_t c;
    memset(&c, 0, sizeof c);
    c.sample_rate = 48000;
    c.capture_channels = 1;
    c.render_channels = 1;
    c.high_pass = 1;
    c.echo_cancel = 1;
    c.aec_extended_filter = 1;
    c.aec_delay_agnostic = 0;
    c.aec_suppression = 1;
    c.noise_suppress = 0;
    c.gain_control = 0;
    c.voice_detect = 1;
    char err[200] = "";
    rapm_t *apm = rapm_create(&c, err, sizeof err);
    if (!apm) { result(0, "apm", "rapm_create: %s", err); return; }
    int frames = rapm_frames_per_block(apm);
    enum { DELAY = 960, BLOCKS = 400 };  // echo 20 ms late at half amplitude; 4 s of audio
    static float hist[DELAY + 480], render[480], mic[480], out[480];
    const float *rp[1] = {render}, *mp[1] = {mic};
    float *op[1] = {out};
    double in_e = 0, out_e = 0;
    for (int b = 0; b < BLOCKS; b++) {
        for (int i = 0; i < frames; i++) {
            render[i] = noise();
            hist[DELAY + i] = render[i];
            mic[i] = 0.5f * hist[i];
        }
        memmove(hist, hist + frames, sizeof(float) * DELAY);
        int rc = rapm_process_render(apm, rp);
        if (rc == 0) rc = rapm_process_capture(apm, mp, op, 20);
        if (rc != 0) { result(0, "apm", "process block %d: webrtc error %d", b, rc); rapm_destroy(apm); return; }
        if (b >= BLOCKS - 100)
            for (int i = 0; i < frames; i++) { in_e += (double)mic[i] * mic[i]; out_e += (double)out[i] * out[i]; }
    }
    double reduction = 10.0 * log10(in_e / (out_e > 1e-20 ? out_e : 1e-20));
    rapm_aec_stats_t st;
    rapm_aec_stats(apm, &st);
    result(reduction > 10.0, "apm",
           "AEC, 48 kHz, 20 ms echo at -6 dB: residual %.1f dB below the echo over the last second "
           "(accepted > 10 dB); AEC delay estimate %d ms",
           reduction, st.delay_median_ms);
    rapm_destroy(apm);
}

static void check_crypto(void) {
    static const char key[] = "Jefe", msg[] = "what do ya want for nothing?";
    static const char expected[] = "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843";
    unsigned char mac[32];
    unsigned int len = 0;
    HMAC(EVP_sha256(), key, (int)strlen(key), (const unsigned char *)msg, strlen(msg), mac, &len);
    char hex[2 * sizeof mac + 1];
    for (size_t i = 0; i < sizeof mac; i++) snprintf(hex + 2 * i, 3, "%02x", mac[i]);
    result(len == 32 && strcmp(hex, expected) == 0, "crypto", "libcrypto %s HMAC-SHA256 (RFC 4231 case 2) = %.16s...",
           OpenSSL_version(OPENSSL_VERSION), hex);
}

static void check_gpiod(void) {
    const char *v = gpiod_version_string();
    result(v && strncmp(v, "1.", 2) == 0, "gpiod", "libgpiod version %s (v1 API expected)", v ? v : "(null)");
}

int main(void) {
    check_clinux();
    check_opus();
    check_apm();
    check_crypto();
    check_gpiod();
    printf("libs_check: %s (%d failed)\n", failures ? "FAIL" : "PASS", failures);
    return failures ? 1 : 0;
}
