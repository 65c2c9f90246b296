// DTLS 1.2 + use_srtp on OpenSSL 3 (roomdtls.h says why the shape). Outgoing datagrams: a BIO
// of our own whose every write is one datagram (OpenSSL writes each record, fragmented to the
// MTU, with one write), so a flight never straddles datagrams the way a memory BIO's byte
// stream would. Incoming: a memory BIO fed one datagram at a time.
#include "roomdtls.h"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/rand.h>
#include <openssl/srtp.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define QUEUE_SLOTS 32
#define SLOT_BYTES 1500

struct roomdtls_identity {
    X509 *cert;
    EVP_PKEY *key;
};

struct roomdtls {
    SSL_CTX *ctx;
    SSL *ssl;
    BIO *in;
    unsigned char queue[QUEUE_SLOTS][SLOT_BYTES];
    size_t lengths[QUEUE_SLOTS];
    int head, count;
    int mtu;
    unsigned int initial_timeout_us;
    char error[256];
};

static void set_err(char *err, size_t size, const char *what) {
    if (!err || size == 0) return;
    unsigned long e = ERR_get_error();
    if (e) {
        char detail[160];
        ERR_error_string_n(e, detail, sizeof detail);
        snprintf(err, size, "%s: %s", what, detail);
    } else {
        snprintf(err, size, "%s", what);
    }
    ERR_clear_error();
}

roomdtls_identity *roomdtls_identity_generate(char *err, size_t err_size) {
    roomdtls_identity *id = calloc(1, sizeof *id);
    if (!id) { set_err(err, err_size, "out of memory"); return NULL; }
    id->key = EVP_EC_gen("P-256");
    id->cert = X509_new();
    if (!id->key || !id->cert) { set_err(err, err_size, "key generation"); roomdtls_identity_free(id); return NULL; }
    X509_set_version(id->cert, 2);
    unsigned char serial[8];
    RAND_bytes(serial, sizeof serial);
    serial[0] &= 0x7F;
    BIGNUM *bn = BN_bin2bn(serial, sizeof serial, NULL);
    BN_to_ASN1_INTEGER(bn, X509_get_serialNumber(id->cert));
    BN_free(bn);
    X509_gmtime_adj(X509_getm_notBefore(id->cert), -3600);
    X509_gmtime_adj(X509_getm_notAfter(id->cert), 30L * 24 * 3600);
    X509_set_pubkey(id->cert, id->key);
    X509_NAME *name = X509_get_subject_name(id->cert);
    X509_NAME_add_entry_by_txt(name, "CN", MBSTRING_ASC, (const unsigned char *)"roomd", -1, -1, 0);
    X509_set_issuer_name(id->cert, name);
    if (X509_sign(id->cert, id->key, EVP_sha256()) <= 0) { set_err(err, err_size, "certificate signing"); roomdtls_identity_free(id); return NULL; }
    return id;
}

void roomdtls_identity_fingerprint(const roomdtls_identity *id, unsigned char out[32]) {
    unsigned int n = 32;
    X509_digest(id->cert, EVP_sha256(), out, &n);
}

void roomdtls_identity_free(roomdtls_identity *id) {
    if (!id) return;
    X509_free(id->cert);
    EVP_PKEY_free(id->key);
    free(id);
}

// The outgoing BIO: each write is one datagram, queued for roomdtls_take.
static int out_write(BIO *b, const char *data, int length) {
    roomdtls *d = BIO_get_data(b);
    if (length <= 0 || length > SLOT_BYTES || d->count == QUEUE_SLOTS) return -1;
    int slot = (d->head + d->count) % QUEUE_SLOTS;
    memcpy(d->queue[slot], data, (size_t)length);
    d->lengths[slot] = (size_t)length;
    d->count++;
    return length;
}

static long out_ctrl(BIO *b, int cmd, long num, void *ptr) {
    (void)num; (void)ptr;
    roomdtls *d = BIO_get_data(b);
    switch (cmd) {
    case BIO_CTRL_FLUSH: return 1;
    case BIO_CTRL_DGRAM_QUERY_MTU: return d->mtu;
    case BIO_CTRL_DGRAM_GET_FALLBACK_MTU: return d->mtu;
    case BIO_CTRL_WPENDING: return 0;
    case BIO_CTRL_PENDING: return 0;
    default: return 0;
    }
}

static int out_create(BIO *b) { BIO_set_init(b, 1); return 1; }

static BIO_METHOD *method;
static pthread_once_t method_once = PTHREAD_ONCE_INIT;

static void make_out_method(void) {
    method = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "roomdtls datagrams");
    BIO_meth_set_write(method, out_write);
    BIO_meth_set_ctrl(method, out_ctrl);
    BIO_meth_set_create(method, out_create);
}

// One method for every endpoint, made once whichever thread comes first.
static BIO_METHOD *out_method(void) {
    pthread_once(&method_once, make_out_method);
    return method;
}

// WebRTC authenticates the peer by the fingerprint in the SDP, checked after the handshake:
// any self-signed certificate is accepted here, and one must be presented.
static int accept_any(int ok, X509_STORE_CTX *store) { (void)ok; (void)store; return 1; }

// Retransmission timer: OpenSSL's default starts at 1 s; a call waits on this handshake, so it
// starts at the caller's value and doubles up to 10 s. OpenSSL measures it on the real clock.
static unsigned int retransmit_timer(SSL *ssl, unsigned int previous_us) {
    roomdtls *d = SSL_get_app_data(ssl);
    if (previous_us == 0) return d->initial_timeout_us;
    unsigned long next = 2UL * previous_us;
    return next > 10000000UL ? 10000000U : (unsigned int)next;
}

