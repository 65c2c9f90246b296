// libsrtp2 (Debian's libsrtp2-dev). srtp_policy_t is a C struct with nested policies and a raw key
// pointer; filling it from Swift is clumsy and easy to get wrong, so the functions below build
// the policies roomd uses (GCM for rooms, AES-CM for SDES calls) and create the session.
#ifndef ROOMD_CSRTP_SHIM_H
#define ROOMD_CSRTP_SHIM_H
#include <srtp2/srtp.h>
#include <string.h>
#include <arpa/inet.h>

/// Finishes `policy` (its crypto policies set) for every SSRC of one direction — `outbound`
/// nonzero protects (sender), zero unprotects (receiver) — and creates the session. `key` is the
/// master key followed by the master salt; `window` is the replay window in packets (libsrtp
/// accepts 64...32768).
static inline srtp_err_status_t roomd_srtp_create_session(srtp_t *session, srtp_policy_t *policy, const unsigned char *key,
                                                          int outbound, unsigned long window) {
    policy->ssrc.type = outbound ? ssrc_any_outbound : ssrc_any_inbound;
    policy->key = (unsigned char *)key;
    policy->window_size = window;
    policy->allow_repeat_tx = 0;
    policy->next = NULL;
    return srtp_create(session, policy);
}

/// An SRTP session for AEAD_AES_128_GCM (RFC 7714, 16-byte tag): `key` = 16 bytes of master key
/// and 12 of salt.
static inline srtp_err_status_t roomd_srtp_create_gcm128(srtp_t *session, const unsigned char *key, int outbound,
                                                         unsigned long window) {
    srtp_policy_t policy;
    memset(&policy, 0, sizeof policy);
    srtp_crypto_policy_set_aes_gcm_128_16_auth(&policy.rtp);
    srtp_crypto_policy_set_aes_gcm_128_16_auth(&policy.rtcp);
    return roomd_srtp_create_session(session, &policy, key, outbound, window);
}

/// The same for SDES-keyed SIP calls (RFC 4568), whose peers mostly offer AES_CM_128 with
/// HMAC-SHA1: `key` = 16 bytes of master key and 14 of salt; `tag80` nonzero for the 80-bit tag
/// (AES_CM_128_HMAC_SHA1_80), zero for the 32-bit one (…_32, RTP only; RTCP keeps 80 bits as
/// RFC 4568 §6.2.1 says).
static inline srtp_err_status_t roomd_srtp_create_aes_cm128(srtp_t *session, const unsigned char *key, int tag80,
                                                            int outbound, unsigned long window) {
    srtp_policy_t policy;
    memset(&policy, 0, sizeof policy);
    if (tag80)
        srtp_crypto_policy_set_aes_cm_128_hmac_sha1_80(&policy.rtp);
    else
        srtp_crypto_policy_set_aes_cm_128_hmac_sha1_32(&policy.rtp);
    srtp_crypto_policy_set_aes_cm_128_hmac_sha1_80(&policy.rtcp);
    return roomd_srtp_create_session(session, &policy, key, outbound, window);
}

/// srtp_remove_stream takes the SSRC in network byte order.
static inline srtp_err_status_t roomd_srtp_remove_ssrc(srtp_t session, unsigned int ssrc) {
    return srtp_remove_stream(session, htonl(ssrc));
}
#endif
