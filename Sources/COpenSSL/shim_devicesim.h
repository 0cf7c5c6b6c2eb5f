#ifndef ASSERTGATE_COPENSSL_SHIM_DEVICESIM_H
#define ASSERTGATE_COPENSSL_SHIM_DEVICESIM_H
// static inline wrappers used by the devicesim side.

#endif
