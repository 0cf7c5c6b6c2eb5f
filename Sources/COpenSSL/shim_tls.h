#ifndef ASSERTGATE_COPENSSL_SHIM_TLS_H
#define ASSERTGATE_COPENSSL_SHIM_TLS_H
// static inline wrappers used by the tls side.

#endif
