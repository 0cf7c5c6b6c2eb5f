#ifndef ASSERTGATE_COPENSSL_SHIM_COMMON_H
#define ASSERTGATE_COPENSSL_SHIM_COMMON_H
// Wrappers for macros and variadic helpers that Swift cannot import.

static inline void CAssertGate_OPENSSL_free(void *p) { OPENSSL_free(p); }

static inline int CAssertGate_sk_X509_num(const STACK_OF(X509) *sk) { return sk_X509_num(sk); }
static inline X509 *CAssertGate_sk_X509_value(const STACK_OF(X509) *sk, int i) { return sk_X509_value(sk, i); }
static inline STACK_OF(X509) *CAssertGate_sk_X509_new_null(void) { return sk_X509_new_null(); }
static inline int CAssertGate_sk_X509_push(STACK_OF(X509) *sk, X509 *x) { return sk_X509_push(sk, x); }
static inline void CAssertGate_sk_X509_free(STACK_OF(X509) *sk) { sk_X509_free(sk); }
static inline void CAssertGate_sk_X509_pop_free(STACK_OF(X509) *sk) { sk_X509_pop_free(sk, X509_free); }

/// Constant-time comparison (CRYPTO_memcmp) for secrets.
static inline int CAssertGate_memcmp(const void *a, const void *b, size_t len) { return CRYPTO_memcmp(a, b, len); }
#endif
