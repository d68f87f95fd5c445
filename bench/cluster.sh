#!/usr/bin/env bash
# MeteorHacks' Cluster performance test on this machine: `bolide demo cluster` REPS times (the
# five shapes: control; 3 servers, one balancer; 3, 5 and 10 servers, all balancers; 20 looping
# cluster-churn users for 15 s each), then per shape the medians over the runs of subscriptions
# per minute per server (min and max over the servers), response time p50/p99 (subscribe ->
# ready), CPU of the entry points and of the others, RAM per server; beside the test's own
# figures (2,700 subscriptions/min for the control, over 2,500 per server with all balancers,
# response time under 8 ms), each shape's per-server rate as a share of the control's, and all the
# servers' subscriptions per minute together (on one machine, the figure that can grow).
#
# Usage: bench/cluster.sh          (REPS=3)
# Every server listens on 127.0.0.1 and is stopped by bolide after its shape; runs are bounded.
set -euo pipefail

REPS=${REPS:-3}
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
OUT=${OUT:-$ROOT/bench/out/cluster-$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$OUT"
cargo build --release --quiet --manifest-path "$ROOT/Cargo.toml" -p bolide
BOLIDE=$ROOT/target/release/bolide

for i in $(seq "$REPS"); do
  "$BOLIDE" demo cluster --out "$OUT/run-$i" >"$OUT/run-$i.txt" 2>&1
done
python3 - "$OUT" "$REPS" <<'PY'
import json, statistics as st, sys
out, reps = sys.argv[1], int(sys.argv[2])
runs = [json.load(open(f"{out}/run-{i}/cluster.json")) for i in range(1, reps + 1)]
seed = {"control": "2,700/min", "3 servers, one balancer": "-", "3 servers, all balancers": "> 2,500/min",
        "5 servers, all balancers": "> 2,500/min", "10 servers, all balancers": "> 2,500/min"}
med = lambda xs: st.median(xs) if xs else float("nan")
def per_min(shape):
    return [s["subscriptions"] * 60 / shape["duration_s"] for s in shape["servers"]]
def mean(xs):
    xs = [x for x in xs if x is not None]
    return sum(xs) / len(xs) if xs else None
print(f"runs: {reps}; users: {runs[0]['users']} looping, {runs[0]['duration']} per shape; medians over the runs")
print("| Scenario | Servers | Subs/min per server (min-max) | vs control | All servers | Response p50 / p99 | CPU entry | CPU others | RAM per server | Cluster test |")
print("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
control = None
for k, name in enumerate(s["name"] for s in runs[0]["shapes"]):
    shapes = [r["shapes"][k] for r in runs]
    lo = med([min(per_min(s)) for s in shapes])
    hi = med([max(per_min(s)) for s in shapes])
    mid = med([st.mean(per_min(s)) for s in shapes])
    if control is None:
        control = mid
    p50 = med([s["response_p50_us"] for s in shapes]) / 1e3
    p99 = med([s["response_p99_us"] for s in shapes]) / 1e3
    def cpu(entry):
        vals = [mean([v["avg_cpu_pct"] for v in s["servers"] if v["entry"] == entry]) for s in shapes]
        vals = [v for v in vals if v is not None]
        return f"{med(vals):.1f}%" if vals else "-"
    ram = med([mean([v["avg_rss_bytes"] for v in s["servers"]]) for s in shapes]) / 1e6
    n = len(shapes[0]["servers"])
    print(f"| {name} | {n} | {lo:,.0f}-{hi:,.0f} | {mid / control:.2f} | {mid * n:,.0f} | {p50:.1f} / {p99:.1f} ms | {cpu(True)} | {cpu(False)} | {ram:.1f} MB | {seed[name]} |")
failed = sum(s["failed_users"] for r in runs for s in r["shapes"])
print(f"failed user iterations over all runs: {failed}")
PY
