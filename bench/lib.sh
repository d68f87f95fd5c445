# Shared by the benchmark scripts (sourced, not run): logging, one pinned nginx worker, and the
# reference server. Expects SHARED (the shared/ folder beside the repository) and OUT (a scratch
# directory); the reference server also BOLIDE (the binary) and PORT.

log() { printf '%s\n' "$*" >&2; }

# The cores other than SERVER_CORE (0 unless set), comma-separated: where the load generators run
# while the server has SERVER_CORE to itself. Needs 2 cores or more.
client_cores() {
    local server=${SERVER_CORE:-0} n
    n=$(nproc)
    [ "$n" -ge 2 ] || { echo "needs 2 cores or more: the server on one, the users on the others" >&2; return 1; }
    seq 0 $((n - 1)) | grep -vx "$server" | paste -sd,
}

# Installs the Debian packages given, once, quietly.
apt_install() {
    [ $# -gt 0 ] || return 0
    log "installing $* (apt)"
    DEBIAN_FRONTEND=noninteractive apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}

# cargo install --locked, unless the command is already there.
cargo_install() { # command crate
    command -v "$1" >/dev/null && return 0
    log "installing $2 (cargo install --locked; a few minutes)"
    cargo install --locked --quiet "$2"
}

# One nginx worker pinned to core 0 with ../shared/bench/nginx-bench.conf: a 2-byte body at / and
# a 100 KB file at /image.jpg on 127.0.0.1:8080. Stopped by PID with stop_nginx.
NGINX_PID=""
start_nginx() {
    local nb="$OUT/nginx"
    mkdir -p "$nb/www" "$nb/logs" "$nb/tmp"
    head -c 102400 /dev/urandom >"$nb/www/image.jpg"
    sed "s#BENCH_ROOT#$nb#g" "$SHARED/bench/nginx-bench.conf" >"$nb/nginx.conf"
    # NGINX_H2C_PORT: the same server also speaks HTTP/2 in clear (prior knowledge) on that port.
    if [ -n "${NGINX_H2C_PORT:-}" ]; then
        sed -i "s#listen 127.0.0.1:8080 backlog=4096;#&\n        listen 127.0.0.1:$NGINX_H2C_PORT http2;#" "$nb/nginx.conf"
    fi
    nginx -t -q -p "$nb" -c "$nb/nginx.conf"
    taskset -c 0 nginx -p "$nb" -c "$nb/nginx.conf" >"$nb/logs/stdout.log" 2>&1 &
    NGINX_PID=$!
    for _ in $(seq 50); do
        curl -fs -o /dev/null http://127.0.0.1:8080/ 2>/dev/null && return 0
        python3 -c 'import urllib.request; urllib.request.urlopen("http://127.0.0.1:8080/")' 2>/dev/null && return 0
        sleep 0.1
    done
    log "nginx did not come up"; exit 1
}
stop_nginx() {
    if [ -n "$NGINX_PID" ] && kill -0 "$NGINX_PID" 2>/dev/null; then
        kill -QUIT "$NGINX_PID"
        wait "$NGINX_PID" 2>/dev/null || true
    fi
}

# The reference server (`$BOLIDE serve --port $PORT`) pinned to the cores given (`taskset -c`
# list), with extra `serve` arguments; returns once it listens. Stopped with stop_server (which
# the scripts also trap on EXIT).
SERVER_PID=""
start_server() {
    local cpus=$1
    shift
    taskset -c "$cpus" "$BOLIDE" serve --port "$PORT" "$@" >"$OUT/server.log" 2>&1 &
    SERVER_PID=$!
    for _ in $(seq 100); do
        grep -q "reference server on" "$OUT/server.log" 2>/dev/null && return 0
        sleep 0.05
    done
    log "the reference server did not start"
    cat "$OUT/server.log" >&2
    exit 1
}
stop_server() {
    if [ -n "$SERVER_PID" ] && kill -0 "$SERVER_PID" 2>/dev/null; then
        kill -INT "$SERVER_PID"
        wait "$SERVER_PID" 2>/dev/null || true
    fi
    SERVER_PID=""
}
