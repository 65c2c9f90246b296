// AES-128-GCM for libsrtp2 on OpenSSL's EVP, registered with srtp_replace_cipher_type.
//
// Why: Debian builds libsrtp2 on NSS, whose AES-GCM allocates inside every call (10 heap
// allocations per protect + unprotect, measured with roomallocprobe: docs/security.md). roomd's
// and roomserver's media path must allocate nothing in steady state. Here each cipher owns one
// EVP_CIPHER_CTX, keyed once in init(); a packet only re-initializes the IV, feeds AAD and data
// and reads or checks the tag, none of which allocates.
//
// The contract is libsrtp's cipher interface (srtp2/cipher.h): set_iv(direction), set_aad,
// then encrypt + get_tag (protect) or decrypt over payload‖tag, which checks the tag and
// shortens the length by it (unprotect). libsrtp runs its own AES-GCM known-answer tests and
// ours (RFC 7714 §16.1) on this implementation before it accepts the replacement.
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <srtp2/cipher.h>
#include <stdlib.h>
#include <string.h>
#include "roomd_srtp_cipher.h"

#define KEY_OCTETS 16

typedef struct {
    EVP_CIPHER_CTX *ctx;
    int tag_octets;
    srtp_cipher_direction_t direction;
} gcm_state;

static EVP_CIPHER *aes_128_gcm; // fetched once (an implicit fetch per init would allocate)
static srtp_cipher_type_t openssl_gcm_128;

static srtp_err_status_t gcm_alloc(srtp_cipher_pointer_t *out, int key_len, int tag_len) {
    if (key_len != SRTP_AES_GCM_128_KEY_LEN_WSALT) return srtp_err_status_bad_param;
    if (tag_len != 8 && tag_len != 16) return srtp_err_status_bad_param;
    srtp_cipher_t *cipher = calloc(1, sizeof(srtp_cipher_t) + sizeof(gcm_state));
    if (!cipher) return srtp_err_status_alloc_fail;
    gcm_state *state = (gcm_state *)(cipher + 1);
    state->ctx = EVP_CIPHER_CTX_new();
    if (!state->ctx) {
        free(cipher);
        return srtp_err_status_alloc_fail;
    }
    state->tag_octets = tag_len;
    state->direction = srtp_direction_any;
    cipher->type = &openssl_gcm_128;
    cipher->state = state;
    cipher->key_len = key_len;
    cipher->algorithm = SRTP_AES_GCM_128;
    *out = cipher;
    return srtp_err_status_ok;
}

static srtp_err_status_t gcm_dealloc(srtp_cipher_pointer_t cipher) {
    gcm_state *state = (gcm_state *)cipher->state;
    EVP_CIPHER_CTX_free(state->ctx); // clears the key schedule
    OPENSSL_cleanse(cipher, sizeof(srtp_cipher_t) + sizeof(gcm_state));
    free(cipher);
    return srtp_err_status_ok;
}

// The key only (libsrtp passes key‖salt; the salt goes into the IV libsrtp computes).
static srtp_err_status_t gcm_init(void *cv, const uint8_t *key) {
    gcm_state *state = cv;
    state->direction = srtp_direction_any;
    if (!EVP_CipherInit_ex(state->ctx, aes_128_gcm, NULL, key, NULL, 1)) return srtp_err_status_init_fail;
    if (!EVP_CIPHER_CTX_ctrl(state->ctx, EVP_CTRL_GCM_SET_IVLEN, 12, NULL)) return srtp_err_status_init_fail;
    return srtp_err_status_ok;
}

static srtp_err_status_t gcm_set_iv(void *cv, uint8_t *iv, srtp_cipher_direction_t direction) {
    gcm_state *state = cv;
    if (direction != srtp_direction_encrypt && direction != srtp_direction_decrypt) return srtp_err_status_bad_param;
    state->direction = direction;
    if (!EVP_CipherInit_ex(state->ctx, NULL, NULL, NULL, iv, direction == srtp_direction_encrypt ? 1 : 0))
        return srtp_err_status_init_fail;
    return srtp_err_status_ok;
}

static srtp_err_status_t gcm_set_aad(void *cv, const uint8_t *aad, uint32_t aad_len) {
    gcm_state *state = cv;
    int n = 0;
    if (aad_len > INT32_MAX || !EVP_CipherUpdate(state->ctx, NULL, &n, aad, (int)aad_len)) return srtp_err_status_algo_fail;
    return srtp_err_status_ok;
}

static srtp_err_status_t gcm_encrypt(void *cv, uint8_t *buffer, unsigned int *octets) {
    gcm_state *state = cv;
    int n = 0;
    if (state->direction != srtp_direction_encrypt) return srtp_err_status_bad_param;
    if (*octets > INT32_MAX || !EVP_CipherUpdate(state->ctx, buffer, &n, buffer, (int)*octets)) return srtp_err_status_algo_fail;
    return srtp_err_status_ok;
}

