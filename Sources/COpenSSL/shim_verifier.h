#ifndef ASSERTGATE_COPENSSL_SHIM_VERIFIER_H
#define ASSERTGATE_COPENSSL_SHIM_VERIFIER_H
// static inline wrappers used by the verifier side.

/// EVP_PKEY_fromdata selection for a public key (a compound macro in C).
static inline int CAssertGate_EVP_PKEY_PUBLIC_KEY(void) { return EVP_PKEY_PUBLIC_KEY; }

/// Memory BIO contents; the pointer stays owned by the BIO.
static inline long CAssertGate_BIO_get_mem_data(BIO *b, char **pp) { return BIO_get_mem_data(b, pp); }

static inline int CAssertGate_PKCS7_is_signed(PKCS7 *p7) {
    return p7 != NULL && p7->type != NULL && PKCS7_type_is_signed(p7) && p7->d.sign != NULL;
}

/// The certificates carried in a SignedData (borrowed, may be NULL).
static inline STACK_OF(X509) *CAssertGate_PKCS7_signed_certs(PKCS7 *p7) {
    return CAssertGate_PKCS7_is_signed(p7) ? p7->d.sign->cert : NULL;
}

static inline int CAssertGate_PKCS7_signer_count(PKCS7 *p7) {
    STACK_OF(PKCS7_SIGNER_INFO) *infos = PKCS7_get_signer_info(p7);
    return infos == NULL ? 0 : sk_PKCS7_SIGNER_INFO_num(infos);
}

/// A fresh P-256 key pair (EVP_EC_gen is a macro around a variadic call).
static inline EVP_PKEY *CAssertGate_EVP_EC_gen_P256(void) {
    return EVP_PKEY_Q_keygen(NULL, NULL, "EC", "P-256");
}
#endif
