/*
 * libre (1.1.0) SIP prototype for issue 29: REGISTER with digest auth at the test kamailio,
 * INVITE sip:far@ (baresip, auto-answer) with a G.711/G.722/Opus offer, BYE after 2 s,
 * un-REGISTER, exit. Driven from OUR epoll loop, not re_main: libre 1.1.0 has no public API
 * that hands out its descriptors and timers, so this file defines fd_listen/fd_close itself
 * (libre calls them through its PLT, so the executable's definitions win) and polls libre's
 * timer list through tmrl_get(), which libre exports but does not declare. That is the
 * question the prototype answers: it works, and it leans on symbols that are not libre's API.
 *
 *   usage: proto_re KAMAILIO_PORT [PASSWORD]
 */
#include <re.h>
#include <sys/epoll.h>
#include <stdlib.h>
#include <unistd.h>
#include "../common/measure.h"

/* --- the event loop (stands for roomd's EventLoop) ----------------------------------- */

struct list *tmrl_get(void); /* exported by libre, not in its headers */

#define MAX_FDS 64
static struct { fd_h *h; void *arg; int flags; } fds[MAX_FDS];
static int epfd = -1;
static bool running = true;

int fd_listen(int fd, int flags, fd_h *fh, void *arg)
{
	struct epoll_event ev = { 0 };
	if (fd < 0 || fd >= MAX_FDS)
		return EBADF;
	if (!flags || !fh) {
		fd_close(fd);
		return 0;
	}
	ev.events = ((flags & FD_READ) ? EPOLLIN : 0) | ((flags & FD_WRITE) ? EPOLLOUT : 0);
	ev.data.fd = fd;
	if (epoll_ctl(epfd, fds[fd].h ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, fd, &ev) < 0)
		return errno;
	fds[fd].h = fh;
	fds[fd].arg = arg;
	fds[fd].flags = flags;
	return 0;
}

void fd_close(int fd)
{
	if (fd < 0 || fd >= MAX_FDS || !fds[fd].h)
		return;
	epoll_ctl(epfd, EPOLL_CTL_DEL, fd, NULL);
	fds[fd].h = NULL;
}

static void loop_run(void)
{
	while (running) {
		struct epoll_event evs[16];
		uint64_t next = tmr_next_timeout(tmrl_get());
		int n = epoll_wait(epfd, evs, 16, next ? (int)next : (tmrl_get()->head ? 0 : 1000));
		for (int i = 0; i < n; i++) {
			int fd = evs[i].data.fd, f = 0;
			if (evs[i].events & EPOLLIN)
				f |= FD_READ;
			if (evs[i].events & EPOLLOUT)
				f |= FD_WRITE;
			if (evs[i].events & (EPOLLERR | EPOLLHUP))
				f |= FD_EXCEPT;
			if (fds[fd].h)
				fds[fd].h(f, fds[fd].arg);
		}
		tmr_poll(tmrl_get());
	}
}

/* --- the user agent ---------------------------------------------------------------- */

static struct sip *sip;
static struct sipsess_sock *sess_sock;
static struct sipreg *reg;
static struct sipsess *sess;
static struct sdp_session *sdp;
static struct tmr hangup_tmr, done_tmr;
static char aor[128], registrar[128], callee[128];
static const char *password = "room-secret";
static double cpu_start;
static int exit_code = 1;

static int auth_h(char **user, char **pass, const char *realm, void *arg)
{
	(void)realm;
	(void)arg;
	int err = str_dup(user, "room");
	return err ? err : str_dup(pass, password);
}

static void on_sip_exit(void *arg)
{
	(void)arg;
	running = false;
}

static void done(void *arg)
{
	(void)arg;
	reg = mem_deref(reg); /* un-REGISTER (expires 0) */
	sess_sock = mem_deref(sess_sock);
	sip_close(sip, false); /* on_sip_exit runs when pending transactions are done */
}

static void close_h(int err, const struct sip_msg *msg, void *arg)
{
	(void)arg;
	re_printf("call closed: %m %u\n", err, msg ? msg->scode : 0);
	sess = mem_deref(sess);
	tmr_start(&done_tmr, 0, done, NULL);
}

static void hangup(void *arg)
{
	(void)arg;
	re_printf("hangup after 2 s\n");
	sess = mem_deref(sess); /* sends BYE */
	exit_code = 0;
	tmr_start(&done_tmr, 200, done, NULL);
}

static void estab_h(const struct sip_msg *msg, void *arg)
{
	(void)arg;
	(void)msg;
	const struct sdp_format *fmt = NULL;
	const struct list *ml = sdp_session_medial(sdp, false);
	if (ml->head)
		fmt = sdp_media_rformat(ml->head->data, NULL);
	re_printf("call established, codec %s\n", fmt ? fmt->name : "?");
	tmr_start(&hangup_tmr, 2000, hangup, NULL);
}

