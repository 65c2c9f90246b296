// OpenSSL's libcrypto (Debian's libssl-dev): the AES-GCM libsrtp2 runs on
// (CSRTPOpenSSLCipher), HMAC-SHA1 for STUN's MESSAGE-INTEGRITY (RoomICE) and SHA-1 for the
// WebSocket handshake (RoomJanus); in tests, RoomMediaCryptoTests' SRTP reference decryptor.
#ifndef ROOMD_CLIBCRYPTO_SHIM_H
#define ROOMD_CLIBCRYPTO_SHIM_H
#include <openssl/evp.h>
#include <openssl/hmac.h>

static const int roomd_evp_ctrl_gcm_set_ivlen = EVP_CTRL_GCM_SET_IVLEN;
static const int roomd_evp_ctrl_gcm_set_tag = EVP_CTRL_GCM_SET_TAG;
static const int roomd_evp_ctrl_gcm_get_tag = EVP_CTRL_GCM_GET_TAG;
#endif
