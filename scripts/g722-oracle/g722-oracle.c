/* g722-oracle: libspandsp's G.722 (the implementation Debian's baresip uses) as a reference
 * for roomd's Swift G.722. Dev-only: not part of the Swift package, not run by the tests.
 *
 *   g722-oracle encode IN.s16 OUT.g722   16 kHz s16le samples -> G.722 bytes (64 kbit/s)
 *   g722-oracle decode IN.g722 OUT.s16   G.722 bytes -> 16 kHz s16le samples
 *
 * Plain 64 kbit/s mode: options 0 (no G722_PACKED, no G722_SAMPLE_RATE_8000), which is what
 * baresip's g722 module asks for. Each call starts from a freshly initialised state. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
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

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: %s encode IN.s16 OUT.g722 | decode IN.g722 OUT.s16\n", argv[0]);
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
    } else {
        fprintf(stderr, "unknown mode %s\n", argv[1]);
        return 2;
    }
    return 0;
}
