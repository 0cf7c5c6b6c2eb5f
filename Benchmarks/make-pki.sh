#!/usr/bin/env bash
# A throw-away CA, a server certificate for 127.0.0.1/localhost and a client
# certificate, for benchmarking Redis over TLS (store-bench --tls DIR).
#   Benchmarks/make-pki.sh DIR
set -euo pipefail
DIR="${1:?usage: make-pki.sh DIR}"
mkdir -p "$DIR"
EC=(-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -days 2)
openssl req -x509 "${EC[@]}" -keyout "$DIR/ca.key" -out "$DIR/ca.crt" -subj "/CN=AssertGate bench CA" 2>/dev/null
openssl req -x509 -CA "$DIR/ca.crt" -CAkey "$DIR/ca.key" "${EC[@]}" -keyout "$DIR/server.key" -out "$DIR/server.crt" \
    -subj /CN=localhost -addext subjectAltName=IP:127.0.0.1,DNS:localhost 2>/dev/null
openssl req -x509 -CA "$DIR/ca.crt" -CAkey "$DIR/ca.key" "${EC[@]}" -keyout "$DIR/client.key" -out "$DIR/client.crt" \
    -subj /CN=assertgate-bench 2>/dev/null
echo "$DIR: ca.crt server.crt server.key client.crt client.key"
