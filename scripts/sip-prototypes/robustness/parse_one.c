/*
 * Feeds one SIP library's parsers (SIP message and SDP) with given files, or with mutations of
 * them, and says what each did: "ok", "error" or a crash (then the input is written to
 * crash-<lib>.bin). Built once per library: -DLIB_RE, -DLIB_OSIP or -DLIB_SOFIA.
 *
 *   parse_<lib> FILE...            one line per file: name, result, parse time
 *   parse_<lib> mutate N SEED FILE...   N mutations of each file (byte flips, cuts, copies)
 *
 * Each input sits in a buffer of exactly its size plus one NUL (so reads past the end show
 * under valgrind). A .sdp file goes to the SDP parser, anything else to the SIP parser.
 */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <sys/resource.h>
#include <sys/time.h>

#if defined(LIB_RE)
#include <re.h>
static const char *lib = "re";
static int parse_sip(const char *b, size_t n)
{
	struct mbuf *mb = mbuf_alloc(n ? n : 1);
	struct sip_msg *msg = NULL;
	mbuf_write_mem(mb, (const uint8_t *)b, n);
	mb->pos = 0;
	int err = sip_msg_decode(&msg, mb);
	if (!err) { /* the lazily parsed headers too: every Via, Contact */
		struct sip_via via;
		struct sip_addr addr;
		struct le *le;
		for (le = msg->hdrl.head; le; le = le->next) {
			const struct sip_hdr *h = le->data;
			if (h->id == SIP_HDR_VIA)
				(void)sip_via_decode(&via, &h->val);
			else if (h->id == SIP_HDR_CONTACT)
				(void)sip_addr_decode(&addr, &h->val);
		}
	}
	mem_deref(msg);
	mem_deref(mb);
	return err;
}
static int parse_sdp(const char *b, size_t n)
{
	struct sdp_session *s = NULL;
	struct sa la;
	sa_set_str(&la, "127.0.0.1", 0);
	struct mbuf *mb = mbuf_alloc(n ? n : 1);
	mbuf_write_mem(mb, (const uint8_t *)b, n);
	mb->pos = 0;
	int err = sdp_session_alloc(&s, &la);
	if (!err)
		err = sdp_decode(s, mb, true);
	mem_deref(s);
	mem_deref(mb);
	return err;
}
static void init(void) { libre_init(); }
#elif defined(LIB_OSIP)
#include <stdbool.h>
#include <sys/time.h>
#include <osipparser2/osip_parser.h>
#include <osipparser2/sdp_message.h>
static const char *lib = "osip";
static int parse_sip(const char *b, size_t n)
{
	osip_message_t *m;
	osip_message_init(&m);
	int err = osip_message_parse(m, b, n);
	osip_message_free(m);
	return err;
}
static int parse_sdp(const char *b, size_t n)
{
	(void)n;
	sdp_message_t *s;
	sdp_message_init(&s);
	int err = sdp_message_parse(s, b);
	sdp_message_free(s);
	return err;
}
static void init(void) { parser_init(); }
#elif defined(LIB_SOFIA)
#include <sofia-sip/su_alloc.h>
#include <sofia-sip/msg.h>
#include <sofia-sip/sip.h>
#include <sofia-sip/sip_header.h>
#include <sofia-sip/sdp.h>
static const char *lib = "sofia";
static int parse_sip(const char *b, size_t n)
{
	msg_t *m = msg_make(sip_default_mclass(), 0, b, (ssize_t)n);
	int err = !m || !sip_object(m) || msg_extract_errors(m);
	msg_destroy(m);
	return err;
}
static int parse_sdp(const char *b, size_t n)
{
	su_home_t *home = su_home_new(sizeof(su_home_t));
	sdp_parser_t *p = sdp_parse(home, b, (issize_t)n, 0);
	int err = !sdp_session(p);
	sdp_parser_free(p);
	su_home_unref(home);
	return err;
}
static void init(void) { su_init(); }
#endif