static int answer_h(const struct sip_msg *msg, void *arg)
{
	(void)arg;
	return sdp_decode(sdp, msg->mb, false);
}

static int offer_h(struct mbuf **descp, const struct sip_msg *msg, void *arg)
{
	(void)arg;
	int err = sdp_decode(sdp, msg->mb, true);
	return err ? err : sdp_encode(descp, sdp, false);
}

static void place_call(void)
{
	struct sdp_media *m;
	struct mbuf *desc = NULL;
	struct sa laddr;
	sa_set_str(&laddr, "127.0.0.1", 0);
	int err = sdp_session_alloc(&sdp, &laddr);
	err |= sdp_media_add(&m, sdp, "audio", 40000, "RTP/AVP");
	err |= sdp_format_add(NULL, m, false, "111", "opus", 48000, 2, NULL, NULL, NULL, false,
			      "minptime=10;useinbandfec=1");
	err |= sdp_format_add(NULL, m, false, "9", "G722", 8000, 1, NULL, NULL, NULL, false, NULL);
	err |= sdp_format_add(NULL, m, false, "0", "PCMU", 8000, 1, NULL, NULL, NULL, false, NULL);
	err |= sdp_format_add(NULL, m, false, "8", "PCMA", 8000, 1, NULL, NULL, NULL, false, NULL);
	err |= sdp_format_add(NULL, m, false, "101", "telephone-event", 8000, 1, NULL, NULL, NULL,
			      false, "0-15");
	err |= sdp_encode(&desc, sdp, true);
	err |= sipsess_connect(&sess, sess_sock, callee, NULL, aor, "room", NULL, 0,
			       "application/sdp", desc, auth_h, NULL, false, offer_h, answer_h,
			       NULL, estab_h, NULL, NULL, close_h, NULL, NULL);
	mem_deref(desc);
	if (err) {
		re_printf("call failed to start: %m\n", err);
		tmr_start(&done_tmr, 0, done, NULL);
	}
}

static void reg_resp_h(int err, const struct sip_msg *msg, void *arg)
{
	(void)arg;
	static bool called;
	if (err || msg->scode >= 300) {
		re_printf("register failed: %m %u %r\n", err, msg ? msg->scode : 0,
		       msg ? &msg->reason : NULL);
		tmr_start(&done_tmr, 0, done, NULL);
		return;
	}
	if (msg->scode < 200 || called)
		return;
	called = true;
	re_printf("registered (%u), rss_kib %ld\n", msg->scode, proto_rss_kib());
	place_call();
}

/* PROTO_TRACE=1 prints the first line of every message sent and received. */
static void trace_h(bool tx, enum sip_transp tp, const struct sa *src, const struct sa *dst,
		    const uint8_t *pkt, size_t len, void *arg)
{
	(void)tp;
	(void)src;
	(void)dst;
	(void)arg;
	size_t n = 0;
	while (n < len && pkt[n] != '\r')
		n++;
	re_printf("%s %b\n", tx ? ">>" : "<<", pkt, n);
}

static void conn_h(const struct sip_msg *msg, void *arg)
{
	(void)arg;
	(void)sip_treply(NULL, sip, msg, 486, "Busy Here");
}

int main(int argc, char **argv)
{
	if (argc < 2)
		return 2;
	if (argc > 2)
		password = argv[2];
	cpu_start = proto_cpu_ms();
	long rss_start = proto_rss_kib();
	epfd = epoll_create1(EPOLL_CLOEXEC);
	re_snprintf(aor, sizeof aor, "sip:room@127.0.0.1:%s", argv[1]);
	re_snprintf(registrar, sizeof registrar, "sip:127.0.0.1:%s", argv[1]);
	re_snprintf(callee, sizeof callee, "sip:far@127.0.0.1:%s", argv[1]);

	struct sa laddr;
	sa_set_str(&laddr, "127.0.0.1", 0);
	int err = libre_init();
	err |= sip_alloc(&sip, NULL, 32, 32, 32, "roomd-proto-libre", on_sip_exit, NULL);
	if (getenv("PROTO_TRACE"))
		sip_set_trace_handler(sip, trace_h);
	err |= sip_transp_add(sip, SIP_TRANSP_UDP, &laddr);
	err |= sipsess_listen(&sess_sock, sip, 32, conn_h, NULL);
	err |= sipreg_register(&reg, sip, registrar, aor, NULL, aor, 60, "room", NULL, 0, 0,
			       auth_h, NULL, false, reg_resp_h, NULL, NULL, NULL);
	if (err) {
		re_printf("setup failed: %m\n", err);
		return 1;
	}
	loop_run();
	mem_deref(sip);
	mem_deref(sdp);
	libre_close();
	re_printf("rss_at_start_kib %ld cpu_total_ms %.2f\n", rss_start, proto_cpu_ms());
	return exit_code;
}
