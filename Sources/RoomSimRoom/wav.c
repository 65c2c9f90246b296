/* Input files (PCM16 WAV or raw S16_LE, read with pread through a small cache) and output
 * files (WAV or raw). */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "rs_internal.h"

static uint32_t le32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static uint16_t le16(const unsigned char *p) { return (uint16_t)(p[0] | p[1] << 8); }

static int has_suffix(const char *s, const char *suffix)
{
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && strcasecmp(s + a - b, suffix) == 0;
}

/* Finds fmt and data in a RIFF/WAVE image. 0, or -EINVAL after a message. */
static int parse_wav(rs_input *in, const char *path, const unsigned char *b, size_t len)
{
    if (len < 12 || memcmp(b, "RIFF", 4) != 0 || memcmp(b + 8, "WAVE", 4) != 0) {
        rs_log("%s: not a WAV file (no RIFF/WAVE header)", path);
        return -EINVAL;
    }
    int have_fmt = 0;
    size_t pos = 12;
    while (pos + 8 <= len) {
        const unsigned char *id = b + pos;
        uint32_t size = le32(b + pos + 4);
        size_t body = pos + 8;
        if (memcmp(id, "fmt ", 4) == 0) {
            if (size < 16 || body + size > len) {
                rs_log("%s: malformed WAV: fmt chunk of %u bytes at offset %zu", path, size, pos);
                return -EINVAL;
            }
            unsigned tag = le16(b + body), channels = le16(b + body + 2);
            unsigned rate = le32(b + body + 4), align = le16(b + body + 12);
            unsigned bits = le16(b + body + 14);
            if (tag == 0xFFFE && size >= 40)
                tag = le16(b + body + 24); /* WAVE_FORMAT_EXTENSIBLE: sub-format GUID */
            if (tag != 1 || bits != 16) {
                rs_log("%s: unsupported WAV encoding (format tag %u, %u bits): need PCM16", path,
                       tag, bits);
                return -EINVAL;
            }
            if (channels < 1 || channels > RS_MAX_MICS || align != channels * 2 || rate == 0) {
                rs_log("%s: malformed WAV: %u channels, block align %u, rate %u", path, channels,
                       align, rate);
                return -EINVAL;
            }
            in->channels = channels;
            in->rate = rate;
            have_fmt = 1;
        } else if (memcmp(id, "data", 4) == 0) {
            if (!have_fmt) {
                rs_log("%s: malformed WAV: data chunk before fmt chunk", path);
                return -EINVAL;
            }
            size_t avail = len - body;
            if (size > avail) {
                /* An interrupted recording: keep what is there. */
                rs_log("%s: WAV data chunk says %u bytes, file holds %zu: using those", path,
                       size, avail);
                size = (uint32_t)avail;
            }
            in->data_offset = body;
            in->frames = size / (2u * in->channels);
            return 0;
        }
        if (body + size < body || body + size > len)
            break;
        pos = body + size + (size & 1); /* chunks are padded to even sizes */
    }
    rs_log("%s: malformed WAV: %s", path, have_fmt ? "no data chunk" : "no fmt chunk");
    return -EINVAL;
}

int rs_input_open(rs_input *in, const char *path, int format, unsigned raw_channels)
{
    memset(in, 0, sizeof *in);
    in->block[0] = in->block[1] = -1;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        int err = errno;
        rs_log("cannot open input file %s: %s", path, strerror(err));
        return -err;
    }
    struct stat st;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
        rs_log("input file %s is not a regular file", path);
        close(fd);
        return -EINVAL;
    }
    size_t len = (size_t)st.st_size;
    /* The header is parsed in a mapping made for that alone (a WAV's chunks may lie anywhere);
     * the samples are read later, a block at a time. */
    const unsigned char *b = NULL;
    if (len > 0) {
        void *m = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
        if (m == MAP_FAILED) {
            int err = errno;
            rs_log("cannot map input file %s: %s", path, strerror(err));
            close(fd);
            return -err;
        }
        b = m;
    }
    if (format == RS_FILE_AUTO)
        format = (len >= 4 && memcmp(b, "RIFF", 4) == 0) || has_suffix(path, ".wav")
                     ? RS_FILE_WAV : RS_FILE_RAW;
    int rc = 0;
    if (format == RS_FILE_WAV) {
        rc = parse_wav(in, path, b, len);
    } else {
        in->channels = raw_channels;
        in->data_offset = 0;
        in->frames = len / (2u * raw_channels);
    }
    if (b)
        munmap((void *)b, len);
    if (rc < 0) {
        close(fd);
        return rc;
    }
    in->fd = fd;
    in->open = 1;
    return 0;
}

void rs_input_load(rs_input *in, uint64_t block)
{
    const unsigned slot = (unsigned)(block & 1);
    unsigned char *dst = in->cache[slot];
    const uint64_t bytes = (uint64_t)in->frames * in->channels * 2, from = block * RS_INPUT_BLOCK;
    size_t want = from >= bytes ? 0 : bytes - from < RS_INPUT_BLOCK ? (size_t)(bytes - from) : RS_INPUT_BLOCK;
    size_t got = 0;
    while (got < want && in->open) {
        ssize_t n = pread(in->fd, dst + got, want - got, (off_t)(in->data_offset + from + got));
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        got += (size_t)n;
    }
    memset(dst + got, 0, RS_INPUT_BLOCK - got);
    in->block[slot] = (int64_t)block;
}

