// TLS 1.3 over memory buffers, for RoomTLS (Swift). OpenSSL's API is macros, variadic ctrl
// calls and C callbacks, none of which Swift imports well; this header is plain functions on
// two opaque types instead. It includes no system or OpenSSL header, so the Swift module that
// imports it sees only what is declared here.
//
// No I/O happens here: ciphertext from the network goes in with roomtls_feed, ciphertext to
// send comes out with roomtls_take_output. The caller's non-blocking socket and event loop do
// the rest (no blocking call, no thread).
#ifndef ROOMTLS_H
#define ROOMTLS_H

#include <stddef.h>

typedef struct roomtls_context roomtls_context;
typedef struct roomtls_conn roomtls_conn;

/// Result codes of roomtls_handshake / roomtls_read / roomtls_write.
enum {
    ROOMTLS_DONE = 1,        // handshake complete
    ROOMTLS_WANT_MORE = 0,   // needs more input from the peer
    ROOMTLS_CLOSED = -1,     // the peer sent close_notify
    ROOMTLS_FAILED = -2,     // protocol or verification failure (roomtls_error_text says what)
};

/// A server context: the certificate chain (PEM, leaf first) and its private key (PEM).
/// TLS 1.3 only, no session tickets. NULL on failure, with the reason (naming the file) in err.
roomtls_context *roomtls_server_context(const char *chain_file, const char *key_file, char *err, size_t err_size);

/// A client context. ca_file (PEM, may be NULL): the only trust anchors. With no ca_file and
/// use_system_store set, the system's trust store; with neither, only a pin can make a
/// certificate acceptable.
roomtls_context *roomtls_client_context(const char *ca_file, int use_system_store, char *err, size_t err_size);
void roomtls_context_free(roomtls_context *context);

/// A connection on a context. Client: server_name is checked against the certificate (a DNS
/// name, also sent as SNI; or an IP address, matched against IP SANs). accept_untrusted_chain
/// (pin-only mode): chain-of-trust errors are ignored, expiry and name errors are not.
roomtls_conn *roomtls_conn_new(roomtls_context *context, int is_server, const char *server_name,
                               int accept_untrusted_chain, char *err, size_t err_size);
void roomtls_conn_free(roomtls_conn *conn);

/// Ciphertext received from the peer. Returns 0, or -1 when it could not be buffered.
int roomtls_feed(roomtls_conn *conn, const void *bytes, size_t count);
/// Ciphertext waiting to be sent.
size_t roomtls_output_size(roomtls_conn *conn);
/// Moves up to `capacity` bytes of waiting ciphertext into buffer; returns how many.
size_t roomtls_take_output(roomtls_conn *conn, void *buffer, size_t capacity);

int roomtls_handshake(roomtls_conn *conn);
/// > 0: plaintext bytes read; or ROOMTLS_WANT_MORE, ROOMTLS_CLOSED, ROOMTLS_FAILED.
long roomtls_read(roomtls_conn *conn, void *buffer, size_t capacity);
/// Plaintext decrypted and not yet read, plus ciphertext received and not yet decrypted.
size_t roomtls_buffered_input(roomtls_conn *conn);
/// Encrypts all of bytes into the output; count, or ROOMTLS_FAILED.
long roomtls_write(roomtls_conn *conn, const void *bytes, size_t count);
/// Queues a close_notify alert in the output.
void roomtls_shutdown(roomtls_conn *conn);

/// The last failure's OpenSSL reason ("wrong version number", …) or "" if none was recorded.
void roomtls_error_text(roomtls_conn *conn, char *buffer, size_t size);
/// The first X509_V_ERR_* the verification reported (0: none).
int roomtls_verify_error(roomtls_conn *conn);
/// Text of an X509_V_ERR_* code.
const char *roomtls_verify_error_string(int code);

/// About the server's leaf certificate as seen during verification (0 when there was none):
/// its names (subjectAltName DNS and IP entries, else the subject CN) comma-separated; its
/// notAfter ("Jan  2 03:04:05 2025 GMT"); its SPKI pin "sha256/<base64>".
int roomtls_peer_names(roomtls_conn *conn, char *buffer, size_t size);
int roomtls_peer_not_after(roomtls_conn *conn, char *buffer, size_t size);
int roomtls_peer_spki_pin(roomtls_conn *conn, char *buffer, size_t size);
/// The TLS version and cipher suite negotiated, e.g. "TLSv1.3 TLS_AES_256_GCM_SHA384".
void roomtls_session_description(roomtls_conn *conn, char *buffer, size_t size);

/// The SPKI pin of the first certificate in a PEM file. 1 on success, else 0 with err.
int roomtls_file_spki_pin(const char *path, char *buffer, size_t size, char *err, size_t err_size);

/// The X509_V_ERR_* codes RoomTLS turns into its own wording.
enum {
    ROOMTLS_V_ERR_UNABLE_TO_GET_ISSUER_CERT = 2,
    ROOMTLS_V_ERR_CERT_NOT_YET_VALID = 9,
    ROOMTLS_V_ERR_CERT_HAS_EXPIRED = 10,
    ROOMTLS_V_ERR_DEPTH_ZERO_SELF_SIGNED_CERT = 18,
    ROOMTLS_V_ERR_SELF_SIGNED_CERT_IN_CHAIN = 19,
    ROOMTLS_V_ERR_UNABLE_TO_GET_ISSUER_CERT_LOCALLY = 20,
    ROOMTLS_V_ERR_UNABLE_TO_VERIFY_LEAF_SIGNATURE = 21,
    ROOMTLS_V_ERR_HOSTNAME_MISMATCH = 62,
    ROOMTLS_V_ERR_IP_ADDRESS_MISMATCH = 64,
};

#endif
