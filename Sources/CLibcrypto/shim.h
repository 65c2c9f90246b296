// OpenSSL's libcrypto (Debian's libssl-dev), roomd's one crypto library: the AES-GCM libsrtp2
// runs on (CSRTPOpenSSLCipher), and through RoomCrypto the hashes, HMACs, random keys and
// constant-time comparisons (STUN, the WebSocket handshake, room tokens, binding datagrams);
// Ed25519 signatures over room tokens' placement (PEM key files read through pem.h); in tests,
// RoomMediaCryptoTests' SRTP reference decryptor.
#ifndef ROOMD_CLIBCRYPTO_SHIM_H
#define ROOMD_CLIBCRYPTO_SHIM_H
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>
#include <openssl/crypto.h>
#include <openssl/pem.h>
#include <openssl/bio.h>
#include <openssl/err.h>

static const int roomd_evp_ctrl_gcm_set_ivlen = EVP_CTRL_GCM_SET_IVLEN;
static const int roomd_evp_ctrl_gcm_set_tag = EVP_CTRL_GCM_SET_TAG;
static const int roomd_evp_ctrl_gcm_get_tag = EVP_CTRL_GCM_GET_TAG;
#endif
