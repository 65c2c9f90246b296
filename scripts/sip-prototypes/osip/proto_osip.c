/*
 * libosip2 (5.3.0) SIP prototype for issue 29: the same job as libre/proto_re.c —
 * REGISTER with digest auth at the test kamailio, INVITE sip:far@ (baresip, auto-answer), BYE
 * after 2 s, un-REGISTER, exit. osip2 is a parser plus transaction state machines and nothing
 * else: no sockets, no timers of its own, no digest, no dialog-level requests, no REGISTER
 * refresh (eXosip2, which adds those, is not in bookworm). So this file owns the UDP socket and
 * the epoll loop (which is what roomd wants), and writes what eXosip would: the digest
 * response (RFC 2617 with qop=auth, MD5 from osipparser2), requests as text, the ACK for a 2xx,
 * the route set and remote target for in-dialog requests.
 *
 *   usage: proto_osip KAMAILIO_PORT [PASSWORD]
 */
#include <stdbool.h>
#include <time.h>
#include <sys/time.h>
#include <osip2/osip.h>
#include <osipparser2/osip_md5.h>
#include <osipparser2/sdp_message.h>
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/time.h>
#include <unistd.h>
#include "../common/measure.h"

static osip_t *osip;
static int sock = -1;
static struct sockaddr_in registrar_addr;
static int local_port, kam_port;
static const char *password = "room-secret";
static bool running = true, trace;
static int exit_code = 1;
static double cpu_start;

enum phase { REGISTERING, CALLING, IN_CALL, HANGING_UP, UNREGISTERING } phase;
static unsigned cseq = 1, auth_tries;
static char call_id[64], reg_call_id[64], from_tag[32], to_tag[128];
static char remote_target[256], route_set[512];
static long long hangup_at_ms; /* monotonic deadline of the app's own timer, 0 = none */

static long long now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000LL + ts.tv_nsec / 1000000;
}

static void random_token(char *out, size_t n)
{
	static const char hex[] = "0123456789abcdef";
	for (size_t i = 0; i + 1 < n; i++)
		out[i] = hex[random() & 15];
	out[n - 1] = 0;
}

/* --- digest (RFC 2617, MD5, qop=auth or none) --------------------------------------- */

static void md5_hex(const char *in, char out[33])
{
	osip_MD5_CTX ctx;
	unsigned char d[16];
	osip_MD5Init(&ctx);
	osip_MD5Update(&ctx, (unsigned char *)in, (unsigned)strlen(in));
	osip_MD5Final(d, &ctx);
	for (int i = 0; i < 16; i++)
		sprintf(out + 2 * i, "%02x", d[i]);
}

/* osip keeps the quotes of quoted parameters; this copies without them. */
static void unquote(const char *in, char *out, size_t n)
{
	if (!in) {
		out[0] = 0;
		return;
	}
	size_t len = strlen(in);
	if (len >= 2 && in[0] == '"') {
		in++;
		len -= 2;
	}
	snprintf(out, n, "%.*s", (int)len, in);
}

/* The Authorization (or Proxy-Authorization) header line answering a challenge. */
static int digest_header(osip_www_authenticate_t *ch, bool proxy, const char *method,
			 const char *uri, char *out, size_t n)
{
	char realm[128], nonce[256], qop[64], opaque[256], a1[512], a2[512], ha1[33], ha2[33];
	char resp_in[1024], resp[33], cnonce[17];
	unquote(osip_www_authenticate_get_realm(ch), realm, sizeof realm);
	unquote(osip_www_authenticate_get_nonce(ch), nonce, sizeof nonce);
	unquote(osip_www_authenticate_get_qop_options(ch), qop, sizeof qop);
	unquote(osip_www_authenticate_get_opaque(ch), opaque, sizeof opaque);
	snprintf(a1, sizeof a1, "%s:%s:%s", "room", realm, password);
	snprintf(a2, sizeof a2, "%s:%s", method, uri);
	md5_hex(a1, ha1);
	md5_hex(a2, ha2);
	bool use_qop = strstr(qop, "auth") != NULL;
	random_token(cnonce, sizeof cnonce);
	if (use_qop)
		snprintf(resp_in, sizeof resp_in, "%s:%s:00000001:%s:auth:%s", ha1, nonce, cnonce,
			 ha2);
	else
		snprintf(resp_in, sizeof resp_in, "%s:%s:%s", ha1, nonce, ha2);
	md5_hex(resp_in, resp);
	int len = snprintf(out, n,
			   "%s: Digest username=\"room\", realm=\"%s\", nonce=\"%s\", uri=\"%s\", "
			   "response=\"%s\", algorithm=MD5",
			   proxy ? "Proxy-Authorization" : "Authorization", realm, nonce, uri, resp);
	if (use_qop)
		len += snprintf(out + len, n - len, ", qop=auth, nc=00000001, cnonce=\"%s\"", cnonce);
	if (opaque[0])
		len += snprintf(out + len, n - len, ", opaque=\"%s\"", opaque);
	return snprintf(out + len, n - len, "\r\n") > 0 ? 0 : -1;
}

