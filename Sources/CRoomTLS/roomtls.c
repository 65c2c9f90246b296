// See include/roomtls.h. OpenSSL 3 (Debian libssl-dev), memory BIOs only.
#include "roomtls.h"
#include <openssl/ssl.h>
#include <openssl/err.h>
#include <openssl/x509v3.h>
#include <openssl/pem.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <string.h>
#include <stdlib.h>

_Static_assert(ROOMTLS_V_ERR_UNABLE_TO_GET_ISSUER_CERT == X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT, "X509_V_ERR");
_Static_assert(ROOMTLS_V_ERR_CERT_NOT_YET_VALID == X509_V_ERR_CERT_NOT_YET_VALID, "X509_V_ERR");
_Static_assert(ROOMTLS_V_ERR_CERT_HAS_EXPIRED == X509_V_ERR_CERT_HAS_EXPIRED, "X509_V_ERR");
_Static_assert(ROOMTLS_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT == X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT, "X509_V_ERR");
_Static_assert(ROOMTLS_V_ERR_SELF_SIGNED_CERT_IN_CHAIN == X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN, "X509_V_ERR");
_Static_assert(ROOMTLS_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY == X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY, "X509_V_ERR");
_Static_assert(ROOMTLS_V_ERR_UNABLE_TO_VERIFY_LEAF_SIGNATURE == X509_V_ERR_UNABLE_TO_VERIFY_LEAF_SIGNATURE, "X509_V_ERR");
_Static_assert(ROOMTLS_V_ERR_HOSTNAME_MISMATCH == X509_V_ERR_HOSTNAME_MISMATCH, "X509_V_ERR");
_Static_assert(ROOMTLS_V_ERR_IP_ADDRESS_MISMATCH == X509_V_ERR_IP_ADDRESS_MISMATCH, "X509_V_ERR");

struct roomtls_context {
    SSL_CTX *ctx;
};

struct roomtls_conn {
    SSL *ssl;
    BIO *rbio;  // ciphertext from the peer (owned by ssl)
    BIO *wbio;  // ciphertext to the peer (owned by ssl)
    int accept_untrusted_chain;
    int verify_error;
    X509 *leaf;  // the peer's certificate, kept from the verify callback
    char error[256];
};

static int conn_index = -1;

static void put(char *buffer, size_t size, const char *text) {
    if (size == 0) return;
    snprintf(buffer, size, "%s", text);
}

/// The reason of the most recent OpenSSL error on this thread ("" when none), then clears it.
static void take_openssl_error(char *buffer, size_t size) {
    unsigned long code, last = 0;
    while ((code = ERR_get_error()) != 0) last = code;
    if (size == 0) return;
    buffer[0] = 0;
    if (last == 0) return;
    const char *reason = ERR_reason_error_string(last);
    if (reason) put(buffer, size, reason); else ERR_error_string_n(last, buffer, size);
}

static int index_once(void) {
    // Called from the one loop thread that creates contexts; OpenSSL's own init is thread-safe.
    if (conn_index < 0) {
        // Before anything else initialises OpenSSL with its defaults: no system openssl.cnf (the
        // settings that matter are set here, the same on every host, and the file's providers
        // and policies are not loaded into roomd). Error texts stay: they are the reasons an
        // installer reads (OpenSSL cannot load them later once told not to at init).
        OPENSSL_init_ssl(OPENSSL_INIT_NO_LOAD_CONFIG, NULL);
        conn_index = SSL_get_ex_new_index(0, "roomtls_conn", NULL, NULL, NULL);
    }
    return conn_index;
}

static SSL_CTX *new_ctx(const SSL_METHOD *method, char *err, size_t err_size) {
    ERR_clear_error();
    SSL_CTX *ctx = SSL_CTX_new(method);
    if (!ctx) {
        char reason[200];
        take_openssl_error(reason, sizeof reason);
        snprintf(err, err_size, "cannot create a TLS context: %s", reason);
        return NULL;
    }
    // TLS 1.3 only: no downgrade to weaker versions or cipher suites is possible.
    SSL_CTX_set_min_proto_version(ctx, TLS1_3_VERSION);
    SSL_CTX_set_max_proto_version(ctx, TLS1_3_VERSION);
    // Read and write buffers are freed while idle: a server holds thousands of connections.
    SSL_CTX_set_mode(ctx, SSL_MODE_RELEASE_BUFFERS);
    SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
    return ctx;
}