void rs_input_close(rs_input *in)
{
    if (in->open)
        close(in->fd);
    memset(in, 0, sizeof *in);   /* no frames: nothing is read any more */
}

int rs_wav_read_mono(const char *path, float **samples, size_t *count, unsigned *rate)
{
    rs_input in;
    int rc = rs_input_open(&in, path, RS_FILE_WAV, 1);
    if (rc < 0)
        return rc;
    if (in.frames == 0) {
        rs_log("%s: impulse response has no samples", path);
        rs_input_close(&in);
        return -EINVAL;
    }
    float *s = malloc(in.frames * sizeof *s);
    if (!s) {
        rs_input_close(&in);
        return -ENOMEM;
    }
    for (size_t i = 0; i < in.frames; i++)
        s[i] = rs_input_sample(&in, i, 0) / 32768.0f;
    *samples = s;
    *count = in.frames;
    *rate = in.rate;
    rs_input_close(&in);
    return 0;
}

/* ---- output ---------------------------------------------------------------------------- */

static void put32(unsigned char *p, uint32_t v)
{
    p[0] = v; p[1] = v >> 8; p[2] = v >> 16; p[3] = v >> 24;
}
static void put16(unsigned char *p, uint16_t v) { p[0] = v; p[1] = v >> 8; }

static void write_header(rs_output *o)
{
    unsigned char h[44];
    uint64_t bytes = o->frames * o->channels * 2;
    if (bytes > 0xFFFFFFFFu - 36)
        bytes = 0xFFFFFFFFu - 36;
    memcpy(h, "RIFF", 4);
    put32(h + 4, (uint32_t)(36 + bytes));
    memcpy(h + 8, "WAVEfmt ", 8);
    put32(h + 16, 16);
    put16(h + 20, 1);
    put16(h + 22, (uint16_t)o->channels);
    put32(h + 24, o->rate);
    put32(h + 28, o->rate * o->channels * 2);
    put16(h + 32, (uint16_t)(o->channels * 2));
    put16(h + 34, 16);
    memcpy(h + 36, "data", 4);
    put32(h + 40, (uint32_t)bytes);
    long here = ftell(o->f);
    fseek(o->f, 0, SEEK_SET);
    fwrite(h, 1, sizeof h, o->f);
    if (here > (long)sizeof h)
        fseek(o->f, here, SEEK_SET);
}

int rs_output_open(rs_output *o, const char *path, int format)
{
    memset(o, 0, sizeof *o);
    o->f = fopen(path, "w+be");
    if (!o->f) {
        int err = errno;
        rs_log("cannot create output file %s: %s", path, strerror(err));
        return -err;
    }
    snprintf(o->path, sizeof o->path, "%s", path);
    o->wav = format == RS_FILE_WAV || (format == RS_FILE_AUTO && has_suffix(path, ".wav"));
    return 0;
}

int rs_output_reopen(rs_output *o)
{
    if (o->f)
        return 0;
    int wav = o->wav;
    unsigned channels = o->channels;
    uint64_t frames = o->frames;
    FILE *f = fopen(o->path, "r+be");
    long end = (long)((wav ? 44 : 0) + frames * channels * 2);
    if (f && fseek(f, 0, SEEK_END) == 0 && ftell(f) == end) {
        o->f = f; /* continue where the last session stopped */
        return 0;
    }
    if (f)
        fclose(f);
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s", o->path);
    return rs_output_open(o, path, wav ? RS_FILE_WAV : RS_FILE_RAW);
}

int rs_output_set_format(rs_output *o, unsigned channels, unsigned rate)
{
    if (!o->f)
        return 0;
    if (o->channels == channels && o->rate == rate)
        return 0; /* same format: a reopened stream appends */
    if (o->channels != 0)
        rs_log("%s: playback format changed to %u ch %u Hz: starting the file over", o->path,
               channels, rate);
    if (ftruncate(fileno(o->f), 0) < 0 || fseek(o->f, 0, SEEK_SET) < 0)
        return -errno;
    o->channels = channels;
    o->rate = rate;
    o->frames = 0;
    if (o->wav)
        write_header(o);
    return 0;
}

int rs_output_write(rs_output *o, const int16_t *frames, size_t count)
{
    if (!o->f || !o->channels)
        return 0;
    size_t n = count * o->channels;
    /* little-endian host assumed (x86_64, arm64): S16_LE is the native layout */
    if (fwrite(frames, sizeof *frames, n, o->f) != n)
        return -EIO;
    o->frames += count;
    return 0;
}

void rs_output_sync(rs_output *o)
{
    if (!o->f || !o->channels)
        return;
    if (o->wav)
        write_header(o);
    fflush(o->f);
}

void rs_output_close(rs_output *o)
{
    if (!o->f)
        return;
    rs_output_sync(o);
    fclose(o->f);
    o->f = NULL; /* path, format and frame count stay for rs_output_reopen */
}