/* --- requests as text, parsed into osip messages ------------------------------------ */

static const char *sdp_offer =
	"v=0\r\no=room 1 1 IN IP4 127.0.0.1\r\ns=-\r\nc=IN IP4 127.0.0.1\r\nt=0 0\r\n"
	"m=audio 40000 RTP/AVP 111 9 0 8 101\r\n"
	"a=rtpmap:111 opus/48000/2\r\na=fmtp:111 minptime=10;useinbandfec=1\r\n"
	"a=rtpmap:9 G722/8000\r\na=rtpmap:0 PCMU/8000\r\na=rtpmap:8 PCMA/8000\r\n"
	"a=rtpmap:101 telephone-event/8000\r\na=fmtp:101 0-15\r\na=sendrecv\r\n";

static osip_message_t *build(const char *method, const char *ruri, const char *cid,
			     unsigned seq, const char *to_tag_or_null, const char *extra,
			     const char *body)
{
	char branch[17], text[4096];
	random_token(branch, sizeof branch);
	char to_uri[128];
	snprintf(to_uri, sizeof to_uri, strcmp(method, "REGISTER") ? "sip:far@127.0.0.1:%d"
								   : "sip:room@127.0.0.1:%d",
		 kam_port);
	snprintf(text, sizeof text,
		 "%s %s SIP/2.0\r\n"
		 "Via: SIP/2.0/UDP 127.0.0.1:%d;rport;branch=z9hG4bK%s\r\n"
		 "Max-Forwards: 70\r\n"
		 "From: <sip:room@127.0.0.1:%d>;tag=%s\r\n"
		 "To: <%s>%s%s\r\n"
		 "Call-ID: %s\r\n"
		 "CSeq: %u %s\r\n"
		 "Contact: <sip:room@127.0.0.1:%d>\r\n"
		 "User-Agent: roomd-proto-osip\r\n"
		 "%s"
		 "%s"
		 "Content-Length: %zu\r\n\r\n%s",
		 method, ruri, local_port, branch, kam_port, from_tag, to_uri,
		 to_tag_or_null ? ";tag=" : "", to_tag_or_null ? to_tag_or_null : "", cid, seq,
		 method, local_port, extra ? extra : "",
		 body ? "Content-Type: application/sdp\r\n" : "", body ? strlen(body) : 0,
		 body ? body : "");
	osip_message_t *msg;
	osip_message_init(&msg);
	if (osip_message_parse(msg, text, strlen(text)) != OSIP_SUCCESS) {
		osip_message_free(msg);
		return NULL;
	}
	return msg;
}

static int send_text(const char *buf, size_t len)
{
	if (trace)
		printf(">> %.*s\n", (int)(strchr(buf, '\r') - buf), buf);
	return sendto(sock, buf, len, 0, (struct sockaddr *)&registrar_addr,
		      sizeof registrar_addr) < 0 ? -1 : 0;
}

/* osip hands every message its transactions send (and resend) to this. */
static int send_cb(osip_transaction_t *tr, osip_message_t *msg, char *host, int port, int fd)
{
	(void)tr;
	(void)host;
	(void)port;
	(void)fd;
	char *buf;
	size_t len;
	if (osip_message_to_str(msg, &buf, &len) != OSIP_SUCCESS)
		return -1;
	int r = send_text(buf, len);
	osip_free(buf);
	return r;
}

static void start_transaction(osip_message_t *msg)
{
	osip_transaction_t *tr;
	osip_fsm_type_t type = MSG_IS_INVITE(msg) ? ICT : NICT;
	if (osip_transaction_init(&tr, type, osip, msg) != OSIP_SUCCESS) {
		osip_message_free(msg);
		running = false;
		return;
	}
	osip_transaction_add_event(tr, osip_new_outgoing_sipmessage(msg));
}

static void send_register(unsigned expires, const char *auth)
{
	char extra[1200], ruri[64];
	snprintf(ruri, sizeof ruri, "sip:127.0.0.1:%d", kam_port);
	snprintf(extra, sizeof extra, "Expires: %u\r\n%s", expires, auth ? auth : "");
	osip_message_t *m = build("REGISTER", ruri, reg_call_id, cseq++, NULL, extra, NULL);
	if (m)
		start_transaction(m);
}

