// OpenSSL's libcrypto (Debian's libssl-dev), for tests only: RoomMediaCryptoTests decrypts
// captured SRTP with EVP's AES-GCM, independently of libsrtp2 (which Debian builds on NSS).
#ifndef ROOMD_CLIBCRYPTO_SHIM_H
#define ROOMD_CLIBCRYPTO_SHIM_H
#include <openssl/evp.h>

static const int roomd_evp_ctrl_gcm_set_ivlen = EVP_CTRL_GCM_SET_IVLEN;
static const int roomd_evp_ctrl_gcm_set_tag = EVP_CTRL_GCM_SET_TAG;
static const int roomd_evp_ctrl_gcm_get_tag = EVP_CTRL_GCM_GET_TAG;
#endif
