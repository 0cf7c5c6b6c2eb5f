#ifndef ASSERTGATE_COPENSSL_SHIM_DEVICESIM_H
#define ASSERTGATE_COPENSSL_SHIM_DEVICESIM_H
// static inline wrappers used by the devicesim side (macros and variadic
// helpers Swift cannot import). Ownership stays with the Swift callers.

/// EVP_EC_gen is a macro over the variadic EVP_PKEY_Q_keygen.
static inline EVP_PKEY *CAssertGate_DS_EC_gen(const char *curve) { return EVP_EC_gen(curve); }

/// BIO_get_mem_data is a macro over BIO_ctrl; the pointer is owned by the BIO.
static inline long CAssertGate_DS_BIO_get_mem_data(BIO *bio, const unsigned char **out) {
    char *p = NULL;
    long n = BIO_get_mem_data(bio, &p);
    *out = (const unsigned char *)p;
    return n;
}

#endif