static void send_invite(const char *auth)
{
	char ruri[64];
	snprintf(ruri, sizeof ruri, "sip:far@127.0.0.1:%d", kam_port);
	osip_message_t *m = build("INVITE", ruri, call_id, cseq++, NULL, auth, sdp_offer);
	if (m)
		start_transaction(m);
}

/* In-dialog requests go to the remote target through the route set (loose routing). */
static void send_in_dialog(const char *method, unsigned seq)
{
	osip_message_t *m = build(method, remote_target, call_id, seq, to_tag, route_set, NULL);
	if (!m)
		return;
	if (!strcmp(method, "ACK")) { /* the 2xx ACK is the UA's, not a transaction's */
		char *buf;
		size_t len;
		if (osip_message_to_str(m, &buf, &len) == OSIP_SUCCESS) {
			send_text(buf, len);
			osip_free(buf);
		}
		osip_message_free(m);
		return;
	}
	start_transaction(m);
}

/* --- what the transactions report ---------------------------------------------------- */

static void retry_with_auth(osip_transaction_t *tr, osip_message_t *resp)
{
	osip_www_authenticate_t *ch = NULL;
	bool proxy = resp->status_code == 407;
	if (proxy)
		osip_message_get_proxy_authenticate(resp, 0, &ch);
	else
		osip_message_get_www_authenticate(resp, 0, &ch);
	char *ruri = NULL, auth[1024];
	osip_uri_to_str(osip_message_get_uri(tr->orig_request), &ruri);
	if (!ch || ++auth_tries > 1 ||
	    digest_header(ch, proxy, tr->orig_request->sip_method, ruri, auth, sizeof auth)) {
		printf("%s failed: %d (wrong password or no challenge)\n",
		       tr->orig_request->sip_method, resp->status_code);
		osip_free(ruri);
		running = false;
		return;
	}
	osip_free(ruri);
	if (phase == CALLING)
		send_invite(auth);
	else
		send_register(phase == UNREGISTERING ? 0 : 60, auth);
}

static void nict_2xx(int type, osip_transaction_t *tr, osip_message_t *resp)
{
	(void)type;
	(void)resp;
	auth_tries = 0;
	if (MSG_IS_REGISTER(tr->orig_request) && phase == REGISTERING) {
		printf("registered (%d), rss_kib %ld\n", resp->status_code, proto_rss_kib());
		phase = CALLING;
		send_invite(NULL);
	} else if (MSG_IS_BYE(tr->orig_request)) {
		phase = UNREGISTERING;
		exit_code = 0;
		send_register(0, NULL);
	} else if (MSG_IS_REGISTER(tr->orig_request) && phase == UNREGISTERING) {
		running = false;
	}
}

static void xxx_4xx(int type, osip_transaction_t *tr, osip_message_t *resp)
{
	(void)type;
	if (resp->status_code == 401 || resp->status_code == 407)
		retry_with_auth(tr, resp);
	else {
		printf("%s failed: %d\n", tr->orig_request->sip_method, resp->status_code);
		running = false;
	}
}

static void ict_2xx(int type, osip_transaction_t *tr, osip_message_t *resp)
{
	(void)type;
	(void)tr;
	osip_generic_param_t *tag = NULL;
	osip_contact_t *contact = NULL;
	char *s = NULL;
	osip_to_get_tag(resp->to, &tag);
	snprintf(to_tag, sizeof to_tag, "%s", tag && tag->gvalue ? tag->gvalue : "");
	osip_message_get_contact(resp, 0, &contact);
	if (!contact || osip_uri_to_str(contact->url, &s) != OSIP_SUCCESS) {
		printf("200 OK without a Contact\n");
		running = false;
		return;
	}
	snprintf(remote_target, sizeof remote_target, "%s", s);
	osip_free(s);
	/* UAC route set: the Record-Route entries in reverse order. */
	route_set[0] = 0;
	for (int i = osip_list_size(&resp->record_routes) - 1; i >= 0; i--) {
		osip_record_route_t *rr = osip_list_get(&resp->record_routes, i);
		if (osip_record_route_to_str(rr, &s) == OSIP_SUCCESS) {
			size_t used = strlen(route_set);
			snprintf(route_set + used, sizeof route_set - used, "Route: %s\r\n", s);
			osip_free(s);
		}
	}
	/* The answer's first payload type, through osip's SDP parser. */
	osip_body_t *body = NULL;
	sdp_message_t *sdp = NULL;
	char *pt = NULL;
	osip_message_get_body(resp, 0, &body);
	if (body && sdp_message_init(&sdp) == 0 && sdp_message_parse(sdp, body->body) == 0)
		pt = sdp_message_m_payload_get(sdp, 0, 0);
	printf("call established, payload type %s\n", pt ? pt : "?");
	sdp_message_free(sdp);
	if (phase == CALLING) {
		unsigned invite_seq = (unsigned)atoi(resp->cseq->number);
		phase = IN_CALL;
		send_in_dialog("ACK", invite_seq);
		hangup_at_ms = now_ms() + 2000;
	}
}

