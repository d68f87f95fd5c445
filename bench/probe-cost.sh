#!/usr/bin/env bash
# What bolide-probe costs a real Meteor server: ../shared/meteor-server (Meteor 3.0.4's server
# packages serving the benchmark's tasks app) started by bolide's --spawn without the probe and
# with it (NODE_OPTIONS=--require npm/bolide-probe, read once a second by --probe), interleaved REPS
# times, each under tasks-reactive at RATE users/s for DURATION seconds. Reports the server's CPU
# (bolide's --spawn monitor: the node process, % of one core) and the users' step latency p50 and
# p99 of each run, the medians, and the difference with the probe.
#
# Usage: bench/probe-cost.sh            (REPS=5 RATE=4 DURATION=30 RESOLUTIONS="20": the probe's
#                                        event-loop sampling periods, ms, each a variant of its own)
# Traffic goes to 127.0.0.1 only; every run is bounded by DURATION plus its users' flows.
set -euo pipefail

REPS=${REPS:-5}
RATE=${RATE:-4}
DURATION=${DURATION:-30}
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
SHARED=${SHARED:-$ROOT/../shared}
OUT=${OUT:-$ROOT/bench/out/probe-cost-$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$OUT"
cargo build --release --quiet --manifest-path "$ROOT/Cargo.toml" -p bolide
BOLIDE=$ROOT/target/release/bolide
MS=$OUT/meteor-server
cp -r "$SHARED/meteor-server" "$MS"
(cd "$MS" && npm ci --omit=optional --no-audit --no-fund --loglevel=error)
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
RESOLUTIONS=${RESOLUTIONS:-20}
VARIANTS="off"
for r in $RESOLUTIONS; do VARIANTS="$VARIANTS on$r"; done
for i in $(seq "$REPS"); do
  for which in $VARIANTS; do
    port=$(free_port)
    probe=()
    env=""
    if [ "$which" != off ]; then
      pp=$(free_port)
      probe=(--probe "app=127.0.0.1:$pp")
      env="NODE_OPTIONS='--require $ROOT/npm/bolide-probe' BOLIDE_PROBE_RESOLUTION=${which#on}"
    fi
    echo "run $i of $REPS: probe $which" >&2
    "$BOLIDE" run tasks-reactive --target "http://127.0.0.1:$port" --arrival-rate "$RATE" -d "${DURATION}s" \
      --spawn "cd '$MS' && $env exec node server.js --port $port" --ready-url "http://127.0.0.1:$port/" \
      "${probe[@]}" -q --json "$OUT/$which-$i.json" >/dev/null
  done
done
python3 - "$OUT" "$REPS" $VARIANTS <<'PY'
import json, statistics, sys
out, reps, variants = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
def figures(which):
    rows = []
    for i in range(1, reps + 1):
        d = json.load(open(f"{out}/{which}-{i}.json"))
        cpu = next(m["avg_cpu_pct"] for m in d["monitor"] if m["name"] == "server")
        steps = [s for s in d["steps"] if s.get("latency")]
        n = sum(s["count"] for s in steps)
        p50 = sum(s["latency"]["p50_us"] * s["count"] for s in steps) / n / 1000
        p99 = max(s["latency"]["p99_us"] for s in steps) / 1000
        reads = sum(s["scrapes"] for s in d.get("scrape", []))
        rows.append((cpu, p50, p99, reads))
    return rows
med = statistics.median
res = {}
print("| | server CPU, % of one core | step latency p50 (count-weighted mean of the steps' p50), ms | worst step p99, ms | probe reads |")
print("|---|---|---|---|---|")
for which in variants:
    rows = figures(which)
    res[which] = rows
    cell = lambda k, f: f"{f.format(med([r[k] for r in rows]))} ({' / '.join(f.format(r[k]) for r in rows)})"
    name = "probe off" if which == "off" else f"probe on, sampled every {which[2:]} ms"
    print(f"| {name} | {cell(0, '{:.2f}')} | {cell(1, '{:.3f}')} | {cell(2, '{:.2f}')} | {med([r[3] for r in rows]):.0f} |")
print()
for which in variants[1:]:
    d = med([r[0] for r in res[which]]) - med([r[0] for r in res["off"]])
    print(f"server CPU with the probe sampling every {which[2:]} ms minus without (medians): {d:+.2f} points of one core")
PY
