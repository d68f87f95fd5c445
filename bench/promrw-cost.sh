#!/usr/bin/env bash
# What --out prometheus-rw and --out otlp cost the load: bolide http against one nginx worker
# pinned to core 0 (../shared/bench/nginx-bench.conf), bolide pinned to core 1, keep-alive, CONNS
# connections for DURATION seconds, without an output, with --out prometheus-rw to a live
# Prometheus (Debian's, started here on a loopback port with its remote-write receiver and native
# histograms) and with --out otlp to a live OpenTelemetry Collector (built here from its Go modules,
# crates/bolide/tests/otelcol, writing to a file), interleaved REPS times. Reports each run's
# requests/s, the medians, and the change with each output.
#
# Usage: bench/promrw-cost.sh            (REPS=5 CONNS=50 DURATION=10; go builds the collector)
# Traffic goes to 127.0.0.1 only; every run is bounded by DURATION.
set -euo pipefail

REPS=${REPS:-5}
CONNS=${CONNS:-50}
DURATION=${DURATION:-10}
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
SHARED=${SHARED:-$ROOT/../shared}
OUT=${OUT:-$ROOT/bench/out/promrw-cost-$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$OUT"
# shellcheck source=bench/lib.sh
. "$HERE/lib.sh"
PROM_PID=""
OTEL_PID=""
cleanup() {
    stop_nginx
    [ -n "$PROM_PID" ] && kill "$PROM_PID" 2>/dev/null || true
    [ -n "$OTEL_PID" ] && kill "$OTEL_PID" 2>/dev/null || true
}
trap cleanup EXIT

apt=()
command -v nginx >/dev/null || apt+=(nginx-light)
command -v prometheus >/dev/null || apt+=(prometheus)
command -v taskset >/dev/null || apt+=(util-linux)
apt_install "${apt[@]}"
(cd "$ROOT" && cargo build --release --quiet -p bolide)
BOLIDE=$ROOT/target/release/bolide
(cd "$ROOT/crates/bolide/tests/otelcol" && go build -o "$OUT/otelcol-bolide" .)

start_nginx
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
printf 'global:\n  scrape_interval: 1h\n' >"$OUT/prometheus.yml"
prometheus --config.file="$OUT/prometheus.yml" --storage.tsdb.path="$OUT/tsdb" \
    --web.listen-address="127.0.0.1:$PORT" --web.enable-remote-write-receiver \
    --enable-feature=native-histograms >"$OUT/prometheus.log" 2>&1 &
PROM_PID=$!
for _ in $(seq 100); do
    python3 -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:$PORT/-/ready')" 2>/dev/null && break
    sleep 0.2
done

OTLP_PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
printf 'receivers:\n  otlp:\n    protocols:\n      http:\n        endpoint: 127.0.0.1:%s\nexporters:\n  file:\n    path: %s\nservice:\n  telemetry:\n    metrics:\n      level: none\n  pipelines:\n    metrics:\n      receivers: [otlp]\n      exporters: [file]\n' \
    "$OTLP_PORT" "$OUT/otlp.jsonl" >"$OUT/otelcol.yaml"
"$OUT/otelcol-bolide" --config "$OUT/otelcol.yaml" >"$OUT/otelcol.log" 2>&1 &
OTEL_PID=$!
for _ in $(seq 100); do
    python3 -c "import socket; socket.create_connection(('127.0.0.1', $OTLP_PORT))" 2>/dev/null && break
    sleep 0.2
done

for i in $(seq "$REPS"); do
    for which in off rw otlp; do
        out=()
        [ "$which" = rw ] && out=(--out "prometheus-rw=http://127.0.0.1:$PORT/api/v1/write")
        [ "$which" = otlp ] && out=(--out "otlp=http://127.0.0.1:$OTLP_PORT")
        log "run $i of $REPS: output $which"
        BOLIDE_TESTID="cost-$i" taskset -c 1 "$BOLIDE" http -t 1 -c "$CONNS" -d "${DURATION}s" -q \
            "${out[@]}" --json "$OUT/$which-$i.json" http://127.0.0.1:8080/
    done
done

python3 - "$OUT" "$REPS" <<'PY'
import json, statistics, sys
out, reps = sys.argv[1], int(sys.argv[2])
res = {}
print("| | requests/s | seconds sent / dropped |")
print("|---|---|---|")
names = {"off": "no output", "rw": "--out prometheus-rw", "otlp": "--out otlp"}
for which in ("off", "rw", "otlp"):
    rows = []
    for i in range(1, reps + 1):
        d = json.load(open(f"{out}/{which}-{i}.json"))
        o = (d.get("outputs") or [{}])[0]
        rows.append((d["summary"]["requests_per_s"], o.get("sent", 0), o.get("dropped", 0)))
    res[which] = rows
    rps = " / ".join(f"{r[0]:.0f}" for r in rows)
    print(f"| {names[which]} | {statistics.median(r[0] for r in rows):.0f} ({rps}) | "
          f"{sum(r[1] for r in rows)} / {sum(r[2] for r in rows)} |")
off = statistics.median(r[0] for r in res["off"])
for which in ("rw", "otlp"):
    on = statistics.median(r[0] for r in res[which])
    print(f"\nrequests/s with {names[which]} against without (medians): {100 * (on - off) / off:+.2f}%")
PY
