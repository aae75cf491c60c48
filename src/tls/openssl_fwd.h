// OpenSSL's handle types, declared as OpenSSL declares them, so that a header can name an SSL*
// or an SSL_CTX without including OpenSSL.
#ifndef SLUICE_TLS_OPENSSL_FWD_H_
#define SLUICE_TLS_OPENSSL_FWD_H_

extern "C" {
struct ssl_st;
struct ssl_ctx_st;
typedef struct ssl_st SSL;
typedef struct ssl_ctx_st SSL_CTX;
}

#endif  // SLUICE_TLS_OPENSSL_FWD_H_
