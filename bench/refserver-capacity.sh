#!/usr/bin/env bash
# How much the reference server holds on this machine (not a test):
#  1. idle DDP sessions: SESSIONS sessions held open for HOLD seconds, long enough for the server's
#     heartbeat pings (after 15-30 s of silence) to reach every one and be answered; the server's
#     RSS before and while they are held gives the RSS per session;
#  2. method round-trips per second with the server on one core (--threads 1, pinned to core 0) and
#     CALLERS sessions on core 1 calling a trivial method (fetchTasks on an empty collection) back to
#     back, REPS runs of 10 s, median.
# Usage: bench/refserver-capacity.sh    (SESSIONS=10000 HOLD=40 CALLERS=50 REPS=3)
# Traffic goes to 127.0.0.1 only; everything started is stopped by PID.
set -euo pipefail

SESSIONS=${SESSIONS:-10000}
HOLD=${HOLD:-40}
CALLERS=${CALLERS:-50}
REPS=${REPS:-3}
PORT=${PORT:-3100}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:-$ROOT/bench/out/refserver-capacity-$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$OUT"

command -v taskset >/dev/null || { DEBIAN_FRONTEND=noninteractive apt-get install -y -qq util-linux >/dev/null; }
# shellcheck source=bench/lib.sh
. "$ROOT/bench/lib.sh"
log "building bolide and the load client (release)"
(cd "$ROOT" && cargo build --release --quiet -p bolide && cargo build --release --quiet -p refserver --example ddp_load)
BOLIDE="$ROOT/target/release/bolide"
LOAD="$ROOT/target/release/examples/ddp_load"
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
need=$((SESSIONS + 100))
if [ "$(ulimit -n)" != unlimited ] && [ "$(ulimit -n)" -lt "$need" ]; then
    log "open-file limit $(ulimit -n) is below the $need this run needs"; exit 1
fi

trap stop_server EXIT
rss_kb() { awk '/^VmRSS/ {print $2}' "/proc/$SERVER_PID/status"; }

# 1. Idle sessions.
start_server 0-1 --max-sessions $((SESSIONS * 2))
sleep 1
base_kb=$(rss_kb)
log "idle: $SESSIONS sessions for ${HOLD}s (server RSS at start: ${base_kb} kB)"
"$LOAD" idle "127.0.0.1:$PORT" "$SESSIONS" "$HOLD" >"$OUT/idle.json" &
LOAD_PID=$!
peak_kb=$base_kb
while kill -0 "$LOAD_PID" 2>/dev/null; do
    now=$(rss_kb); [ "$now" -gt "$peak_kb" ] && peak_kb=$now
    sleep 1
done
wait "$LOAD_PID" || true
stop_server
python3 - "$OUT/idle.json" "$base_kb" "$peak_kb" <<'PY' | tee "$OUT/summary.md"
import json, sys
r = json.load(open(sys.argv[1])); base, peak = int(sys.argv[2]), int(sys.argv[3])
n = r["connected"]
print(f"### Idle DDP sessions\n")
print(f"| sessions asked | connected | failed | heartbeat pings answered | server RSS at start | server RSS peak | RSS per session |")
print(f"|---:|---:|---:|---:|---:|---:|---:|")
per = (peak - base) * 1024 / n if n else 0
print(f"| {r['sessions']:,} | {n:,} | {r['failed']:,} | {r['pings_answered']:,} | {base/1024:.1f} MB | {peak/1024:.1f} MB | {per/1024:.1f} KB |\n")
PY

# 2. Method round-trips on one server core.
for rep in $(seq "$REPS"); do
    start_server 0 --threads 1
    taskset -c 1 "$LOAD" calls "127.0.0.1:$PORT" "$CALLERS" 10 >"$OUT/calls-$rep.json"
    stop_server
    log "calls rep $rep: $(cat "$OUT/calls-$rep.json")"
done
python3 - "$OUT" "$REPS" "$CALLERS" <<'PY' | tee -a "$OUT/summary.md"
import json, statistics, sys
out, reps, callers = sys.argv[1], int(sys.argv[2]), sys.argv[3]
rates = [json.load(open(f"{out}/calls-{i}.json"))["calls_per_s"] for i in range(1, reps + 1)]
print("### Method round-trips, server on one core\n")
print(f"{callers} sessions calling fetchTasks back to back, {reps} runs of 10 s: "
      f"median {statistics.median(rates):,.0f} calls/s (runs: {', '.join(f'{r:,.0f}' for r in rates)})\n")
PY
log "raw outputs: $OUT"
