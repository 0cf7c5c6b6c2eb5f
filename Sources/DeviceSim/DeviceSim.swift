// DeviceSim: a software App Attest device built on OpenSSL directly.
