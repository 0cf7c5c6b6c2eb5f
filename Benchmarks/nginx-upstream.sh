# Sourced by the benchmark scripts: the nginx "legacy API" every benchmark
# puts behind the proxies, one definition instead of one per script.
#
#   nginx_upstream_conf DIR PORT LOCATIONS [LISTEN_OPTIONS]
#
# LISTEN_OPTIONS: `http2` makes it an HTTP/2 upstream (h2c, prior knowledge).
# writes DIR/nginx.conf: one worker, HTTP/1.1 keep-alive that never closes a
# connection under a proxy (a proxy keeps one per request in flight), no
# access log, listening on 127.0.0.1:PORT with the given `location` blocks.
# Start it with: nginx -p DIR -c DIR/nginx.conf -e DIR/error.log -g 'daemon off;'

# GET /hello: 64 bytes of JSON (side-by-side.sh, per-request.sh).
NGINX_HELLO_BODY='{"service":"legacy-api","msg":"hello","ok":true,"pad":"xxxxxxx"}'
NGINX_HELLO_LOCATIONS="location = /hello { default_type application/json; return 200 '$NGINX_HELLO_BODY'; }
        location / { return 404; }"

# nginx_conf_head DIR WORKERS: the top of every nginx.conf the benchmarks
# write (upstream or proxy), up to and inside `http {`: keep-alive that never
# ends a connection mid-run (since nginx 1.19.7 keepalive_requests also ends
# an HTTP/2 connection after that many requests: GOAWAY at the default 1000).
nginx_conf_head() {
    cat <<NG
worker_processes $2;
worker_rlimit_nofile 16384;
pid $1/nginx.pid;
error_log $1/error.log warn;
events { worker_connections 8192; }
http {
    access_log off;
    keepalive_requests 1000000000;
    keepalive_timeout 300s;
NG
}

nginx_upstream_conf() {
    local dir=$1 port=$2 locations=$3 listen_opts=${4:-}
    mkdir -p "$dir/logs"
    { nginx_conf_head "$dir" 1; cat <<NG; } >"$dir/nginx.conf"
    server {
        listen 127.0.0.1:$port backlog=4096 $listen_opts;
        $locations
    }
}
NG
}