static srtp_err_status_t gcm_get_tag(void *cv, uint8_t *tag, uint32_t *len) {
    gcm_state *state = cv;
    uint8_t none[16];
    int n = 0;
    if (state->direction != srtp_direction_encrypt) return srtp_err_status_bad_param;
    if (!EVP_CipherFinal_ex(state->ctx, none, &n)) return srtp_err_status_algo_fail;
    if (!EVP_CIPHER_CTX_ctrl(state->ctx, EVP_CTRL_GCM_GET_TAG, state->tag_octets, tag)) return srtp_err_status_algo_fail;
    *len = (uint32_t)state->tag_octets;
    return srtp_err_status_ok;
}

// `buffer` holds ciphertext‖tag; on success the length drops by the tag.
static srtp_err_status_t gcm_decrypt(void *cv, uint8_t *buffer, unsigned int *octets) {
    gcm_state *state = cv;
    uint8_t none[16];
    int n = 0;
    if (state->direction != srtp_direction_decrypt) return srtp_err_status_bad_param;
    if (*octets < (unsigned int)state->tag_octets || *octets > INT32_MAX) return srtp_err_status_bad_param;
    unsigned int data = *octets - (unsigned int)state->tag_octets;
    if (!EVP_CIPHER_CTX_ctrl(state->ctx, EVP_CTRL_GCM_SET_TAG, state->tag_octets, buffer + data)) return srtp_err_status_algo_fail;
    if (!EVP_CipherUpdate(state->ctx, buffer, &n, buffer, (int)data)) return srtp_err_status_algo_fail;
    if (EVP_CipherFinal_ex(state->ctx, none, &n) <= 0) return srtp_err_status_auth_fail;
    *octets = data;
    return srtp_err_status_ok;
}

// RFC 7714 §16.1.1: the session key (then 12 octets libsrtp's test harness does not read as
// key), the IV libsrtp would compute, the RTP header as AAD, the payload, ciphertext‖tag.
static const uint8_t rfc7714_key[SRTP_AES_GCM_128_KEY_LEN_WSALT] = {
    0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0a, 0x0b, 0x0c, 0x0d, 0x0e, 0x0f,
    0x51, 0x75, 0x69, 0x64, 0x20, 0x70, 0x72, 0x6f, 0x20, 0x71, 0x75, 0x6f};
static uint8_t rfc7714_iv[16] = {0x51, 0x75, 0x3c, 0x65, 0x80, 0xc2, 0x72, 0x6f, 0x20, 0x71, 0x84, 0x14};
static const uint8_t rfc7714_aad[12] = {0x80, 0x40, 0xf1, 0x7b, 0x80, 0x41, 0xf8, 0xd3, 0x55, 0x01, 0xa0, 0xb2};
static const uint8_t rfc7714_plaintext[38] = {
    0x47, 0x61, 0x6c, 0x6c, 0x69, 0x61, 0x20, 0x65, 0x73, 0x74, 0x20, 0x6f, 0x6d, 0x6e, 0x69, 0x73, 0x20, 0x64, 0x69,
    0x76, 0x69, 0x73, 0x61, 0x20, 0x69, 0x6e, 0x20, 0x70, 0x61, 0x72, 0x74, 0x65, 0x73, 0x20, 0x74, 0x72, 0x65, 0x73};
static const uint8_t rfc7714_ciphertext[54] = {
    0xf2, 0x4d, 0xe3, 0xa3, 0xfb, 0x34, 0xde, 0x6c, 0xac, 0xba, 0x86, 0x1c, 0x9d, 0x7e, 0x4b, 0xca, 0xbe, 0x63,
    0x3b, 0xd5, 0x0d, 0x29, 0x4e, 0x6f, 0x42, 0xa5, 0xf4, 0x7a, 0x51, 0xc7, 0xd1, 0x9b, 0x36, 0xde, 0x3a, 0xdf,
    0x88, 0x33, 0x89, 0x9d, 0x7f, 0x27, 0xbe, 0xb1, 0x6a, 0x91, 0x52, 0xcf, 0x76, 0x5e, 0xe4, 0x39, 0x0c, 0xce};
static const srtp_cipher_test_case_t rfc7714_test = {
    SRTP_AES_GCM_128_KEY_LEN_WSALT, rfc7714_key, rfc7714_iv, sizeof rfc7714_plaintext, rfc7714_plaintext,
    sizeof rfc7714_ciphertext, rfc7714_ciphertext, sizeof rfc7714_aad, rfc7714_aad, 16, NULL};

static srtp_cipher_type_t openssl_gcm_128 = {
    gcm_alloc, gcm_dealloc, gcm_init, gcm_set_aad, gcm_encrypt, gcm_decrypt, gcm_set_iv, gcm_get_tag,
    "AES-128 GCM using OpenSSL EVP (roomd)", &rfc7714_test, SRTP_AES_GCM_128};

int roomd_srtp_use_openssl_gcm(void) {
    if (!aes_128_gcm) aes_128_gcm = EVP_CIPHER_fetch(NULL, "AES-128-GCM", NULL);
    if (!aes_128_gcm) return srtp_err_status_init_fail;
    return srtp_replace_cipher_type(&openssl_gcm_128, SRTP_AES_GCM_128);
}
