// DTLS 1.2 with the use_srtp extension (RFC 5764) over datagrams the caller carries, for the
// WebRTC path (issue 12, docs/webrtc.md). Plain functions on opaque types, like CRoomTLS: no
// OpenSSL header reaches Swift, no I/O happens here (datagrams in with roomdtls_feed, out with
// roomdtls_take), no thread. The caller's ICE agent owns the UDP socket.
#ifndef ROOMDTLS_H
#define ROOMDTLS_H

#include <stddef.h>

typedef struct roomdtls_identity roomdtls_identity;
typedef struct roomdtls roomdtls;

enum {
    ROOMDTLS_DONE = 1,       // handshake complete: keys can be exported
    ROOMDTLS_WANT_MORE = 0,  // waiting for the peer (or for a retransmission timeout)
    ROOMDTLS_FAILED = -1,    // protocol failure or an alert (roomdtls_error says what)
};

/// A fresh self-signed certificate (ECDSA P-256, SHA-256, valid 30 days): WebRTC identifies a
/// DTLS endpoint by its certificate's fingerprint in the SDP, not by a CA.
roomdtls_identity *roomdtls_identity_generate(char *err, size_t err_size);
/// SHA-256 of the certificate (DER): what goes in a=fingerprint.
void roomdtls_identity_fingerprint(const roomdtls_identity *identity, unsigned char out[32]);
void roomdtls_identity_free(roomdtls_identity *identity);

/// An endpoint. srtp_profiles: OpenSSL's names, colon-separated, in preference order
/// ("SRTP_AEAD_AES_128_GCM:SRTP_AES128_CM_SHA1_80"). mtu: the largest datagram to send.
/// initial_timeout_ms: the first retransmission timeout (doubling up to 10 s; real time).
roomdtls *roomdtls_new(const roomdtls_identity *identity, int is_client, const char *srtp_profiles, int mtu,
                       int initial_timeout_ms, char *err, size_t err_size);
void roomdtls_free(roomdtls *d);

/// One received datagram (first byte 20..63), then call roomdtls_step.
int roomdtls_feed(roomdtls *d, const unsigned char *data, size_t length);
/// Drives the handshake (a client's first call sends its ClientHello).
int roomdtls_step(roomdtls *d);
/// The next datagram to send into out (at most capacity bytes); 0 when none is waiting.
int roomdtls_take(roomdtls *d, unsigned char *out, size_t capacity);
/// Milliseconds until a retransmission is due, or -1 when none is pending.
long roomdtls_timeout_ms(roomdtls *d);
/// Call when that time has passed: retransmits the last flight.
int roomdtls_handle_timeout(roomdtls *d);

/// After DONE: the SHA-256 fingerprint of the peer's certificate (0 ok, -1 none).
int roomdtls_peer_fingerprint(roomdtls *d, unsigned char out[32]);
/// After DONE: the negotiated SRTP profile's name into name (0 ok, -1 none).
int roomdtls_srtp_profile(roomdtls *d, char *name, size_t capacity);
/// After DONE: RFC 5764 §4.2's keying material ("EXTRACTOR-dtls_srtp"), length bytes.
int roomdtls_export_srtp_keys(roomdtls *d, unsigned char *out, size_t length);
/// Why the last call failed.
const char *roomdtls_error(const roomdtls *d);

#endif