/// OpenSSL's default when a PEM key is encrypted is to ask for the passphrase on the controlling
/// terminal: a server started by hand would sit waiting at the prompt, and there is nobody to
/// answer under systemd. This answers "no passphrase" at once and notes that one was asked for.
static int refuse_passphrase(char *buf, int size, int rwflag, void *asked) {
    (void)buf; (void)size; (void)rwflag;
    *(int *)asked = 1;
    return 0;
}

roomtls_context *roomtls_server_context(const char *chain_file, const char *key_file, char *err, size_t err_size) {
    index_once();
    SSL_CTX *ctx = new_ctx(TLS_server_method(), err, err_size);
    if (!ctx) return NULL;
    int passphrase_asked = 0;
    SSL_CTX_set_default_passwd_cb(ctx, refuse_passphrase);
    SSL_CTX_set_default_passwd_cb_userdata(ctx, &passphrase_asked);
    // No resumption: a ticket would be extra bytes after the handshake and a key to rotate.
    SSL_CTX_set_num_tickets(ctx, 0);
    char reason[200];
    ERR_clear_error();
    if (SSL_CTX_use_certificate_chain_file(ctx, chain_file) != 1) {
        take_openssl_error(reason, sizeof reason);
        snprintf(err, err_size, "%s: cannot load the certificate chain: %s", chain_file, reason);
        SSL_CTX_free(ctx);
        return NULL;
    }
    if (SSL_CTX_use_PrivateKey_file(ctx, key_file, SSL_FILETYPE_PEM) != 1) {
        take_openssl_error(reason, sizeof reason);
        if (passphrase_asked)
            snprintf(err, err_size, "%s: the private key is encrypted with a passphrase, which nobody can type for a "
                     "service: store it unencrypted, readable only by the service's user "
                     "(openssl pkey -in %s -out NEW.key)", key_file, key_file);
        else
            snprintf(err, err_size, "%s: cannot load the private key: %s", key_file, reason);
        SSL_CTX_free(ctx);
        return NULL;
    }
    if (SSL_CTX_check_private_key(ctx) != 1) {
        take_openssl_error(reason, sizeof reason);
        snprintf(err, err_size, "%s: the key does not belong to the certificate in %s: %s", key_file, chain_file, reason);
        SSL_CTX_free(ctx);
        return NULL;
    }
    roomtls_context *context = calloc(1, sizeof *context);
    if (!context) { SSL_CTX_free(ctx); put(err, err_size, "out of memory"); return NULL; }
    context->ctx = ctx;
    return context;
}

/// Keeps the leaf certificate and the first verification error; in pin-only mode, lets
/// chain-of-trust errors pass (the pin is checked after the handshake) but not expiry or name.
static int verify_callback(int ok, X509_STORE_CTX *store) {
    SSL *ssl = X509_STORE_CTX_get_ex_data(store, SSL_get_ex_data_X509_STORE_CTX_idx());
    roomtls_conn *conn = ssl ? SSL_get_ex_data(ssl, conn_index) : NULL;
    if (!conn) return ok;
    if (!conn->leaf) {
        X509 *leaf = X509_STORE_CTX_get0_cert(store);
        if (leaf && X509_up_ref(leaf) == 1) conn->leaf = leaf;
    }
    if (ok) return 1;
    int error = X509_STORE_CTX_get_error(store);
    if (conn->accept_untrusted_chain) {
        switch (error) {
        case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT:
        case X509_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY:
        case X509_V_ERR_UNABLE_TO_VERIFY_LEAF_SIGNATURE:
        case X509_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT:
        case X509_V_ERR_SELF_SIGNED_CERT_IN_CHAIN:
        case X509_V_ERR_CERT_UNTRUSTED:
        case X509_V_ERR_INVALID_CA:
            return 1;
        default:
            break;
        }
    }
    if (conn->verify_error == 0) conn->verify_error = error;
    return 0;
}

