/*
 * sofia-sip (1.12.11) SIP prototype for issue 29: the same job as libre/proto_re.c —
 * REGISTER with digest auth at the test kamailio, INVITE sip:far@ (baresip, auto-answer), BYE
 * after 2 s, un-REGISTER, exit — through sofia's high-level "nua" API. nua runs on sofia's own
 * event loop (su_root_run); there is no public call that hands its descriptors and timers to
 * another loop (su_root_step polls once; GLib integration exists). It prints the number of
 * threads the process has once registered.
 *
 *   usage: proto_sofia KAMAILIO_PORT [PASSWORD] [--stay SECONDS]
 *   --stay: after registering, wait SECONDS without calling (to receive an INVITE instead).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sofia-sip/nua.h>
#include <sofia-sip/su_tag_io.h>
#include <sofia-sip/sip_status.h>
#include "../common/measure.h"

static su_root_t *root;
static nua_t *nua;
static nua_handle_t *reg, *call;
static char aor[128], registrar[128], callee[128], auth[160];
static const char *password = "room-secret";
static int exit_code = 1, stay_seconds = -1;
static double cpu_start;

static const char *sdp_offer =
	"v=0\r\no=room 1 1 IN IP4 127.0.0.1\r\ns=-\r\nc=IN IP4 127.0.0.1\r\nt=0 0\r\n"
	"m=audio 40000 RTP/AVP 111 9 0 8 101\r\n"
	"a=rtpmap:111 opus/48000/2\r\na=fmtp:111 minptime=10;useinbandfec=1\r\n"
	"a=rtpmap:9 G722/8000\r\na=rtpmap:0 PCMU/8000\r\na=rtpmap:8 PCMA/8000\r\n"
	"a=rtpmap:101 telephone-event/8000\r\na=fmtp:101 0-15\r\n";

static long threads(void)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	long n = -1;
	while (f && fgets(line, sizeof line, f))
		if (sscanf(line, "Threads: %ld", &n) == 1)
			break;
	if (f)
		fclose(f);
	return n;
}

static void hangup(su_root_magic_t *m, su_timer_t *t, su_timer_arg_t *a)
{
	(void)m;
	(void)a;
	su_timer_destroy(t);
	printf("hangup after 2 s\n");
	nua_bye(call, TAG_END());
}

static void place_call(void)
{
	call = nua_handle(nua, NULL, SIPTAG_TO_STR(callee), TAG_END());
	nua_invite(call, SOATAG_USER_SDP_STR(sdp_offer), TAG_END());
}

static void stay_over(su_root_magic_t *m, su_timer_t *t, su_timer_arg_t *a)
{
	(void)m;
	(void)a;
	su_timer_destroy(t);
	printf("stayed %d s, rss_kib %ld\n", stay_seconds, proto_rss_kib());
	exit_code = 0;
	nua_unregister(reg, TAG_END());
}

static void event_cb(nua_event_t event, int status, char const *phrase, nua_t *n,
		     nua_magic_t *magic, nua_handle_t *nh, nua_hmagic_t *hmagic, sip_t const *sip,
		     tagi_t tags[])
{
	(void)n;
	(void)magic;
	(void)hmagic;
	(void)sip;
	switch (event) {
	case nua_r_register:
	case nua_r_invite:
		if (status == 401 || status == 407) {
			static int tries;
			if (++tries > 4) {
				printf("%s failed: %d %s\n", nua_event_name(event), status, phrase);
				nua_shutdown(nua);
				return;
			}
			nua_authenticate(nh, NUTAG_AUTH(auth), TAG_END());
		} else if (status >= 300) {
			printf("%s failed: %d %s\n", nua_event_name(event), status, phrase);
			nua_shutdown(nua);
		} else if (status >= 200 && event == nua_r_register) {
			printf("registered (%d), rss_kib %ld, threads %ld\n", status, proto_rss_kib(),
			       threads());
			if (stay_seconds >= 0)
				su_timer_set(su_timer_create(su_root_task(root), stay_seconds * 1000),
					     stay_over, NULL);
			else
				place_call();
		}
		break;
	case nua_i_state: {
		int state = nua_callstate_init;
		tl_gets(tags, NUTAG_CALLSTATE_REF(state), TAG_END());
		if (state == nua_callstate_ready && nh == call) {
			printf("call established\n");
			su_timer_set(su_timer_create(su_root_task(root), 2000), hangup, NULL);
		}
		break;
	}
	case nua_i_invite:
		printf("incoming INVITE answered 486\n");
		nua_respond(nh, SIP_486_BUSY_HERE, TAG_END());
		break;
	case nua_r_bye:
		if (status >= 200) {
			exit_code = 0;
			nua_unregister(reg, TAG_END());
		}
		break;
	case nua_r_unregister:
		if (status == 401 || status == 407)
			nua_authenticate(nh, NUTAG_AUTH(auth), TAG_END());
		else if (status >= 200)
			nua_shutdown(nua);
		break;
	case nua_r_shutdown:
		if (status >= 200)
			su_root_break(root);
		break;
	default:
		break;
	}
}

int main(int argc, char **argv)
{
	if (argc < 2)
		return 2;
	for (int i = 2; i < argc; i++) {
		if (!strcmp(argv[i], "--stay") && i + 1 < argc)
			stay_seconds = atoi(argv[++i]);
		else
			password = argv[i];
	}
	cpu_start = proto_cpu_ms();
	long rss_start = proto_rss_kib();
	snprintf(aor, sizeof aor, "sip:room@127.0.0.1:%s", argv[1]);
	snprintf(registrar, sizeof registrar, "sip:127.0.0.1:%s", argv[1]);
	snprintf(callee, sizeof callee, "sip:far@127.0.0.1:%s", argv[1]);
	snprintf(auth, sizeof auth, "Digest:\"127.0.0.1\":room:%s", password);

	su_init();
	root = su_root_create(NULL);
	nua = nua_create(root, event_cb, NULL, NUTAG_URL("sip:127.0.0.1:*"),
			 SIPTAG_FROM_STR(aor), TAG_END());
	if (!nua) {
		printf("nua_create failed\n");
		return 1;
	}
	reg = nua_handle(nua, NULL, SIPTAG_TO_STR(aor), TAG_END());
	nua_register(reg, NUTAG_REGISTRAR(registrar), TAG_END());
	su_root_run(root);
	nua_destroy(nua);
	su_root_destroy(root);
	su_deinit();
	printf("rss_at_start_kib %ld cpu_total_ms %.2f\n", rss_start, proto_cpu_ms());
	return exit_code;
}
