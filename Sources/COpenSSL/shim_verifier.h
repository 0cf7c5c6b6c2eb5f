#ifndef ASSERTGATE_COPENSSL_SHIM_VERIFIER_H
#define ASSERTGATE_COPENSSL_SHIM_VERIFIER_H
// static inline wrappers used by the verifier side.

#endif
