#!/usr/bin/env bash
# Fixed-rate pacing: bolide --rps beside oha -q --latency-correction, and the closed-loop p50, in
# one run, against one nginx worker (core 0) with every generator on core 1, one thread.
#
# For each rate (RATES, req/s) and repetition, interleaved: bolide --rps, oha at the same rate with
# its latency correction, both with CONNS connections; then closed-loop bolide with CONNS and with
# 1 connection. Reported as medians over REPS: latency p50 and p99, bolide's send lag (p50, p99,
# max) and late sends, and each generator's CPU time (user+sys, from /usr/bin/time) per request.
# wrk2 is not in Debian and is not built here; run it beside this by hand if you have it.
#
# Usage: bench/pacing.sh                         (REPS=3 DURATION=10 RATES="1000 10000 50000")
#        REPS=1 DURATION=3 bench/pacing.sh       (a quick look)
# Installs what it needs (apt, cargo install --locked oha); traffic goes to 127.0.0.1 only.
set -euo pipefail

REPS=${REPS:-3}
DURATION=${DURATION:-10}
CONNS=${CONNS:-50}
RATES=${RATES:-"1000 10000 50000"}
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
SHARED=${SHARED:-$ROOT/../shared}
OUT=${OUT:-$ROOT/bench/out/pacing-$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$OUT"
# shellcheck source=bench/lib.sh
. "$HERE/lib.sh"
trap stop_nginx EXIT

apt=()
command -v nginx >/dev/null || apt+=(nginx-light)
[ -x /usr/bin/time ] || apt+=(time)
command -v taskset >/dev/null || apt+=(util-linux)
apt_install "${apt[@]}"
cargo_install oha oha
log "building bolide (release)"
(cd "$ROOT" && cargo build --release --quiet)
BOLIDE="$ROOT/target/release/bolide"
URL=http://127.0.0.1:8080/

timed() { # name command...: runs it on core 1 under /usr/bin/time
    local name=$1
    shift
    if ! taskset -c 1 /usr/bin/time -o "$OUT/$name.time" -f "%U %S" "$@" >"$OUT/$name.out" 2>&1; then
        log "  $name failed (see $OUT/$name.out)"
        rm -f "$OUT/$name.time"
        return 0
    fi
    log "  $name: $(cat "$OUT/$name.time") (user s, sys s)"
    sleep 1
}

start_nginx
printf '{"reps": %s, "duration": %s, "connections": %s, "rates": "%s"}\n' "$REPS" "$DURATION" "$CONNS" "$RATES" >"$OUT/meta.json"
for rep in $(seq "$REPS"); do
    for rate in $RATES; do
        timed "bolide-$rate-$rep" "$BOLIDE" http --rps "$rate" -c "$CONNS" -t 1 -d "${DURATION}s" -q \
            --json "$OUT/bolide-$rate-$rep.json" "$URL"
        timed "oha-$rate-$rep" oha --no-tui --output-format json -q "$rate" --latency-correction \
            -c "$CONNS" -z "${DURATION}s" "$URL"
    done
    for c in "$CONNS" 1; do
        timed "closed-c$c-$rep" "$BOLIDE" http -c "$c" -t 1 -d "${DURATION}s" -q --json "$OUT/closed-c$c-$rep.json" "$URL"
    done
done
"$HERE/summarize-pacing.py" "$OUT" | tee "$OUT/summary.md"
log "raw outputs and summary: $OUT"
