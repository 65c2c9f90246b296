#ifndef ROOMD_SRTP_CIPHER_H
#define ROOMD_SRTP_CIPHER_H

/// Makes libsrtp2 do AES-128-GCM (SRTP_AES_GCM_128) with OpenSSL's EVP instead of the backend
/// it was built with. Call once, after srtp_init() and before any session is created. Returns
/// libsrtp's status (0: replaced; the kernel ran its own and this cipher's known-answer tests).
int roomd_srtp_use_openssl_gcm(void);

#endif
