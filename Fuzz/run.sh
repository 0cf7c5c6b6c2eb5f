#!/usr/bin/env bash
# Builds the libFuzzer + ASan targets and runs each for a bounded time.
#
#   Fuzz/run.sh [verifier|gateway|all] [seconds]     (defaults: all, 60)
#   Fuzz/run.sh [seconds]                            (= all, as before)
#
# verifier: CBOR/DER/base64/authData/attestation/assertion/receipts (Verifier
#           sources + VerifierFuzz.swift compiled as one module by swiftc).
# gateway:  the parsers of untrusted bytes in AssertGateCore and AssertGateRedis
#           (GatewayFuzz.swift), linked against an AssertGateCore (and its
#           dependencies) that SwiftPM builds, sanitized,
#           into .build-fuzz/ (first build takes a few minutes).
#
# Environment: ASSERTGATE_VECTORS (default <package root>/Tests/Vectors),
# only needed for the verifier seeds.
set -euo pipefail
# The Swift runtime's crash backtracer adds nothing to libFuzzer's report and
# trips ASan itself (stack-buffer-underflow in its memory server).
export SWIFT_BACKTRACE="${SWIFT_BACKTRACE:-enable=no}"

TARGET=all
SECONDS_TO_RUN=60
case "${1:-}" in
    verifier | gateway | all) TARGET="$1"; SECONDS_TO_RUN="${2:-60}" ;;
    "") ;;
    *[!0-9]*) echo "usage: Fuzz/run.sh [verifier|gateway|all] [seconds]" >&2; exit 2 ;;
    *) SECONDS_TO_RUN="$1" ;;
esac

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
OUT="$ROOT/Fuzz/out"
SSL_FLAGS=$(pkg-config --libs openssl 2>/dev/null || echo "-lssl -lcrypto")
mkdir -p "$OUT"

run_verifier() {
    local seeds="$OUT/seeds" corpus="$ROOT/Fuzz/corpus-run"
    local vectors="${ASSERTGATE_VECTORS:-$ROOT/Tests/Vectors}"
    local asn1="$ROOT/.build/checkouts/swift-asn1/Sources/SwiftASN1"
    # A clone only fuzzed so far has its checkouts in .build-fuzz.
    [ -d "$asn1" ] || [ ! -d "$ROOT/.build-fuzz/checkouts/swift-asn1" ] || asn1="$ROOT/.build-fuzz/checkouts/swift-asn1/Sources/SwiftASN1"
    [ -d "$vectors" ] || { echo "vectors not found at $vectors (set ASSERTGATE_VECTORS)" >&2; exit 2; }
    if [ ! -d "$asn1" ]; then (cd "$ROOT" && swift package resolve); fi
    mkdir -p "$seeds" "$corpus"

    # 1. SwiftASN1 as a separate module (Verifier imports it).
    local asn1_sources verifier_sources
    mapfile -d '' asn1_sources < <(find "$asn1" -name '*.swift' -print0)
    mapfile -d '' verifier_sources < <(find "$ROOT/Sources/Verifier" -name '*.swift' -print0)
    echo "building SwiftASN1 module..."
    swiftc -parse-as-library -module-name SwiftASN1 -O -wmo -sanitize=address \
        -emit-module -emit-module-path "$OUT/SwiftASN1.swiftmodule" \
        -c "${asn1_sources[@]}" -o "$OUT/SwiftASN1.o"

    # 2. Verifier sources + fuzz entry, instrumented for libFuzzer and ASan.
    echo "building verifier-fuzz..."
    swiftc -parse-as-library -module-name Verifier -O -wmo -sanitize=fuzzer,address \
        -I "$OUT" -Xcc -fmodule-map-file="$ROOT/Sources/COpenSSL/module.modulemap" -I "$ROOT/Sources/COpenSSL" \
        "${verifier_sources[@]}" "$ROOT/Fuzz/VerifierFuzz.swift" \
        "$OUT/SwiftASN1.o" $SSL_FLAGS -o "$OUT/verifier-fuzz"

    # 3. Seeds: every real attestation, assertion and receipt, decoded to bytes.
    python3 - "$vectors" "$seeds" <<'PY'
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
    echo "verifier seeds: $(ls "$seeds" | wc -l)"

    # 4. Run for a bounded time; crashes land in Fuzz/out/crash-*.
    "$OUT/verifier-fuzz" -max_total_time="$SECONDS_TO_RUN" -max_len=70000 -timeout=10 -rss_limit_mb=4096 \
        -artifact_prefix="$OUT/" -print_final_stats=1 "$corpus" "$seeds" </dev/null
}