static osip_transaction_t *dead[64];
static int ndead;

static void kill_cb(int type, osip_transaction_t *tr)
{
	(void)type;
	osip_remove_transaction(osip, tr);
	if (ndead < 64)
		dead[ndead++] = tr;
}

/* --- the loop --------------------------------------------------------------------- */

static void on_datagram(void)
{
	char buf[65536];
	ssize_t n = recv(sock, buf, sizeof buf - 1, 0);
	if (n <= 0)
		return;
	buf[n] = 0;
	osip_event_t *evt = osip_parse(buf, (size_t)n);
	if (!evt)
		return; /* unparseable: dropped */
	if (trace)
		printf("<< %d %s\n", evt->sip->status_code,
		       evt->sip->sip_method ? evt->sip->sip_method : "");
	if (osip_find_transaction_and_add_event(osip, evt) != OSIP_SUCCESS) {
		/* a 2xx retransmission after the ICT ended, or a request: ignored here */
		osip_event_free(evt);
	}
}

int main(int argc, char **argv)
{
	if (argc < 2)
		return 2;
	if (argc > 2)
		password = argv[2];
	trace = getenv("PROTO_TRACE") != NULL;
	cpu_start = proto_cpu_ms();
	long rss_start = proto_rss_kib();
	srandom((unsigned)now_ms());
	kam_port = atoi(argv[1]);
	random_token(from_tag, 17);
	random_token(call_id, 33);
	random_token(reg_call_id, 33);

	sock = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	struct sockaddr_in la = { .sin_family = AF_INET };
	la.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	bind(sock, (struct sockaddr *)&la, sizeof la);
	socklen_t sl = sizeof la;
	getsockname(sock, (struct sockaddr *)&la, &sl);
	local_port = ntohs(la.sin_port);
	registrar_addr.sin_family = AF_INET;
	registrar_addr.sin_port = htons(kam_port);
	registrar_addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);

	if (osip_init(&osip) != OSIP_SUCCESS)
		return 1;
	osip_set_cb_send_message(osip, send_cb);
	osip_set_message_callback(osip, OSIP_NICT_STATUS_2XX_RECEIVED, nict_2xx);
	osip_set_message_callback(osip, OSIP_NICT_STATUS_4XX_RECEIVED, xxx_4xx);
	osip_set_message_callback(osip, OSIP_ICT_STATUS_4XX_RECEIVED, xxx_4xx);
	osip_set_message_callback(osip, OSIP_ICT_STATUS_2XX_RECEIVED, ict_2xx);
	osip_set_kill_transaction_callback(osip, OSIP_ICT_KILL_TRANSACTION, kill_cb);
	osip_set_kill_transaction_callback(osip, OSIP_NICT_KILL_TRANSACTION, kill_cb);

	int ep = epoll_create1(EPOLL_CLOEXEC);
	struct epoll_event ev = { .events = EPOLLIN, .data.fd = sock };
	epoll_ctl(ep, EPOLL_CTL_ADD, sock, &ev);

	phase = REGISTERING;
	send_register(60, NULL);
	while (running) {
		osip_ict_execute(osip);
		osip_nict_execute(osip);
		osip_timers_ict_execute(osip);
		osip_timers_nict_execute(osip);
		osip_ict_execute(osip);
		osip_nict_execute(osip);
		for (int i = 0; i < ndead; i++)
			osip_transaction_free2(dead[i]);
		ndead = 0;
		if (!running)
			break;
		struct timeval tv = { 1, 0 };
		osip_timers_gettimeout(osip, &tv);
		long long wait = tv.tv_sec * 1000LL + tv.tv_usec / 1000;
		if (hangup_at_ms) {
			long long left = hangup_at_ms - now_ms();
			if (left < wait)
				wait = left < 0 ? 0 : left;
		}
		struct epoll_event got;
		if (epoll_wait(ep, &got, 1, (int)wait) == 1)
			on_datagram();
		if (hangup_at_ms && now_ms() >= hangup_at_ms) {
			hangup_at_ms = 0;
			printf("hangup after 2 s\n");
			phase = HANGING_UP;
			send_in_dialog("BYE", cseq++);
		}
	}
	osip_release(osip);
	printf("rss_at_start_kib %ld cpu_total_ms %.2f\n", rss_start, proto_cpu_ms());
	return exit_code;
}
