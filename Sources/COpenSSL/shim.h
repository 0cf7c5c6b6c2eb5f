#ifndef ASSERTGATE_COPENSSL_SHIM_H
#define ASSERTGATE_COPENSSL_SHIM_H
// Thin C layer: OpenSSL headers plus static inline wrappers for the macros
// Swift cannot import. Each consumer keeps its wrappers in its own header so
// the Verifier and DeviceSim stay independent (a shared encoder bug must not
// pass its own tests).
#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/ec.h>
#include <openssl/ecdsa.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/objects.h>
#include <openssl/param_build.h>
#include <openssl/pem.h>
#include <openssl/pkcs7.h>
#include <openssl/rand.h>
#include <openssl/sha.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>
#include <openssl/x509_vfy.h>

#include "shim_common.h"
#include "shim_verifier.h"
#include "shim_devicesim.h"
#include "shim_tls.h"
#endif
