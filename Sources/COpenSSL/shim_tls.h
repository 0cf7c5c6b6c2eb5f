#ifndef ASSERTGATE_COPENSSL_SHIM_TLS_H
#define ASSERTGATE_COPENSSL_SHIM_TLS_H
// static inline wrappers used by the tls side (TLS termination in
// AssertGateCore/TLS). Only macros and casts Swift cannot import live here;
// all logic and all ownership stay in Swift.

#include <stdint.h>

static inline int CAssertGate_SSL_CTX_set_min_proto_version(SSL_CTX *ctx, int version) {
    return (int)SSL_CTX_set_min_proto_version(ctx, version);
}
static inline long CAssertGate_SSL_CTX_set_mode(SSL_CTX *ctx, long mode) { return SSL_CTX_set_mode(ctx, mode); }
static inline long CAssertGate_SSL_CTX_set_session_cache_mode(SSL_CTX *ctx, long mode) {
    return SSL_CTX_set_session_cache_mode(ctx, mode);
}

/// SNI for outbound (client) connections; a macro over SSL_ctrl.
static inline int CAssertGate_SSL_set_tlsext_host_name(SSL *ssl, const char *name) {
    return (int)SSL_set_tlsext_host_name(ssl, name);
}

static inline uint64_t CAssertGate_SSL_OP_NO_TICKET(void) { return SSL_OP_NO_TICKET; }
static inline uint64_t CAssertGate_SSL_OP_NO_COMPRESSION(void) { return SSL_OP_NO_COMPRESSION; }
static inline uint64_t CAssertGate_SSL_OP_NO_RENEGOTIATION(void) { return SSL_OP_NO_RENEGOTIATION; }
static inline uint64_t CAssertGate_SSL_OP_CIPHER_SERVER_PREFERENCE(void) { return SSL_OP_CIPHER_SERVER_PREFERENCE; }
static inline long CAssertGate_SSL_MODE_RELEASE_BUFFERS(void) { return (long)SSL_MODE_RELEASE_BUFFERS; }
static inline long CAssertGate_SSL_SESS_CACHE_OFF(void) { return (long)SSL_SESS_CACHE_OFF; }

/// Server-side ALPN preference list handed to the select callback as its
/// `arg`. Allocated and freed by TLSServerContext; never owned by OpenSSL.
typedef struct {
    const unsigned char *protocols; // RFC 7301 wire format
    unsigned int length;
} CAssertGate_ALPNList;

#endif
