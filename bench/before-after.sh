#!/usr/bin/env bash
# One bolide against another on healthy servers, interleaved: CPU per request (each run's own
# figure, its load threads' clocks) and requests/s against one nginx worker pinned to core 0
# (../shared/bench/nginx-bench.conf), bolide pinned to core 1, -t 1 -c CONNS for DURATION seconds:
# HTTP/1.1 keep-alive, and HTTP/2 in clear (--h2c --streams 8) on nginx's h2c listener. OLD and NEW
# alternate (old first, then new first, so that neither always runs on a warmer machine); medians
# of REPS runs each.
#
# Usage: OLD=/path/to/bolide-before bench/before-after.sh   (NEW: this tree's release build;
#        REPS=5 CONNS=50 DURATION=8)
# Traffic goes to 127.0.0.1 only; every run is bounded by DURATION.
set -euo pipefail

REPS=${REPS:-5}
CONNS=${CONNS:-50}
DURATION=${DURATION:-8}
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
SHARED=${SHARED:-$ROOT/../shared}
OUT=${OUT:-$ROOT/bench/out/before-after-$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$OUT"
: "${OLD:?OLD=path to the bolide binary to compare with}"
# shellcheck source=bench/lib.sh
. "$HERE/lib.sh"
trap stop_nginx EXIT
export NGINX_H2C_PORT=8082

apt=()
command -v nginx >/dev/null || apt+=(nginx-light)
command -v taskset >/dev/null || apt+=(util-linux)
apt_install "${apt[@]}"
(cd "$ROOT" && cargo build --release --quiet -p bolide)
NEW=$ROOT/target/release/bolide
start_nginx

for i in $(seq "$REPS"); do
    order=(old new)
    [ $((i % 2)) -eq 0 ] && order=(new old)
    for mode in h1 h2; do
        for which in "${order[@]}"; do
            bin=$NEW
            [ "$which" = old ] && bin=$OLD
            args=(http://127.0.0.1:8080/)
            [ "$mode" = h2 ] && args=(--h2c --streams 8 "http://127.0.0.1:$NGINX_H2C_PORT/")
            log "run $i of $REPS: $mode $which"
            taskset -c 1 "$bin" http -t 1 -c "$CONNS" -d "${DURATION}s" -q --json "$OUT/$mode-$which-$i.json" \
                "${args[@]}" >/dev/null
        done
    done
done

python3 - "$OUT" "$REPS" <<'PY'
import json, statistics, sys
out, reps = sys.argv[1], int(sys.argv[2])
print("| mode | bolide | CPU per request (median) | requests/s (median) | errors | runs |")
print("|---|---|---|---|---|---|")
for mode in ("h1", "h2"):
    for which in ("old", "new"):
        docs = [json.load(open(f"{out}/{mode}-{which}-{i}.json")) for i in range(1, reps + 1)]
        cpu = statistics.median(d["generator"]["cpu_us_per_request"] for d in docs)
        rps = statistics.median(d["summary"]["requests_per_s"] for d in docs)
        errors = sum(d["summary"]["errors"] for d in docs)
        each = ", ".join(f"{d['generator']['cpu_us_per_request']:.2f}" for d in docs)
        name = "HTTP/1.1 keep-alive" if mode == "h1" else "HTTP/2 h2c, 8 streams"
        print(f"| {name} | {which} | {cpu:.2f} µs | {rps:,.0f} | {errors} | {each} |")
PY