roomdtls *roomdtls_new(const roomdtls_identity *id, int is_client, const char *profiles, int mtu, int initial_timeout_ms,
                       char *err, size_t err_size) {
    roomdtls *d = calloc(1, sizeof *d);
    if (!d) { set_err(err, err_size, "out of memory"); return NULL; }
    d->mtu = mtu > 0 && mtu <= SLOT_BYTES ? mtu : 1200;
    d->initial_timeout_us = (unsigned int)(initial_timeout_ms > 0 ? initial_timeout_ms : 1000) * 1000U;
    d->ctx = SSL_CTX_new(DTLS_method());
    if (!d->ctx) { set_err(err, err_size, "DTLS context"); roomdtls_free(d); return NULL; }
    SSL_CTX_set_min_proto_version(d->ctx, DTLS1_2_VERSION);
    SSL_CTX_set_max_proto_version(d->ctx, DTLS1_2_VERSION);
    if (SSL_CTX_use_certificate(d->ctx, id->cert) != 1 || SSL_CTX_use_PrivateKey(d->ctx, id->key) != 1) {
        set_err(err, err_size, "DTLS certificate"); roomdtls_free(d); return NULL;
    }
    SSL_CTX_set_verify(d->ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, accept_any);
    // SSL_CTX_set_tlsext_use_srtp returns 0 on success.
    if (SSL_CTX_set_tlsext_use_srtp(d->ctx, profiles) != 0) { set_err(err, err_size, "SRTP profiles"); roomdtls_free(d); return NULL; }
    SSL_CTX_set_options(d->ctx, SSL_OP_NO_QUERY_MTU);
    d->ssl = SSL_new(d->ctx);
    d->in = BIO_new(BIO_s_mem());
    BIO *out = BIO_new(out_method());
    if (!d->ssl || !d->in || !out) { BIO_free(out); set_err(err, err_size, "DTLS connection"); roomdtls_free(d); return NULL; }
    BIO_set_mem_eof_return(d->in, -1);
    BIO_set_data(out, d);
    SSL_set_bio(d->ssl, d->in, out);
    SSL_set_app_data(d->ssl, d);
    DTLS_set_timer_cb(d->ssl, retransmit_timer);
    DTLS_set_link_mtu(d->ssl, d->mtu);
    SSL_set_mtu(d->ssl, d->mtu);
    if (is_client) SSL_set_connect_state(d->ssl); else SSL_set_accept_state(d->ssl);
    return d;
}

void roomdtls_free(roomdtls *d) {
    if (!d) return;
    if (d->ssl) SSL_free(d->ssl); else BIO_free(d->in);
    SSL_CTX_free(d->ctx);
    free(d);
}

int roomdtls_feed(roomdtls *d, const unsigned char *data, size_t length) {
    return BIO_write(d->in, data, (int)length) == (int)length ? 0 : -1;
}

int roomdtls_step(roomdtls *d) {
    if (SSL_is_init_finished(d->ssl)) {
        // Application data is not used on this path; drain what arrives (alerts included).
        unsigned char sink[1500];
        int n = SSL_read(d->ssl, sink, sizeof sink);
        if (n <= 0 && SSL_get_error(d->ssl, n) == SSL_ERROR_ZERO_RETURN) {
            snprintf(d->error, sizeof d->error, "the peer closed DTLS");
            return ROOMDTLS_FAILED;
        }
        ERR_clear_error();
        return ROOMDTLS_DONE;
    }
    int rc = SSL_do_handshake(d->ssl);
    if (rc == 1) return ROOMDTLS_DONE;
    int e = SSL_get_error(d->ssl, rc);
    if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) { ERR_clear_error(); return ROOMDTLS_WANT_MORE; }
    set_err(d->error, sizeof d->error, "DTLS handshake failed");
    return ROOMDTLS_FAILED;
}

int roomdtls_take(roomdtls *d, unsigned char *out, size_t capacity) {
    if (d->count == 0) return 0;
    size_t n = d->lengths[d->head];
    if (n > capacity) return -1;
    memcpy(out, d->queue[d->head], n);
    d->head = (d->head + 1) % QUEUE_SLOTS;
    d->count--;
    return (int)n;
}

long roomdtls_timeout_ms(roomdtls *d) {
    struct timeval tv;
    if (!DTLSv1_get_timeout(d->ssl, &tv)) return -1;
    return tv.tv_sec * 1000L + tv.tv_usec / 1000;
}

int roomdtls_handle_timeout(roomdtls *d) {
    return DTLSv1_handle_timeout(d->ssl) >= 0 ? 0 : -1;
}

int roomdtls_peer_fingerprint(roomdtls *d, unsigned char out[32]) {
    X509 *peer = SSL_get1_peer_certificate(d->ssl);
    if (!peer) return -1;
    unsigned int n = 32;
    int ok = X509_digest(peer, EVP_sha256(), out, &n);
    X509_free(peer);
    return ok == 1 ? 0 : -1;
}

int roomdtls_srtp_profile(roomdtls *d, char *name, size_t capacity) {
    SRTP_PROTECTION_PROFILE *p = SSL_get_selected_srtp_profile(d->ssl);
    if (!p || !p->name) return -1;
    snprintf(name, capacity, "%s", p->name);
    return 0;
}

int roomdtls_export_srtp_keys(roomdtls *d, unsigned char *out, size_t length) {
    static const char label[] = "EXTRACTOR-dtls_srtp";
    return SSL_export_keying_material(d->ssl, out, length, label, sizeof label - 1, NULL, 0, 0) == 1 ? 0 : -1;
}

const char *roomdtls_error(const roomdtls *d) { return d->error; }
