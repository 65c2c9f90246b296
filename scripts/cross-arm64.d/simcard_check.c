// The roomsim plugin's basic contract, checked through alsa-lib from C so it can be built for
// aarch64 with Debian's cross compiler and run under qemu-user (scripts/cross-arm64).
// A subset of Tests/SimCardTests (which need an aarch64 Swift runtime to run on arm64):
//   capture    1 s of a 4-channel WAV is captured sample-exactly, then silence
//   pacing     that 1 s of capture takes about 1 s of wall time (loose bound: emulated CPU)
//   playback   0.5 s of stereo written to the card lands in the output WAV sample-exactly
//   badkey     an unknown room-file key makes snd_pcm_open fail with -EINVAL
//   float      FLOAT_LE capture is the int16 input divided by 32768
// The caller sets ALSA_PLUGIN_DIR and ALSA_CONFIG_PATH (as scripts/simcard-env does); this
// program writes its room files into a temporary directory and points ROOMSIM_CONFIG at them.
// Prints one PASS/FAIL line per check and exits 1 when any failed.
#define _GNU_SOURCE
#include <alsa/asoundlib.h>
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "check.h"

static char dir[256];

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void put16(uint8_t *p, unsigned v) { p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); }
static void put32(uint8_t *p, unsigned long v) { put16(p, (unsigned)(v & 0xffff)); put16(p + 2, (unsigned)(v >> 16)); }
static unsigned get16(const uint8_t *p) { return p[0] | (unsigned)p[1] << 8; }
static unsigned long get32(const uint8_t *p) { return get16(p) | (unsigned long)get16(p + 2) << 16; }

// A canonical 44-byte-header PCM16 WAV.
static int write_wav(const char *path, int channels, int rate, const int16_t *s, size_t n) {
    uint8_t h[44];
    memcpy(h, "RIFF", 4); put32(h + 4, 36 + n * 2); memcpy(h + 8, "WAVEfmt ", 8);
    put32(h + 16, 16); put16(h + 20, 1); put16(h + 22, (unsigned)channels); put32(h + 24, (unsigned long)rate);
    put32(h + 28, (unsigned long)rate * (unsigned long)channels * 2); put16(h + 32, (unsigned)channels * 2); put16(h + 34, 16);
    memcpy(h + 36, "data", 4); put32(h + 40, n * 2);
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    int ok = fwrite(h, 1, 44, f) == 44;
    for (size_t i = 0; ok && i < n; i++) {
        uint8_t b[2];
        put16(b, (uint16_t)s[i]);
        ok = fwrite(b, 1, 2, f) == 2;
    }
    return fclose(f) == 0 && ok ? 0 : -1;
}

static uint8_t *read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 16, n = 0;
    uint8_t *buf = malloc(cap);
    size_t got;
    while (buf && (got = fread(buf + n, 1, cap - n, f)) > 0) {
        n += got;
        if (n == cap) buf = realloc(buf, cap *= 2);
    }
    fclose(f);
    *len = n;
    return buf;
}

static void room(const char *body) {
    char path[300];
    snprintf(path, sizeof path, "%s/room.conf", dir);
    FILE *f = fopen(path, "w");
    if (!f) { perror(path); exit(2); }
    fprintf(f, "%s\n", body);
    fclose(f);
    setenv("ROOMSIM_CONFIG", path, 1);
}

static int open_pcm(snd_pcm_t **pcm, snd_pcm_stream_t stream, unsigned channels, snd_pcm_format_t format) {
    int rc = snd_pcm_open(pcm, "roomsim", stream, 0);
    if (rc < 0) return rc;
    snd_pcm_hw_params_t *hw;
    snd_pcm_hw_params_alloca(&hw);
    snd_pcm_uframes_t period = 480, buffer = 1920;
    int dirn = 0;
    if ((rc = snd_pcm_hw_params_any(*pcm, hw)) < 0 ||
        (rc = snd_pcm_hw_params_set_access(*pcm, hw, SND_PCM_ACCESS_RW_INTERLEAVED)) < 0 ||
        (rc = snd_pcm_hw_params_set_format(*pcm, hw, format)) < 0 ||
        (rc = snd_pcm_hw_params_set_channels(*pcm, hw, channels)) < 0 ||
        (rc = snd_pcm_hw_params_set_rate(*pcm, hw, 48000, 0)) < 0 ||
        (rc = snd_pcm_hw_params_set_period_size_near(*pcm, hw, &period, &dirn)) < 0 ||
        (rc = snd_pcm_hw_params_set_buffer_size_near(*pcm, hw, &buffer)) < 0 ||
        (rc = snd_pcm_hw_params(*pcm, hw)) < 0) {
        snd_pcm_close(*pcm);
        *pcm = NULL;
    }
    return rc;
}

