#!/usr/bin/env bash
# Builds the Verifier fuzz target with libFuzzer + ASan and runs it for a
# bounded time (default 60 s) on a seed corpus made from the test vectors.
#
#   Fuzz/run.sh [seconds]
#
# Environment: ASSERTGATE_VECTORS (default <package root>/../shared/vectors).
set -euo pipefail

SECONDS_TO_RUN="${1:-60}"
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
OUT="$ROOT/Fuzz/out"
SEEDS="$OUT/seeds"
CORPUS="$ROOT/Fuzz/corpus-run"
VECTORS="${ASSERTGATE_VECTORS:-$ROOT/../shared/vectors}"
ASN1="$ROOT/.build/checkouts/swift-asn1/Sources/SwiftASN1"

[ -d "$VECTORS" ] || { echo "vectors not found at $VECTORS (set ASSERTGATE_VECTORS)" >&2; exit 2; }
if [ ! -d "$ASN1" ]; then (cd "$ROOT" && swift package resolve); fi
mkdir -p "$OUT" "$SEEDS" "$CORPUS"

SSL_FLAGS=$(pkg-config --libs openssl 2>/dev/null || echo "-lssl -lcrypto")

# 1. SwiftASN1 as a separate module (Verifier imports it).
mapfile -d '' ASN1_SOURCES < <(find "$ASN1" -name '*.swift' -print0)
mapfile -d '' VERIFIER_SOURCES < <(find "$ROOT/Sources/Verifier" -name '*.swift' -print0)
echo "building SwiftASN1 module..."
swiftc -parse-as-library -module-name SwiftASN1 -O -wmo -sanitize=address \
    -emit-module -emit-module-path "$OUT/SwiftASN1.swiftmodule" \
    -c "${ASN1_SOURCES[@]}" -o "$OUT/SwiftASN1.o"

# 2. Verifier sources + fuzz entry, instrumented for libFuzzer and ASan.
echo "building verifier-fuzz..."
swiftc -parse-as-library -module-name Verifier -O -wmo -sanitize=fuzzer,address \
    -I "$OUT" -Xcc -fmodule-map-file="$ROOT/Sources/COpenSSL/module.modulemap" -I "$ROOT/Sources/COpenSSL" \
    "${VERIFIER_SOURCES[@]}" "$ROOT/Fuzz/VerifierFuzz.swift" \
    "$OUT/SwiftASN1.o" $SSL_FLAGS -o "$OUT/verifier-fuzz"

# 3. Seeds: every real attestation, assertion and receipt, decoded to bytes.
python3 - "$VECTORS" "$SEEDS" <<'PY'
import base64, json, os, re, sys, hashlib
vectors, seeds = sys.argv[1], sys.argv[2]
def b64(s):
    s = re.sub(r"\s", "", s)
    s += "=" * (-len(s) % 4)
    return base64.b64decode(s.replace("-", "+").replace("_", "/"))
def put(data):
    with open(os.path.join(seeds, hashlib.sha256(data).hexdigest()[:16]), "wb") as f:
        f.write(data)
for root, _, files in os.walk(vectors):
    for name in files:
        path = os.path.join(root, name)
        text = open(path, "rb").read()
        if name.endswith(".cbor"):
            put(text)
        elif name.endswith(".b64"):
            put(b64(text.decode()))
        elif name.endswith((".yaml", ".json")):
            for m in re.finditer(r'(?:Base64|_base64|attestation|assertion|attestationObject|ATTESTATION_BASE64|REQUEST_ASSERTION_BASE64)"?\s*[:=]\s*"?([A-Za-z0-9+/_-]{200,}={0,2})', text.decode()):
                try:
                    put(b64(m.group(1)))
                except Exception:
                    pass
PY
echo "seeds: $(ls "$SEEDS" | wc -l)"

# 4. Run for a bounded time; crashes land in Fuzz/out/crash-*.
"$OUT/verifier-fuzz" -max_total_time="$SECONDS_TO_RUN" -max_len=70000 -timeout=10 -rss_limit_mb=4096 \
    -artifact_prefix="$OUT/" -print_final_stats=1 "$CORPUS" "$SEEDS"
