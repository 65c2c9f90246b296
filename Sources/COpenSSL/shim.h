// OpenSSL 3 (Debian libssl-dev), for CRoomTLS. Swift code does not import this module: the
// macros and callbacks OpenSSL's API is made of are wrapped in CRoomTLS's plain functions.
#include <openssl/ssl.h>
#include <openssl/err.h>
#include <openssl/x509v3.h>
#include <openssl/pem.h>
#include <openssl/evp.h>