// Reads exactly `frames` frames in 480-frame chunks; returns 0 or the first ALSA error.
static long read_all(snd_pcm_t *pcm, void *buf, size_t frame_bytes, long frames) {
    long done = 0;
    while (done < frames) {
        long want = frames - done < 480 ? frames - done : 480;
        snd_pcm_sframes_t n = snd_pcm_readi(pcm, (char *)buf + (size_t)done * frame_bytes, (snd_pcm_uframes_t)want);
        if (n < 0) return n;
        done += n;
    }
    return 0;
}

enum { RATE = 48000, CAP_CH = 4, CAP_FRAMES = RATE, TAIL = 2400, PB_CH = 2, PB_FRAMES = RATE / 2 };

static int16_t pattern(long i, int c) { return (int16_t)(uint16_t)(i * 37 + c * 9001 - 20000); }

static void check_capture(void) {
    char path[300];
    static int16_t in[CAP_FRAMES * CAP_CH], got[(CAP_FRAMES + TAIL) * CAP_CH];
    for (long i = 0; i < CAP_FRAMES; i++)
        for (int c = 0; c < CAP_CH; c++) in[i * CAP_CH + c] = pattern(i, c);
    snprintf(path, sizeof path, "%s/in.wav", dir);
    if (write_wav(path, CAP_CH, RATE, in, CAP_FRAMES * CAP_CH) != 0) { result(0, "capture", "cannot write %s", path); return; }
    room("input = in.wav\ninput_end = silence");

    snd_pcm_t *pcm;
    int rc = open_pcm(&pcm, SND_PCM_STREAM_CAPTURE, CAP_CH, SND_PCM_FORMAT_S16_LE);
    if (rc < 0) { result(0, "capture", "open/hw_params: %s", snd_strerror(rc)); return; }
    double t0 = now_s();
    long r = read_all(pcm, got, CAP_CH * 2, CAP_FRAMES);
    double elapsed = now_s() - t0;
    if (r == 0) r = read_all(pcm, got + CAP_FRAMES * CAP_CH, CAP_CH * 2, TAIL);
    snd_pcm_close(pcm);
    if (r < 0) { result(0, "capture", "snd_pcm_readi: %s", snd_strerror((int)r)); return; }

    long first_diff = -1;
    for (long i = 0; i < CAP_FRAMES * CAP_CH && first_diff < 0; i++)
        if (got[i] != in[i]) first_diff = i;
    long tail_nonzero = 0;
    for (long i = CAP_FRAMES * CAP_CH; i < (CAP_FRAMES + TAIL) * CAP_CH; i++)
        if (got[i] != 0) tail_nonzero++;
    if (first_diff < 0 && tail_nonzero == 0)
        result(1, "capture", "%d frames x %d ch identical to in.wav, then %d frames of silence", CAP_FRAMES, CAP_CH, TAIL);
    else if (first_diff >= 0)
        result(0, "capture", "sample %ld (frame %ld ch %ld) is %d, in.wav has %d", first_diff,
               first_diff / CAP_CH, first_diff % CAP_CH, got[first_diff], in[first_diff]);
    else
        result(0, "capture", "%ld non-zero samples after the end of the input", tail_nonzero);

    // The hw pointer advances at period boundaries from the start: 48000 frames = 100 periods
    // end at t = 1.000 s. Loose bound: the process runs under an emulator on a shared machine.
    result(elapsed > 0.95 && elapsed < 1.30, "pacing", "1 s of capture (48000 frames) took %.3f s (accepted 0.95..1.30)", elapsed);
}

static void check_float_capture(void) {
    // in.wav from check_capture: the first 4800 frames as FLOAT_LE must be in/32768 exactly.
    enum { N = 4800 };
    static float got[N * CAP_CH];
    room("input = in.wav\ninput_end = silence");
    snd_pcm_t *pcm;
    int rc = open_pcm(&pcm, SND_PCM_STREAM_CAPTURE, CAP_CH, SND_PCM_FORMAT_FLOAT_LE);
    if (rc < 0) { result(0, "float", "open/hw_params FLOAT_LE: %s", snd_strerror(rc)); return; }
    long r = read_all(pcm, got, CAP_CH * sizeof(float), N);
    snd_pcm_close(pcm);
    if (r < 0) { result(0, "float", "snd_pcm_readi: %s", snd_strerror((int)r)); return; }
    for (long i = 0; i < N; i++)
        for (int c = 0; c < CAP_CH; c++)
            if (got[i * CAP_CH + c] != (float)pattern(i, c) / 32768.0f) {
                result(0, "float", "frame %ld ch %d: %.9g, expected %.9g", i, c, got[i * CAP_CH + c],
                       (double)((float)pattern(i, c) / 32768.0f));
                return;
            }
    result(1, "float", "%d frames x %d ch of FLOAT_LE capture equal the input / 32768", N, CAP_CH);
}

