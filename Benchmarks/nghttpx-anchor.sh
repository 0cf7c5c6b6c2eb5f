# Sourced by per-request.sh, same-rate.sh and side-by-side.sh: the anchor
# they all measure against, configured once.
#
#   nghttpx_anchor_conf DIR FRONT_PORT UPSTREAM_PORT PROTO WORKERS
#
# writes DIR/nghttpx.conf: h2c (prior knowledge) on 127.0.0.1:FRONT_PORT, one
# backend speaking PROTO (http/1.1 or h2) on 127.0.0.1:UPSTREAM_PORT,
# connections kept as long as the gateway keeps them, no Via, logs to DIR.
nghttpx_anchor_conf() {
    local dir=$1 port=$2 up=$3 proto=$4 workers=$5
    cat >"$dir/nghttpx.conf" <<EOF
frontend=127.0.0.1,$port;no-tls
backend=127.0.0.1,$up;;proto=$proto
workers=$workers
frontend-http2-max-concurrent-streams=128
backend-keep-alive-timeout=300s
frontend-keep-alive-timeout=300s
no-via=yes
no-ocsp=yes
log-level=WARN
errorlog-file=$dir/error.log
EOF
}
