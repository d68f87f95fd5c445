#!/usr/bin/env bash
# Peak RSS and wall time of bolide against hostile peers (bench/hostile-peers.py, on 127.0.0.1):
# HTTP/2 servers that send GOAWAY at once, garbage, an oversized frame, DATA on stream 0, bad
# SETTINGS, a PUSH_PROMISE flood, or an HTTP/1.1 answer (`bolide http --h2c -c 4 -d H2_SECONDS`),
# and Prometheus endpoints of 600,000 series, of 50,000 new names at every scrape, of a 400,000-
# bucket histogram, or of NaN buckets (`bolide http -d SCRAPE_SECONDS --scrape` against the
# reference server). Each run's peak RSS (GNU time), wall time, errors and what the document says.
# OLD=path/to/another/bolide runs the same rows with it too (a before/after table).
#
# Usage: bench/hostile.sh          (H2_SECONDS=3 SCRAPE_SECONDS=1; OLD unset)
# Traffic goes to 127.0.0.1 only; every run is bounded by its -d and a 120 s timeout.
set -euo pipefail

H2_SECONDS=${H2_SECONDS:-3}
SCRAPE_SECONDS=${SCRAPE_SECONDS:-1}
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
OUT=${OUT:-$ROOT/bench/out/hostile-$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$OUT"
# shellcheck source=bench/lib.sh
. "$HERE/lib.sh"
PEERS_PID=""
SERVE_PID=""
cleanup() {
    [ -n "$PEERS_PID" ] && kill "$PEERS_PID" 2>/dev/null || true
    [ -n "$SERVE_PID" ] && kill "$SERVE_PID" 2>/dev/null || true
}
trap cleanup EXIT

[ -x /usr/bin/time ] || apt_install time
(cd "$ROOT" && cargo build --release --quiet -p bolide)
NEW=$ROOT/target/release/bolide

python3 "$HERE/hostile-peers.py" >"$OUT/ports.json" &
PEERS_PID=$!
for _ in $(seq 200); do [ -s "$OUT/ports.json" ] && break; sleep 0.1; done
port() { python3 -c "import json,sys; print(json.load(open('$OUT/ports.json'))['$1'])"; }
SERVE_PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$NEW" serve --port "$SERVE_PORT" >/dev/null 2>&1 &
SERVE_PID=$!
for _ in $(seq 100); do
    python3 -c "import socket; socket.create_connection(('127.0.0.1', $SERVE_PORT))" 2>/dev/null && break
    sleep 0.1
done

binaries=(new)
[ -n "${OLD:-}" ] && binaries+=(old)
rows=()
for which in "${binaries[@]}"; do
    bin=$NEW
    [ "$which" = old ] && bin=$OLD
    for mode in goaway garbage oversized data0 badsettings push http1; do
        log "$which: HTTP/2 $mode"
        json="$OUT/$which-h2-$mode.json"
        /usr/bin/time -f '%M %e' -o "$OUT/$which-h2-$mode.time" timeout 120 "$bin" http --h2c -c 4 \
            -d "${H2_SECONDS}s" -q --json "$json" "http://127.0.0.1:$(port "h2_$mode")/" >/dev/null 2>&1 || true
        rows+=("$which h2 $mode $json $OUT/$which-h2-$mode.time")
    done
    for mode in many names buckets nan; do
        log "$which: scrape $mode"
        json="$OUT/$which-scrape-$mode.json"
        /usr/bin/time -f '%M %e' -o "$OUT/$which-scrape-$mode.time" timeout 120 "$bin" http -c 1 \
            -d "${SCRAPE_SECONDS}s" -q --scrape "app=http://127.0.0.1:$(port metrics)/$mode" \
            --json "$json" "http://127.0.0.1:$SERVE_PORT/ok" >/dev/null 2>&1 || true
        rows+=("$which scrape $mode $json $OUT/$which-scrape-$mode.time")
    done
done

python3 - "$OUT" "$H2_SECONDS" "$SCRAPE_SECONDS" "$NEW" "${rows[@]}" <<'PY'
import json, subprocess, sys
out, h2s, scs, new = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
print("| bolide | peer | mode | peak RSS | wall time (-d) | errors | what the document says |")
print("|---|---|---|---|---|---|---|")
for row in sys.argv[5:]:
    which, kind, mode, path, timing = row.split()
    rss_kb, wall = open(timing).read().split()[-2:]
    try:
        d = json.load(open(path))
        s = d["summary"]
        classes = ", ".join(f"{k} {v}" for k, v in s["errors_by_class"].items() if v)
        if kind == "h2":
            said = f"{s['responses']} responses, {s['connects']} connections, {s.get('retries', 0)} resent"
        else:
            sc = d["scrape"][0]
            # The report of the document: bolide reads back what it wrote.
            ok = subprocess.run([new, "report", path, "-o", path + ".html"], capture_output=True).returncode == 0
            said = (f"{len(sc['series'])} series kept, {sc['dropped_series']} left out, "
                    f"{sc.get('dropped_buckets', 0)} buckets left out, {sc['errors']} failed reads, "
                    f"report {'reads it' if ok else 'REFUSES it'}")
        errors = f"{s['errors']} ({classes})" if s["errors"] else "0"
    except (OSError, ValueError, KeyError) as e:
        said, errors = f"no document ({e.__class__.__name__})", "-"
    limit = h2s if kind == "h2" else scs
    print(f"| {which} | {kind} | {mode} | {int(rss_kb) / 1024:.1f} MB | {float(wall):.1f} s ({limit:g} s) | {errors} | {said} |")
PY
