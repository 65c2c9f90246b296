/* g722-oracle: libspandsp's G.722 (the implementation Debian's baresip uses) as a reference
 * for roomd's Swift G.722. Dev-only: not part of the Swift package, not run by the tests.
 *
 *   g722-oracle encode IN.s16 OUT.g722   16 kHz s16le samples -> G.722 bytes (64 kbit/s)
 *   g722-oracle decode IN.g722 OUT.s16   G.722 bytes -> 16 kHz s16le samples
 *   g722-oracle bench IN.s16 SECONDS     µs per 20 ms frame (IN's first second, repeated), to
 *                                        set beside g722-swift's figure on the same machine
 *
 * Plain 64 kbit/s mode: options 0 (no G722_PACKED, no G722_SAMPLE_RATE_8000), which is what
 * baresip's g722 module asks for. Each call starts from a freshly initialised state. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <time.h>
#include <spandsp.h>

static unsigned char *read_all(const char *path, size_t *length) {
    FILE *f = fopen(path, "rb");
    if (!f) { perror(path); exit(1); }
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *data = malloc(size > 0 ? size : 1);
    if (fread(data, 1, size, f) != (size_t) size) { perror(path); exit(1); }
    fclose(f);
    *length = size;
    return data;
}

static void write_all(const char *path, const void *data, size_t length) {
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, 1, length, f) != length) { perror(path); exit(1); }
    fclose(f);
}

static double now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: %s encode IN.s16 OUT.g722 | decode IN.g722 OUT.s16 | bench IN.s16 SECONDS\n", argv[0]);
        return 2;
    }
    size_t length;
    unsigned char *input = read_all(argv[2], &length);
    if (strcmp(argv[1], "encode") == 0) {
        int samples = (int) (length / 2) & ~1;
        uint8_t *bytes = malloc(samples / 2 + 1);
        g722_encode_state_t *encoder = g722_encode_init(NULL, 64000, 0);
        int produced = g722_encode(encoder, bytes, (const int16_t *) input, samples);
        write_all(argv[3], bytes, produced);
        g722_encode_free(encoder);
    } else if (strcmp(argv[1], "decode") == 0) {
        int16_t *samples = malloc(2 * length * sizeof(int16_t) + 2);
        g722_decode_state_t *decoder = g722_decode_init(NULL, 64000, 0);
        int produced = g722_decode(decoder, samples, input, (int) length);
        write_all(argv[3], samples, produced * sizeof(int16_t));
        g722_decode_free(decoder);
    } else if (strcmp(argv[1], "bench") == 0 && length >= 32000) {
        const int16_t *samples = (const int16_t *) input;
        int frames = atoi(argv[3]) * 50;
        uint8_t bytes[160];
        int16_t output[320];
        g722_encode_state_t *encoder = g722_encode_init(NULL, 64000, 0);
        g722_decode_state_t *decoder = g722_decode_init(NULL, 64000, 0);
        double encode_ns = 0, decode_ns = 0;
        long checksum = 0;
        for (int frame = 0; frame < frames; frame++) {
            double t0 = now_ns();
            g722_encode(encoder, bytes, samples + 320 * (frame % 50), 320);
            double t1 = now_ns();
            g722_decode(decoder, output, bytes, 160);
            double t2 = now_ns();
            encode_ns += t1 - t0;
            decode_ns += t2 - t1;
            checksum += output[frame % 320];
        }
        printf("%d frames of 20 ms: encode %.2f µs/frame, decode %.2f µs/frame (checksum %ld)\n",
               frames, encode_ns / frames / 1000, decode_ns / frames / 1000, checksum);
    } else {
        fprintf(stderr, "unknown mode %s\n", argv[1]);
        return 2;
    }
    return 0;
}
