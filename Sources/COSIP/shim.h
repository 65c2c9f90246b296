// libosip2 for RoomSIP (docs/calls.md, "Why libosip2"): the SIP parser and transaction state
// machines, no I/O. osip's accessors for header lists are macros and its header includes
// assume <stdbool.h> and <sys/time.h>, so this header includes those first and turns each
// macro RoomSIP needs into a static inline function Swift can call.
#ifndef COSIP_SHIM_H
#define COSIP_SHIM_H
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <time.h>
#include <sys/time.h>
#include <osip2/osip.h>

/// osip prints its own errors to stdout by default (`| ERROR | … Final CRLF is missing`): a
/// malformed datagram would write to roomd's stdout. RoomSIP reports what it drops itself.
static inline void cosip_trace_off(void)
{
	for (int level = 0; level < END_TRACE_LEVEL; level++)
		osip_trace_disable_level((osip_trace_level_t)level);
}

static inline osip_www_authenticate_t *cosip_www_authenticate(osip_message_t *m, int pos)
{
	osip_www_authenticate_t *h = NULL;
	return osip_message_get_www_authenticate(m, pos, &h) >= 0 ? h : NULL;
}

static inline osip_proxy_authenticate_t *cosip_proxy_authenticate(osip_message_t *m, int pos)
{
	osip_proxy_authenticate_t *h = NULL;
	return osip_message_get_proxy_authenticate(m, pos, &h) >= 0 ? h : NULL;
}

static inline osip_contact_t *cosip_contact(osip_message_t *m, int pos)
{
	osip_contact_t *h = NULL;
	return osip_message_get_contact(m, pos, &h) >= 0 ? h : NULL;
}

/// A contact's `expires` parameter, or NULL.
static inline const char *cosip_contact_expires(osip_contact_t *c)
{
	osip_generic_param_t *p = NULL;
	return osip_contact_param_get_byname(c, "expires", &p) >= 0 && p ? p->gvalue : NULL;
}

/// The value of the first header called `name` (case-insensitive), or NULL: for the headers
/// osip keeps as plain name/value pairs (Expires, Min-Expires).
static inline const char *cosip_header(osip_message_t *m, const char *name)
{
	osip_header_t *h = NULL;
	return osip_message_header_get_byname(m, name, 0, &h) >= 0 && h ? h->hvalue : NULL;
}

/// Frees what osip allocated for the caller (osip_message_to_str, osip_uri_to_str).
static inline void cosip_free(void *p) { osip_free(p); }

/// Milliseconds until osip's next transaction timer is due (rounded up), or -1 when none is.
static inline long cosip_next_timeout_ms(osip_t *osip)
{
	struct timeval tv = { 365 * 24 * 3600, 0 };
	osip_timers_gettimeout(osip, &tv);
	if (tv.tv_sec >= 3600)
		return -1;
	return (long)tv.tv_sec * 1000 + (tv.tv_usec + 999) / 1000;
}


/// The `tag` parameter of a From or To header, or NULL (no header, no tag).
static inline const char *cosip_tag(osip_from_t *h)
{
	osip_generic_param_t *p = NULL;
	return h && osip_from_get_tag(h, &p) >= 0 && p ? p->gvalue : NULL;
}

/// The `branch` parameter of the top Via, or NULL.
static inline const char *cosip_top_via_branch(osip_message_t *m)
{
	osip_via_t *via = NULL;
	osip_generic_param_t *p = NULL;
	if (osip_message_get_via(m, 0, &via) < 0 || !via)
		return NULL;
	return osip_via_param_get_byname(via, "branch", &p) >= 0 && p ? p->gvalue : NULL;
}

/// The first body's bytes and length, or NULL.
static inline const char *cosip_body(osip_message_t *m, size_t *length)
{
	osip_body_t *b = NULL;
	if (osip_message_get_body(m, 0, &b) < 0 || !b || !b->body)
		return NULL;
	*length = b->length;
	return b->body;
}

/// Whether a parsed message has what osip's transaction matching dereferences without
/// checking: a top Via with a host, From and To with a URI, Call-ID, CSeq with number and
/// method, and for a request its Request-URI. osip_parse accepts a message without To, and
/// osip_find_transaction_and_add_event then reads through the NULL (the sip fuzz target found
/// it with an ACK whose To line was damaged).
static inline bool cosip_is_complete(osip_message_t *m)
{
	osip_via_t *via = NULL;
	if (osip_message_get_via(m, 0, &via) < 0 || !via || !via->host || !via->protocol)
		return false;
	if (!m->from || !m->from->url || !m->to || !m->to->url)
		return false;
	if (!m->call_id || !m->call_id->number || !m->cseq || !m->cseq->number || !m->cseq->method)
		return false;
	if (MSG_IS_REQUEST(m) && (!m->req_uri || !m->sip_method))
		return false;
	return true;
}

static inline bool cosip_is_request(const osip_message_t *m) { return MSG_IS_REQUEST(m); }

static inline bool cosip_is_response(const osip_message_t *m) { return MSG_IS_RESPONSE(m); }
#endif