run_gateway() {
    local build="$ROOT/.build-fuzz" seeds="$OUT/gateway-seeds" corpus="$ROOT/Fuzz/corpus-gateway"
    mkdir -p "$seeds" "$corpus"

    # 1. AssertGateCore and everything it imports, in debug (so `@testable
    #    import` reaches the internal parsers) with libFuzzer coverage and ASan
    #    on every Swift and C module. Nothing is linked at this step.
    echo "building AssertGateCore (sanitized) into $build..."
    #    SwiftPM's --sanitize=fuzzer instruments C targets only (swiftc gets it
    #    at link time), so Swift modules get the coverage flags explicitly.
    local swift_cov=(-Xswiftc -sanitize-coverage=edge,inline-8bit-counters,pc-table,trace-cmp)
    (cd "$ROOT" && swift build --build-path "$build" --target AssertGateCore \
        --sanitize=fuzzer --sanitize=address "${swift_cov[@]}")
    local bin
    bin="$(cd "$ROOT" && swift build --build-path "$build" --show-bin-path)"

    # 2. The fuzz entry, linked against every object of that build (only the
    #    AssertGateCore closure is built there). Clang modules of the C targets
    #    must be visible to import the Swift modules that re-export them.
    local objects modulemaps=() includes=()
    # Objects of sources that have since moved to another target or gone
    # (an incremental build leaves them behind) are left out: each object of
    # a target of this repository must still have its source file there.
    mapfile -d '' objects < <(find "$bin" -path '*.build/*' -name '*.o' -print0 | python3 -c '
import os, sys
root = sys.argv[1]
for path in sys.stdin.read().split("\0"):
    if not path:
        continue
    target = next((p[:-6] for p in path.split("/") if p.endswith(".build")), None)
    sources = os.path.join(root, "Sources", target or "")
    name = os.path.basename(path)[:-2]
    if target and os.path.isdir(sources) and name.endswith((".swift", ".c")):
        if not any(name in files for _, _, files in os.walk(sources)):
            continue
    sys.stdout.write(path + "\0")
' "$ROOT")
    # C targets without a module map get a generated one in <Target>.build/;
    # the others ship include/module.modulemap (found through -I).
    while IFS= read -r -d '' m; do modulemaps+=(-Xcc "-fmodule-map-file=$m"); done < <(
        find "$bin" -mindepth 2 -maxdepth 2 -path '*.build/module.modulemap' -print0)
    for c in CNGHTTP2 CHiredis COpenSSL; do
        modulemaps+=(-Xcc "-fmodule-map-file=$ROOT/Sources/$c/module.modulemap" -Xcc "-I$ROOT/Sources/$c")
    done
    while IFS= read -r -d '' d; do includes+=(-Xcc "-I$d"); done < <(
        find "$build/checkouts" -path '*/Sources/*/include' -type d -print0)
    echo "building gateway-fuzz (${#objects[@]} objects)..."
    swiftc -parse-as-library -module-name GatewayFuzz -Onone -sanitize=fuzzer,address \
        -I "$bin/Modules" "${modulemaps[@]}" "${includes[@]}" \
        "$ROOT/Fuzz/GatewayFuzz.swift" "${objects[@]}" \
        -lnghttp2 -lhiredis $SSL_FLAGS -o "$OUT/gateway-fuzz"

    # 3. Seeds: byte 0 picks the parser (FuzzTarget in GatewayFuzz.swift).
    python3 - "$ROOT" "$seeds" <<'PY'
import base64, glob, hashlib, os, sys
root, seeds = sys.argv[1], sys.argv[2]
def put(target, data):
    data = bytes([target]) + (data.encode() if isinstance(data, str) else data)
    with open(os.path.join(seeds, hashlib.sha256(data).hexdigest()[:16]), "wb") as f:
        f.write(data)
key = bytes(range(32))
kid, kid_url = base64.b64encode(key).decode(), base64.urlsafe_b64encode(key).decode().rstrip("=")
chal = base64.urlsafe_b64encode(bytes(range(100, 132))).decode().rstrip("=")
att = base64.b64encode(bytes(range(200))).decode()
asr = base64.b64encode(bytes(range(120))).decode()
# 0 challenge bodies
put(0, '{"keyId":"%s","purpose":"attest"}' % kid)
put(0, '{"keyId":"%s","purpose":"assert"}' % kid_url)
put(0, '{"keyId":"\\u0041","purpose":"assert","extra":[1,{"a":null}]}')
# 1 attest bodies
put(1, '{"keyId":"%s","challenge":"%s","attestation":"%s","userId":"user-1"}' % (kid, chal, att))
put(1, '{"keyId":"%s","challenge":"%s","attestation":"%s","userId":null}' % (kid_url, chal, att))
# 2 assertion headers: flags byte (1 = challenge required, 2 = custom names) + lines
put(2, b"\x01AssertGate-Key-Id: %s\nAssertGate-Assertion: %s\nAssertGate-Challenge: %s\n" % (kid.encode(), asr.encode(), chal.encode()))
put(2, b"\x00assertgate-key-id: %s\r\nassertgate-assertion: %s\r\n" % (kid_url.encode(), asr.encode()))
put(2, b"\x03X-Key: \nX-Sig: \nX-Chal: \nx-key: %s\nx-sig: %s\nx-chal: %s\n" % (kid.encode(), asr.encode(), chal.encode()))
# 3 codecs
for s in (kid, kid_url, kid.replace("+", "%2B").replace("/", "%2F").replace("=", "%3D"), chal,
          "req-1:abc.DEF_~", "0f8fad5b-d9cb-469f-a165-70867728950e", "caf\u00e9 \U0001F600 %zz"):
    put(3, s)
# 4 configs
for path in sorted(glob.glob(os.path.join(root, "deploy", "*.yaml"))):
    put(4, open(path, "rb").read())
put(4, "a: &x [*x]\n")
put(4, "listeners: [{address: 127.0.0.1:8080}]\nstore: {memory: {}}\ntrust: {signingSecret: {env: FUZZ_SECRET}}\n")
# 5 RESP: byte 1 = chunking (low nibble) + small limits (0x80)
for flags in (0x00, 0x83):
    put(5, bytes([flags]) + b"+OK\r\n:42\r\n$5\r\nhello\r\n$-1\r\n*-1\r\n-ERR boom\r\n")
    put(5, bytes([flags]) + b"*3\r\n$3\r\nfoo\r\n*2\r\n:1\r\n*1\r\n+x\r\n$0\r\n\r\n")
# Found by this fuzzer: an empty array one level below maxDepth (RESPFuzzRegressionTests).
put(5, b"\x83*1\r\n*2\r\n:1\r\n*1\r\n*0\r\n$0\r\n\r\n")
# 6 header rewrite: flags + "method: path" line + headers
put(6, b"\x06GET: /api/items?x=1\nConnection: keep-alive, X-Drop\nX-Drop: 1\nX-AssertGate-Trust: spoof\n"
       b"X-Forwarded-For: 10.0.0.1\nForwarded: for=10.0.0.1\nTE: trailers\nProxy-Authorization: x\nHost: a\n"
       b"AssertGate-Assertion: abc\nX-Request-Id: evil\nContent-Length: 5\n")
put(6, b"\x0bPOST: /\nTransfer-Encoding: chunked\nUpgrade: h2c\nKeep-Alive: 5\nTrailer: x\n")
# 7 value parsers
for s in ("30s", "1h30m", "250ms", "0s", "64KiB", "8MiB", "1GiB", "100",
          "redis://user:p%40ss@127.0.0.1:6379/2", "redis://[::1]:6380", "rediss://h/0"):
    put(7, s)
# 8 upstream responses: flags (low nibble + 1 = read size, 0x80 = HEAD) + bytes
for flags in (0x00, 0x02, 0x8f):
    put(8, bytes([flags]) + b"HTTP/1.1 200 OK\r\nServer: nginx\r\nContent-Length: 5\r\nConnection: keep-alive, X-A\r\nX-A: 1\r\n\r\nhello")
    put(8, bytes([flags]) + b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;e=1\r\nhello\r\n0\r\nT: x\r\n\r\n")
    put(8, bytes([flags]) + b"HTTP/1.0 200 OK\nContent-Type: text/plain\n\nuntil close")
put(8, b"\x01HTTP/1.1 204 No Content\r\n\r\nHTTP/1.1 304 Not Modified\r\nETag: x\r\n\r\n")
# 9 routing paths
for s in ("/api/../pay", "/a/%2e%2E/b;x=1//c\\d#f", "/%zz%4", "//", "/a/b/.."):
    put(9, s)
# 8 again: upstream responses with trust-prefixed fields and a bit update
put(8, b"\x00HTTP/1.1 200 OK\r\nX-AssertGate-Trust: spoof\r\nX-AssertGate-Set-Device-Bits: bit0=1, bit1=0\r\nContent-Length: 0\r\n\r\n")
# 10 DeviceCheck: byte 0 = call (high nibble) and status (table index), the rest the answer body
put(10, bytes([0x14]) + b'{"bit0":true,"bit1":false,"last_update_time":"2026-11"}')
put(10, bytes([0x14]) + b"Failed to find bit state")
put(10, bytes([0x03]) + b"Missing or incorrectly formatted device token payload")
put(10, b"\x00bit0=1, bit1=0")
# 11 h2 upstream responses / 12 h2 client requests: byte 0 = read size, then
# frames (HPACK literals without indexing, no Huffman: enough for the fuzzer to start from)
def hpack(fields):
    out = b""
    for n, v in fields:
        out += b"\x00" + bytes([len(n)]) + n.encode() + bytes([len(v)]) + v.encode()
    return out
def frame(kind, flags, sid, payload):
    return len(payload).to_bytes(3, "big") + bytes([kind, flags]) + sid.to_bytes(4, "big") + payload
HEADERS, DATA, END_STREAM, END_HEADERS = 1, 0, 1, 4
for size in (0xff, 0x07):
    put(11, bytes([size])
        + frame(HEADERS, END_HEADERS, 1, hpack([(":status", "200"), ("content-type", "application/grpc"), ("x-request-id", "up")]))
        + frame(DATA, 0, 1, b"\x00\x00\x00\x00\x02hi")
        + frame(HEADERS, END_HEADERS | END_STREAM, 1, hpack([("grpc-status", "0"), ("grpc-message", "ok")]))
        + frame(HEADERS, END_HEADERS, 3, hpack([(":status", "103"), ("link", "</a>")]))
        + frame(HEADERS, END_HEADERS | END_STREAM, 3, hpack([(":status", "204")])))
    put(12, bytes([size])
        + frame(HEADERS, END_HEADERS | END_STREAM, 1, hpack([
            (":method", "GET"), (":scheme", "http"), (":path", "/a?b=1"), (":authority", "api.example"),
            ("user-agent", "fuzz/1.0"), ("accept", "*/*"), ("cookie", "a=1"), ("cookie", "b=2"),
            ("x-forwarded-for", "10.0.0.1"), ("x-assertgate-trust", "spoof")]))
        + frame(HEADERS, END_HEADERS, 3, hpack([
            (":method", "POST"), (":scheme", "https"), (":path", "/api/items"), ("content-type", "application/grpc"),
            ("te", "trailers"), ("grpc-timeout", "100m")]))
        + frame(DATA, 0, 3, b"\x00\x00\x00\x00\x02hi")
        + frame(HEADERS, END_HEADERS | END_STREAM, 3, hpack([("x-trailer", "done")])))
PY
    echo "gateway seeds: $(ls "$seeds" | wc -l)"

    # 4. Run; stdin is /dev/null so a `{file: /dev/stdin}` secret cannot block.
    "$OUT/gateway-fuzz" -max_total_time="$SECONDS_TO_RUN" -max_len=16384 -timeout=10 -rss_limit_mb=4096 \
        -artifact_prefix="$OUT/" -print_final_stats=1 "$corpus" "$seeds" </dev/null
}

case "$TARGET" in
    verifier) run_verifier ;;
    gateway) run_gateway ;;
    all) run_verifier; run_gateway ;;
esac