static void check_playback(void) {
    static int16_t out[PB_FRAMES * PB_CH];
    for (long i = 0; i < PB_FRAMES * PB_CH; i++) out[i] = (int16_t)(uint16_t)(i * 131 - 7);
    room("output = out.wav");
    snd_pcm_t *pcm;
    int rc = open_pcm(&pcm, SND_PCM_STREAM_PLAYBACK, PB_CH, SND_PCM_FORMAT_S16_LE);
    if (rc < 0) { result(0, "playback", "open/hw_params: %s", snd_strerror(rc)); return; }
    double t0 = now_s();
    long done = 0;
    while (done < PB_FRAMES) {
        long want = PB_FRAMES - done < 480 ? PB_FRAMES - done : 480;
        snd_pcm_sframes_t n = snd_pcm_writei(pcm, out + done * PB_CH, (snd_pcm_uframes_t)want);
        if (n < 0) { snd_pcm_close(pcm); result(0, "playback", "snd_pcm_writei: %s", snd_strerror((int)n)); return; }
        done += n;
    }
    rc = snd_pcm_drain(pcm);
    double elapsed = now_s() - t0;
    snd_pcm_close(pcm);
    if (rc < 0) { result(0, "playback", "snd_pcm_drain: %s", snd_strerror(rc)); return; }

    char path[300];
    snprintf(path, sizeof path, "%s/out.wav", dir);
    size_t len = 0;
    uint8_t *w = read_file(path, &len);
    if (!w || len < 44 || memcmp(w, "RIFF", 4) != 0 || memcmp(w + 8, "WAVEfmt ", 8) != 0 || memcmp(w + 36, "data", 4) != 0) {
        result(0, "playback", "%s is missing or not a canonical WAV (%zu bytes)", path, len);
        free(w);
        return;
    }
    unsigned ch = get16(w + 22), bits = get16(w + 34);
    unsigned long rate = get32(w + 24), data = get32(w + 40);
    int ok = ch == PB_CH && rate == RATE && bits == 16 && data == (unsigned long)PB_FRAMES * PB_CH * 2 && len >= 44 + data;
    long first_diff = -1;
    for (long i = 0; ok && i < PB_FRAMES * PB_CH && first_diff < 0; i++)
        if ((int16_t)get16(w + 44 + i * 2) != out[i]) first_diff = i;
    if (ok && first_diff < 0)
        result(1, "playback", "out.wav: %u ch, %lu Hz, 16 bit, %lu data bytes, identical to the %d frames written; "
               "writes + drain took %.3f s", ch, rate, data, PB_FRAMES, elapsed);
    else if (!ok)
        result(0, "playback", "out.wav header: %u ch, %lu Hz, %u bit, %lu data bytes (file %zu bytes); expected %d ch, %d Hz, 16 bit, %d bytes",
               ch, rate, bits, data, len, PB_CH, RATE, PB_FRAMES * PB_CH * 2);
    else
        result(0, "playback", "sample %ld differs: %d written, %d in out.wav", first_diff, out[first_diff],
               (int16_t)get16(w + 44 + first_diff * 2));
    free(w);
    // Writing 0.5 s and draining it cannot finish before the last period was played.
    result(elapsed > 0.45 && elapsed < 0.80, "playback-pacing", "0.5 s of playback (write + drain) took %.3f s (accepted 0.45..0.80)", elapsed);
}

static void check_bad_key(void) {
    room("bogus_key = 1");
    snd_pcm_t *pcm = NULL;
    fprintf(stderr, "(simcard_check: the next roomsim error about 'bogus_key' is expected)\n");
    int rc = snd_pcm_open(&pcm, "roomsim", SND_PCM_STREAM_CAPTURE, 0);
    if (rc == 0) snd_pcm_close(pcm);
    result(rc == -EINVAL, "badkey", "snd_pcm_open with an unknown room key returned %d (%s), expected -EINVAL",
           rc, rc ? snd_strerror(rc) : "success");
}

int main(void) {
    const char *plugin_dir = getenv("ALSA_PLUGIN_DIR"), *config = getenv("ALSA_CONFIG_PATH");
    if (!plugin_dir || !config) {
        fprintf(stderr, "simcard_check: set ALSA_PLUGIN_DIR and ALSA_CONFIG_PATH (see scripts/simcard-env)\n");
        return 2;
    }
    snprintf(dir, sizeof dir, "%s/roomsim-arm64-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(dir)) { perror("mkdtemp"); return 2; }
    printf("simcard_check: alsa-lib %s, ALSA_PLUGIN_DIR=%s, room files in %s\n", snd_asoundlib_version(), plugin_dir, dir);

    check_capture();
    check_float_capture();
    check_playback();
    check_bad_key();

    static const char *const files[] = {"room.conf", "in.wav", "out.wav"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        char path[300];
        snprintf(path, sizeof path, "%s/%s", dir, files[i]);
        unlink(path);
    }
    if (rmdir(dir) != 0) fprintf(stderr, "simcard_check: could not remove %s: %s\n", dir, strerror(errno));
    printf("simcard_check: %s (%d failed)\n", failures ? "FAIL" : "PASS", failures);
    return failures ? 1 : 0;
}
