#!/usr/bin/env bash
# What the live dashboard costs: bolide http against bolide serve (127.0.0.1), with and without
# --dashboard (and a client following its event stream, as an open page does), interleaved, REPS
# times each. Reports the median responses per second of each, their ratio, and the dashboard
# threads' CPU that bolide measured itself (the summary's Generator row).
#
# Usage: bench/dashboard.sh                 (REPS=3 DURATION=10s CONNS=50)
# Traffic goes to 127.0.0.1 only; every run is bounded by DURATION.
set -euo pipefail

REPS=${REPS:-3}
DURATION=${DURATION:-10s}
CONNS=${CONNS:-50}
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
OUT=${OUT:-$ROOT/bench/out/dashboard-$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$OUT"
cargo build --release --quiet --manifest-path "$ROOT/Cargo.toml" -p bolide
BOLIDE=$ROOT/target/release/bolide
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
DPORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$BOLIDE" serve --port "$PORT" >"$OUT/serve.log" 2>&1 &
SERVER=$!
trap 'kill $SERVER 2>/dev/null || true' EXIT
sleep 1

for i in $(seq "$REPS"); do
  "$BOLIDE" http -d "$DURATION" -c "$CONNS" -t 1 --json "$OUT/plain-$i.json" "http://127.0.0.1:$PORT/ok" >"$OUT/plain-$i.txt"
  ( sleep 0.5; curl -s -N --max-time 60 "http://127.0.0.1:$DPORT/events" >"$OUT/events-$i.txt" || true
    curl -s --max-time 5 "http://127.0.0.1:$DPORT/report" >/dev/null || true ) &
  FOLLOWER=$!
  "$BOLIDE" http -d "$DURATION" -c "$CONNS" -t 1 --dashboard=127.0.0.1:$DPORT --json "$OUT/dash-$i.json" \
    "http://127.0.0.1:$PORT/ok" >"$OUT/dash-$i.txt" 2>"$OUT/dash-$i.err"
  wait "$FOLLOWER"
done
python3 - "$OUT" "$REPS" <<'PY'
import json, statistics, sys
out, reps = sys.argv[1], int(sys.argv[2])
def load(kind, i):
    return json.load(open(f"{out}/{kind}-{i}.json"))
plain = [load("plain", i)["summary"]["requests_per_s"] for i in range(1, reps + 1)]
dash = [load("dash", i)["summary"]["requests_per_s"] for i in range(1, reps + 1)]
cpu = [load("dash", i)["generator"].get("dashboard_cpu_pct") or 0.0 for i in range(1, reps + 1)]
snaps = [open(f"{out}/events-{i}.txt").read().count("event: snapshot") for i in range(1, reps + 1)]
print(f"runs: {reps} of each, interleaved")
print(f"without dashboard: median {statistics.median(plain):,.0f} req/s  {[round(x) for x in plain]}")
print(f"with dashboard:    median {statistics.median(dash):,.0f} req/s  {[round(x) for x in dash]}")
print(f"ratio with/without: {statistics.median(dash) / statistics.median(plain):.3f}")
print(f"dashboard threads' CPU (bolide's own measure): median {statistics.median(cpu):.2f}% of one core; snapshots received per run: {snaps}")
PY
