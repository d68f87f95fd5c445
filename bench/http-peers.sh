#!/usr/bin/env bash
# bolide beside the usual HTTP load generators, in one run, on one machine.
#
# One nginx worker pinned to core 0 (../shared/bench/nginx-bench.conf) serves a 2-byte body at /
# and a 100 KB file at /image.jpg on 127.0.0.1:8080. Every generator runs pinned to core 1 with
# one thread, 10 connections, for DURATION seconds, in three modes: keep-alive on /, no keep-alive
# on /, keep-alive on the 100 KB file. Tools are interleaved, REPS times, and the medians reported:
# requests/s, and the generator's own CPU time (user+sys) per completed request, the figure that
# ranks generators when nginx is the bottleneck. A fourth mode, h2, is HTTP/2 in clear (h2c) to the
# same nginx on port 8082 with STREAMS concurrent streams per connection: bolide, h2load and oha.
# Then bolide alone with 1,000 connections, for its peak RSS.
#
# Usage: bench/http-peers.sh            (REPS=3 DURATION=10 by default; about 17 minutes)
#        REPS=1 DURATION=3 bench/http-peers.sh   (a quick look)
#        MODES=h2 bench/http-peers.sh            (some modes only: ka noka big h2)
#        TOOLS="bolide wrk" bench/http-peers.sh    (some tools only)
# Installs what it needs (apt, npm, cargo install --locked); stops what it started, by PID.
# Traffic goes to 127.0.0.1 only.
set -euo pipefail

REPS=${REPS:-3}
DURATION=${DURATION:-10}
CONNS=${CONNS:-10}
STREAMS=${STREAMS:-10}
MODES=${MODES:-ka noka big h2}
export NGINX_H2C_PORT=8082
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
SHARED=${SHARED:-$ROOT/../shared}
OUT=${OUT:-$ROOT/bench/out/http-peers-$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$OUT"
# shellcheck source=bench/lib.sh
. "$HERE/lib.sh"
trap stop_nginx EXIT


install_peers() {
    local apt=()
    command -v wrk >/dev/null || apt+=(wrk)
    command -v ab >/dev/null || apt+=(apache2-utils)
    command -v nginx >/dev/null || apt+=(nginx-light)
    command -v h2load >/dev/null || apt+=(nghttp2-client)
    command -v hey >/dev/null || apt+=(hey)
    [ -x /usr/bin/time ] || apt+=(time)
    command -v taskset >/dev/null || apt+=(util-linux)
    command -v python3 >/dev/null || apt+=(python3)
    apt_install "${apt[@]}"
    local npm=()
    command -v autocannon >/dev/null || npm+=(autocannon)
    command -v loadtest >/dev/null || npm+=(loadtest)
    if [ ${#npm[@]} -gt 0 ]; then
        log "installing ${npm[*]} (npm)"
        npm install -g --silent "${npm[@]}" >/dev/null
    fi
    cargo_install oha oha
    log "building bolide (release)"
    (cd "$ROOT" && cargo build --release --quiet)
}


BOLIDE="$ROOT/target/release/bolide"
D=$DURATION
C=$CONNS

# Each tool's command line for a mode, into the array CMD (left empty when the tool cannot do it).
cmd() { # tool mode url
    local tool=$1 mode=$2 url=$3
    CMD=()
    if [ "$mode" = h2 ]; then
        # HTTP/2 peers only.
        case $tool in
            bolide|h2load|oha) ;;
            *) return 0 ;;
        esac
    fi
    local ka=1
    [ "$mode" = noka ] && ka=0
    case $tool in
        bolide) CMD=("$BOLIDE" http -t 1 -c "$C" -d "${D}s" -q --json "$OUT/$4.json")
                [ $ka = 1 ] || CMD+=(--no-keepalive)
                [ "$mode" = h2 ] && CMD+=(--h2c --streams "$STREAMS") ;;
        wrk) CMD=(wrk -t 1 -c "$C" -d "${D}s")
             [ $ka = 1 ] || CMD+=(-H "Connection: close") ;;
        ab) CMD=(ab -q -c "$C" -t "$D" -n 100000000)
            [ $ka = 1 ] && CMD+=(-k) ;;
        h2load) if [ "$mode" = h2 ]; then CMD=(h2load -t 1 -c "$C" -m "$STREAMS" -D "$D")
                elif [ $ka = 1 ]; then CMD=(h2load --h1 -t 1 -c "$C" -D "$D"); fi ;;
        oha) CMD=(oha --no-tui -c "$C" -z "${D}s")
             [ $ka = 1 ] || CMD+=(--disable-keepalive)
             [ "$mode" = h2 ] && CMD+=(--http2 -p "$STREAMS") ;;
        autocannon) [ $ka = 1 ] && CMD=(autocannon -c "$C" -d "$D" -j) ;;
        loadtest) CMD=(loadtest --cores 1 -c "$C" -t "$D")
                  [ $ka = 1 ] && CMD+=(-k) ;;
        # loadtest 8.2.1's --tcp keeps connections alive even without -k (10 TIME_WAIT sockets after
        # 175,000 requests), so it is no peer for the no-keep-alive mode.
        loadtest-tcp) [ $ka = 1 ] && CMD=(loadtest --tcp --cores 1 -c "$C" -t "$D" -k) ;;
        hey) CMD=(hey -z "${D}s" -c "$C" -cpus 1)
             [ $ka = 1 ] || CMD+=(-disable-keepalive) ;;
    esac
    [ ${#CMD[@]} -eq 0 ] || CMD+=("$url")
    return 0
}

run_one() { # tool mode path rep
    local tool=$1 mode=$2 path=$3 rep=$4
    local name="$tool-$mode-$rep"
    local port=8080
    [ "$mode" = h2 ] && port=$NGINX_H2C_PORT
    cmd "$tool" "$mode" "http://127.0.0.1:$port$path" "$name"
    [ ${#CMD[@]} -gt 0 ] || return 0
    if ! taskset -c 1 /usr/bin/time -o "$OUT/$name.time" -f "%U %S %M" "${CMD[@]}" >"$OUT/$name.out" 2>&1; then
        log "  $name failed (see $OUT/$name.out)"
        rm -f "$OUT/$name.time"
        return 0
    fi
    log "  $name: $(cat "$OUT/$name.time") (user s, sys s, max RSS kB)"
    sleep 1
}

install_peers
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
if [ "$(ulimit -n)" != unlimited ] && [ "$(ulimit -n)" -lt 2100 ]; then log "open-file limit $(ulimit -n) is below the 2,100 the 1,000-connection run needs"; exit 1; fi
start_nginx
printf '{"reps": %s, "duration": %s, "connections": %s, "streams": %s}\n' "$REPS" "$DURATION" "$C" "$STREAMS" >"$OUT/meta.json"
read -r -a TOOLS <<<"${TOOLS:-bolide wrk ab h2load oha autocannon loadtest loadtest-tcp hey}"
for rep in $(seq "$REPS"); do
    for mode in $MODES; do
        path=/
        [ "$mode" = big ] && path=/image.jpg
        for tool in "${TOOLS[@]}"; do
            run_one "$tool" "$mode" "$path" "$rep"
        done
    done
done

# bolide with 1,000 connections: peak RSS.
log "bolide with 1000 connections"
taskset -c 1 /usr/bin/time -o "$OUT/c1000.time" -f "%U %S %M" \
    "$BOLIDE" http -t 1 -c 1000 -d "${D}s" -q --json "$OUT/c1000.json" http://127.0.0.1:8080/
"$HERE/summarize-peers.py" "$OUT" | tee "$OUT/summary.md"
log "raw outputs and summary: $OUT"
