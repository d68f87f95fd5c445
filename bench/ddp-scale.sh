#!/usr/bin/env bash
# bolide's DDP virtual users at scale (not a test), against `bolide serve` on loopback:
#  1. SESSIONS subscribed sessions held by ONE generator thread for HOLD seconds (long enough for
#     the server's heartbeat pings to reach every session): peak generator RSS, pings answered;
#  2. method calls per second with one generator thread pinned to core 1 and the server on core 0
#     (CALLERS users calling fetchTasks back to back), with the generator's CPU use;
#  3. the generator's own CPU while running tasks-reactive at 4 arrivals/s for 60 s (the Meteor
#     benchmark's load) against the reference server with poll reactivity.
# Usage: bench/ddp-scale.sh     (SESSIONS=10000 HOLD=45 CALLERS=50 CALLS=10000; PARTS="1 2 3")
set -euo pipefail
SESSIONS=${SESSIONS:-10000}
HOLD=${HOLD:-45}
CALLERS=${CALLERS:-50}
CALLS=${CALLS:-10000}
PORT=${PORT:-3200}
PARTS=${PARTS:-1 2 3}
part() { case " $PARTS " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }
ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=${OUT:-$ROOT/bench/out/ddp-scale-$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$OUT"
# shellcheck source=bench/lib.sh
. "$ROOT/bench/lib.sh"
[ -x /usr/bin/time ] || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq time >/dev/null
log "building bolide (release)"
(cd "$ROOT" && cargo build --release --quiet -p bolide)
BOLIDE="$ROOT/target/release/bolide"
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
if [ "$(ulimit -n)" != unlimited ] && [ "$(ulimit -n)" -lt $((SESSIONS + 100)) ]; then
    log "open-file limit $(ulimit -n) is below $((SESSIONS + 100))"; exit 1
fi
trap stop_server EXIT
TARGET="http://127.0.0.1:$PORT"
measure() { # name, bolide args... ; writes $OUT/name.json and $OUT/name.time
    local name=$1; shift
    taskset -c 1 /usr/bin/time -o "$OUT/$name.time" -f "%U %S %e %M" "$BOLIDE" run "$@" -q --json "$OUT/$name.json" || true
}

# 1. Held sessions.
if part 1; then
rate=$((SESSIONS / 20))
cat >"$OUT/hold.yml" <<YML
config:
  target: $TARGET
  phases: [{duration: 20, arrivalRate: $rate}]
  ddp: {compression: true, cache: true}
scenarios:
  - flow:
      - connect
      - subscribe: fetchTasks
      - think: ${HOLD}s
      - disconnect
YML
start_server 0-1 --max-sessions $((SESSIONS * 2))
log "1. $SESSIONS sessions held ${HOLD}s on one generator thread"
measure hold "$OUT/hold.yml" -t 1
stop_server
fi

# 2. Method calls.
if part 2; then
cat >"$OUT/calls.yml" <<YML
config:
  target: $TARGET
  phases: [{duration: 1, arrivalCount: $CALLERS}]
  ddp: {compression: false, cache: false}
scenarios:
  - flow:
      - connect
      - loop:
          - call: {method: fetchTasks}
        count: $CALLS
      - disconnect
YML
start_server 0 --threads 1
log "2. $CALLERS users x $CALLS calls, one generator thread on core 1, server on core 0"
measure calls "$OUT/calls.yml" -t 1
stop_server
fi

# 3. tasks-reactive at 4/s for 60 s.
if part 3; then
start_server 0 --threads 1 --reactivity poll
log "3. tasks-reactive, 4 arrivals/s for 60 s, poll reactivity"
measure reactive tasks-reactive --target "$TARGET" --arrival-rate 4 --duration 60s -t 1
stop_server
fi

python3 - "$OUT" "$SESSIONS" <<'PY' | tee "$OUT/summary.md"
import json, os, sys
out, sessions = sys.argv[1], int(sys.argv[2])

def load(name):
    doc = json.load(open(f"{out}/{name}.json"))
    user, sys_, wall, rss = open(f"{out}/{name}.time").read().split()
    return doc, float(user) + float(sys_), float(wall), int(rss)

if os.path.exists(f"{out}/hold.json"):
    doc, cpu, wall, rss = load("hold")
    s = doc["summary"]
    print("### Held sessions, one generator thread\n")
    print("| sessions | completed | failed | server pings answered | generator peak RSS | RSS per session |")
    print("|---:|---:|---:|---:|---:|---:|")
    print(f"| {s['users']['launched']:,} | {s['users']['completed']:,} | {s['users']['failed']:,} | {s['pings_answered']:,} | {rss/1024:.1f} MB | {rss/max(1,sessions):.1f} KB |\n")
if os.path.exists(f"{out}/calls.json"):
    doc, cpu, wall, rss = load("calls")
    step = next(x for x in doc["steps"] if x["name"] == "call fetchTasks")
    secs = doc["summary"]["total_time_s"]
    print("### Method calls, one generator thread (core 1), server on core 0\n")
    print(f"{step['count']:,} calls ({step['errors']} errors) in {secs:.1f} s: **{step['count']/secs:,.0f} calls/s**; generator CPU {cpu:.1f} s over {wall:.1f} s wall ({100*cpu/wall:.0f}% of a core); {1e6*cpu/max(1,step['count']):.1f} µs of generator CPU per call; call p50 {step['latency']['p50_us']} µs, p99 {step['latency']['p99_us']} µs\n")
if os.path.exists(f"{out}/reactive.json"):
    doc, cpu, wall, rss = load("reactive")
    s = doc["summary"]
    print("### tasks-reactive, 4 arrivals/s for 60 s (poll reactivity)\n")
    print(f"{s['users']['launched']} users, {s['users']['completed']} completed, {s['users']['failed']} failed; Time {s['total_time_s']:.1f} s; {s['messages_in']:,} messages in; generator CPU {cpu:.2f} s over {wall:.1f} s wall: **{100*cpu/wall:.2f}% of one core**; peak RSS {rss/1024:.1f} MB\n")
PY
log "raw outputs: $OUT"