static char *cur;
static size_t cur_len;

static void on_crash(int sig)
{
	char name[64];
	snprintf(name, sizeof name, "crash-%s.bin", lib);
	FILE *f = fopen(name, "wb");
	if (f) {
		fwrite(cur, 1, cur_len, f);
		fclose(f);
	}
	fprintf(stderr, "%s: CRASH signal %d, input written to %s\n", lib, sig, name);
	_exit(99);
}

static char *slurp(const char *path, size_t *n)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	fseek(f, 0, SEEK_END);
	*n = (size_t)ftell(f);
	fseek(f, 0, SEEK_SET);
	char *b = malloc(*n + 1);
	if (fread(b, 1, *n, f) != *n)
		*n = 0;
	b[*n] = 0;
	fclose(f);
	return b;
}

static int run(const char *path, const char *b, size_t n)
{
	char *copy = malloc(n + 1);
	memcpy(copy, b, n);
	copy[n] = 0;
	cur = copy;
	cur_len = n;
	alarm(2);
	size_t pl = strlen(path);
	int err = pl > 4 && !strcmp(path + pl - 4, ".sdp") ? parse_sdp(copy, n) : parse_sip(copy, n);
	alarm(0);
	free(copy);
	return err;
}

static uint64_t rng;
static uint64_t next(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

int main(int argc, char **argv)
{
	signal(SIGSEGV, on_crash);
	signal(SIGABRT, on_crash);
	signal(SIGBUS, on_crash);
	signal(SIGFPE, on_crash);
	signal(SIGALRM, on_crash);
	/* A parser that runs away (time or memory) counts as a crash: 1 GiB of address space,
	 * and SIGALRM when one input takes longer than 2 s. */
	struct rlimit lim = { 1UL << 30, 1UL << 30 };
	setrlimit(RLIMIT_AS, &lim);
	init();
	if (argc > 3 && !strcmp(argv[1], "mutate")) {
		long count = atol(argv[2]);
		rng = strtoull(argv[3], NULL, 10) | 1;
		long errors = 0, total = 0;
		for (int f = 4; f < argc; f++) {
			size_t n;
			char *base = slurp(argv[f], &n);
			char *m = malloc(n * 2 + 64);
			for (long i = 0; i < count; i++) {
				size_t len = n;
				memcpy(m, base, n);
				int edits = 1 + (int)(next() % 8);
				for (int e = 0; e < edits && len > 0; e++) {
					size_t at = next() % len;
					switch (next() % 4) {
					case 0: m[at] = (char)next(); break;
					case 1: len = at; break; /* cut */
					case 2: { /* copy a chunk over another place */
						size_t from = next() % len, k = next() % 32;
						if (from + k <= len && at + k <= n * 2 + 63)
							memmove(m + at, m + from, k);
						break;
					}
					case 3: m[at] = "\r\n:;,<>\" =\0%"[next() % 13]; break;
					}
				}
				errors += run(argv[f], m, len) != 0;
				total++;
			}
			free(m);
			free(base);
		}
		printf("%s: %ld mutated inputs, %ld refused, no crash\n", lib, total, errors);
		return 0;
	}
	for (int f = 1; f < argc; f++) {
		size_t n;
		char *b = slurp(argv[f], &n);
		if (!b)
			continue;
		struct timespec t0, t1;
		clock_gettime(CLOCK_MONOTONIC, &t0);
		int err = run(argv[f], b, n);
		clock_gettime(CLOCK_MONOTONIC, &t1);
		const char *name = strrchr(argv[f], '/');
		printf("%-6s %-38s %-6s (%d) %8.3f ms\n", lib, name ? name + 1 : argv[f],
		       err ? "error" : "ok", err,
		       (t1.tv_sec - t0.tv_sec) * 1e3 + (t1.tv_nsec - t0.tv_nsec) / 1e6);
		free(b);
	}
	return 0;
}