roomtls_context *roomtls_client_context(const char *ca_file, int use_system_store, char *err, size_t err_size) {
    index_once();
    SSL_CTX *ctx = new_ctx(TLS_client_method(), err, err_size);
    if (!ctx) return NULL;
    char reason[200];
    ERR_clear_error();
    if (ca_file) {
        if (SSL_CTX_load_verify_locations(ctx, ca_file, NULL) != 1) {
            take_openssl_error(reason, sizeof reason);
            snprintf(err, err_size, "%s: cannot load CA certificates: %s", ca_file, reason);
            SSL_CTX_free(ctx);
            return NULL;
        }
    } else if (use_system_store) {
        SSL_CTX_set_default_verify_paths(ctx);
    }
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, verify_callback);
    roomtls_context *context = calloc(1, sizeof *context);
    if (!context) { SSL_CTX_free(ctx); put(err, err_size, "out of memory"); return NULL; }
    context->ctx = ctx;
    return context;
}

void roomtls_context_free(roomtls_context *context) {
    if (!context) return;
    SSL_CTX_free(context->ctx);  // reference counted: connections made on it keep it alive
    free(context);
}

roomtls_conn *roomtls_conn_new(roomtls_context *context, int is_server, const char *server_name,
                               int accept_untrusted_chain, char *err, size_t err_size) {
    ERR_clear_error();
    roomtls_conn *conn = calloc(1, sizeof *conn);
    if (!conn) { put(err, err_size, "out of memory"); return NULL; }
    conn->accept_untrusted_chain = accept_untrusted_chain;
    conn->ssl = SSL_new(context->ctx);
    conn->rbio = BIO_new(BIO_s_mem());
    conn->wbio = BIO_new(BIO_s_mem());
    if (!conn->ssl || !conn->rbio || !conn->wbio) {
        char reason[200];
        take_openssl_error(reason, sizeof reason);
        snprintf(err, err_size, "cannot create a TLS connection: %s", reason);
        if (conn->ssl) SSL_free(conn->ssl);
        BIO_free(conn->rbio);
        BIO_free(conn->wbio);
        free(conn);
        return NULL;
    }
    // An empty input buffer means "more to come", not end of file.
    BIO_set_mem_eof_return(conn->rbio, -1);
    BIO_set_mem_eof_return(conn->wbio, -1);
    SSL_set_bio(conn->ssl, conn->rbio, conn->wbio);
    SSL_set_ex_data(conn->ssl, conn_index, conn);
    if (is_server) {
        SSL_set_accept_state(conn->ssl);
    } else {
        SSL_set_connect_state(conn->ssl);
        if (server_name && server_name[0]) {
            X509_VERIFY_PARAM *param = SSL_get0_param(conn->ssl);
            ASN1_OCTET_STRING *ip = a2i_IPADDRESS(server_name);
            int ok;
            if (ip) {
                // An address: matched against the certificate's IP entries; no SNI (RFC 6066
                // forbids literal addresses there).
                ASN1_OCTET_STRING_free(ip);
                ok = X509_VERIFY_PARAM_set1_ip_asc(param, server_name);
            } else {
                X509_VERIFY_PARAM_set_hostflags(param, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
                ok = SSL_set1_host(conn->ssl, server_name) == 1 && SSL_set_tlsext_host_name(conn->ssl, server_name) == 1;
            }
            if (!ok) {
                snprintf(err, err_size, "\"%s\" is not a usable server name", server_name);
                roomtls_conn_free(conn);
                return NULL;
            }
        }
    }
    return conn;
}

void roomtls_conn_free(roomtls_conn *conn) {
    if (!conn) return;
    SSL_free(conn->ssl);  // frees both BIOs
    X509_free(conn->leaf);
    free(conn);
}

int roomtls_feed(roomtls_conn *conn, const void *bytes, size_t count) {
    if (count == 0) return 0;
    if (count > 0x7fffffff) return -1;
    return BIO_write(conn->rbio, bytes, (int)count) == (int)count ? 0 : -1;
}

size_t roomtls_output_size(roomtls_conn *conn) { return BIO_ctrl_pending(conn->wbio); }

size_t roomtls_take_output(roomtls_conn *conn, void *buffer, size_t capacity) {
    if (capacity > 0x7fffffff) capacity = 0x7fffffff;
    int n = BIO_read(conn->wbio, buffer, (int)capacity);
    return n > 0 ? (size_t)n : 0;
}

/// Maps an SSL_get_error result; records the reason of a failure.
static int outcome(roomtls_conn *conn, int rc) {
    int e = SSL_get_error(conn->ssl, rc);
    switch (e) {
    case SSL_ERROR_WANT_READ:
    case SSL_ERROR_WANT_WRITE:
        return ROOMTLS_WANT_MORE;
    case SSL_ERROR_ZERO_RETURN:
        return ROOMTLS_CLOSED;
    default:
        take_openssl_error(conn->error, sizeof conn->error);
        if (!conn->error[0]) put(conn->error, sizeof conn->error, e == SSL_ERROR_SYSCALL ? "unexpected end of the connection" : "protocol error");
        return ROOMTLS_FAILED;
    }
}

int roomtls_handshake(roomtls_conn *conn) {
    ERR_clear_error();
    int rc = SSL_do_handshake(conn->ssl);
    if (rc == 1) return ROOMTLS_DONE;
    return outcome(conn, rc);
}

long roomtls_read(roomtls_conn *conn, void *buffer, size_t capacity) {
    if (capacity == 0) return ROOMTLS_WANT_MORE;
    if (capacity > 0x7fffffff) capacity = 0x7fffffff;
    ERR_clear_error();
    int rc = SSL_read(conn->ssl, buffer, (int)capacity);
    if (rc > 0) return rc;
    return outcome(conn, rc);
}

size_t roomtls_buffered_input(roomtls_conn *conn) {
    return (size_t)SSL_pending(conn->ssl) + BIO_ctrl_pending(conn->rbio);
}

long roomtls_write(roomtls_conn *conn, const void *bytes, size_t count) {
    if (count == 0) return 0;
    if (count > 0x7fffffff) return ROOMTLS_FAILED;
    ERR_clear_error();
    // A memory BIO takes everything, so one call encrypts all of it (or fails).
    int rc = SSL_write(conn->ssl, bytes, (int)count);
    if (rc == (int)count) return rc;
    int r = outcome(conn, rc);
    return r == ROOMTLS_WANT_MORE ? ROOMTLS_FAILED : r;
}

void roomtls_shutdown(roomtls_conn *conn) {
    ERR_clear_error();
    if (SSL_is_init_finished(conn->ssl)) SSL_shutdown(conn->ssl);
    ERR_clear_error();
}

void roomtls_error_text(roomtls_conn *conn, char *buffer, size_t size) { put(buffer, size, conn->error); }

int roomtls_verify_error(roomtls_conn *conn) { return conn->verify_error; }

const char *roomtls_verify_error_string(int code) { return X509_verify_cert_error_string(code); }

static void append(char *buffer, size_t size, size_t *used, const char *text, size_t length) {
    if (*used + 2 + length + 1 > size) return;
    if (*used > 0) { memcpy(buffer + *used, ", ", 2); *used += 2; }
    memcpy(buffer + *used, text, length);
    *used += length;
    buffer[*used] = 0;
}

int roomtls_peer_names(roomtls_conn *conn, char *buffer, size_t size) {
    if (size == 0) return 0;
    buffer[0] = 0;
    X509 *cert = conn->leaf;
    if (!cert) return 0;
    size_t used = 0;
    GENERAL_NAMES *names = X509_get_ext_d2i(cert, NID_subject_alt_name, NULL, NULL);
    if (names) {
        for (int i = 0; i < sk_GENERAL_NAME_num(names); i++) {
            const GENERAL_NAME *name = sk_GENERAL_NAME_value(names, i);
            if (name->type == GEN_DNS) {
                const unsigned char *text = ASN1_STRING_get0_data(name->d.dNSName);
                append(buffer, size, &used, (const char *)text, (size_t)ASN1_STRING_length(name->d.dNSName));
            } else if (name->type == GEN_IPADD) {
                const ASN1_OCTET_STRING *ip = name->d.iPAddress;
                char line[64] = "";
                if (ASN1_STRING_length(ip) == 4) {
                    const unsigned char *b = ASN1_STRING_get0_data(ip);
                    snprintf(line, sizeof line, "%u.%u.%u.%u", b[0], b[1], b[2], b[3]);
                } else if (ASN1_STRING_length(ip) == 16) {
                    const unsigned char *b = ASN1_STRING_get0_data(ip);
                    size_t n = 0;
                    for (int k = 0; k < 16; k += 2) n += (size_t)snprintf(line + n, sizeof line - n, k ? ":%x" : "%x", (b[k] << 8) | b[k + 1]);
                }
                append(buffer, size, &used, line, strlen(line));
            }
        }
        GENERAL_NAMES_free(names);
    }
    if (used == 0) {
        char cn[256];
        int n = X509_NAME_get_text_by_NID(X509_get_subject_name(cert), NID_commonName, cn, sizeof cn);
        if (n > 0) append(buffer, size, &used, cn, strlen(cn));
    }
    return used > 0;
}

int roomtls_peer_not_after(roomtls_conn *conn, char *buffer, size_t size) {
    if (size == 0) return 0;
    buffer[0] = 0;
    if (!conn->leaf) return 0;
    BIO *mem = BIO_new(BIO_s_mem());
    if (!mem) return 0;
    int ok = ASN1_TIME_print(mem, X509_get0_notAfter(conn->leaf));
    int n = ok ? BIO_read(mem, buffer, (int)(size - 1)) : 0;
    buffer[n > 0 ? n : 0] = 0;
    BIO_free(mem);
    return n > 0;
}

/// "sha256/" + base64(SHA-256(DER SubjectPublicKeyInfo)), the spelling of HPKP (RFC 7469).
static int spki_pin(X509 *cert, char *buffer, size_t size) {
    unsigned char *der = NULL;
    int length = i2d_X509_PUBKEY(X509_get_X509_PUBKEY(cert), &der);
    if (length <= 0) return 0;
    unsigned char digest[32];
    unsigned int digest_length = 0;
    int ok = EVP_Digest(der, (size_t)length, digest, &digest_length, EVP_sha256(), NULL);
    OPENSSL_free(der);
    if (!ok || digest_length != 32) return 0;
    unsigned char encoded[48];
    EVP_EncodeBlock(encoded, digest, 32);
    snprintf(buffer, size, "sha256/%s", (const char *)encoded);
    return 1;
}

int roomtls_peer_spki_pin(roomtls_conn *conn, char *buffer, size_t size) {
    if (size == 0) return 0;
    buffer[0] = 0;
    X509 *cert = SSL_get0_peer_certificate(conn->ssl);
    if (!cert) cert = conn->leaf;
    return cert ? spki_pin(cert, buffer, size) : 0;
}

void roomtls_session_description(roomtls_conn *conn, char *buffer, size_t size) {
    const SSL_CIPHER *cipher = SSL_get_current_cipher(conn->ssl);
    snprintf(buffer, size, "%s %s", SSL_get_version(conn->ssl), cipher ? SSL_CIPHER_get_name(cipher) : "(none)");
}

int roomtls_file_spki_pin(const char *path, char *buffer, size_t size, char *err, size_t err_size) {
    ERR_clear_error();
    BIO *file = BIO_new_file(path, "r");
    if (!file) {
        char reason[200];
        take_openssl_error(reason, sizeof reason);
        snprintf(err, err_size, "%s: cannot open: %s", path, reason);
        return 0;
    }
    X509 *cert = PEM_read_bio_X509(file, NULL, NULL, NULL);
    BIO_free(file);
    if (!cert) {
        char reason[200];
        take_openssl_error(reason, sizeof reason);
        snprintf(err, err_size, "%s: no PEM certificate: %s", path, reason);
        return 0;
    }
    int ok = spki_pin(cert, buffer, size);
    X509_free(cert);
    if (!ok) put(err, err_size, "cannot encode the public key");
    return ok;
}
