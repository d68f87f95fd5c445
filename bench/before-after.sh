#!/usr/bin/env bash
# One bolide against another, interleaved (OLD and NEW alternate: old first in odd rounds, new
# first in even ones, so that neither always runs on a warmer machine); medians of REPS runs each.
# Modes (MODES, all by default):
#   h1      CPU per request (each run's own figure, its load threads' clocks) and requests/s against
#           one nginx worker pinned to core 0 (../shared/bench/nginx-bench.conf), bolide pinned to
#           core 1, -t 1 -c CONNS for DURATION seconds, HTTP/1.1 keep-alive
#   h2      the same over HTTP/2 in clear (--h2c --streams 8) on nginx's h2c listener
#   ddp     CPU per DDP message: CALLERS users calling fetchTasks back to back on one generator
#           thread (core 1) against `bolide serve --threads 1` (core 0) for DURATION seconds
#   c1000   peak RSS (GNU time) of `bolide http -c 1000` against nginx for RSS_SECONDS
#   s10000  peak RSS of SESSIONS subscribed DDP sessions held by one generator thread (arrivals
#           over 10 s, each held HOLD s) against `bolide serve` on both cores
#   sio     CPU per Socket.IO message: bench/socketio-work.yml (echoes and acknowledgements) on one
#           generator thread (core 1) against the real socket.io 4 server of tests/peers (core 0)
#   gql     CPU per GraphQL message: bench/graphql-work.yml (subscriptions fed by mutations) on one
#           generator thread against the real graphql-ws server of tests/peers (core 0)
#   flood   peak RSS of one Socket.IO user whose `response` meets endless 64 KB events that never
#           answer (tests/peers/hostile.mjs sio-flood), for its 5 s step timeout
#   noisy   bolide's own peak RSS (generator.peak_rss_bytes: wait4's would count Chromium) for one
#           browser user on a page logging 20,000 errors a second while it thinks 8 s
#   sse     CPU per SSE event: streamed completions (64 tokens 2 ms apart) at SSE_RATE requests a
#           second on one generator thread (core 1) against bench/llm/stream_server.py (core 0,
#           Python's standard library) over HTTP/1.1 for DURATION seconds
#   sse-h2  streamed completions over HTTP/2 in clear (32 tokens, 4 ms apart) against
#           tests/peers/sse_server.py (sse-starlette) on hypercorn (core 0) at SSE_H2_RATE requests
#           a second (needs target/sse-venv, as .ci/run makes it)
#
# Usage: OLD=/path/to/bolide-before bench/before-after.sh   (NEW: this tree's release build;
#        REPS=5 CONNS=50 DURATION=8 CALLERS=50 RSS_SECONDS=5 SESSIONS=10000 HOLD=10 SSE_RATE=200
#        SSE_H2_RATE=20 MODES="h1 h2 ddp c1000 s10000 sio gql flood noisy sse sse-h2"; sio, gql and flood need `npm ci` in
#        crates/bolide/tests/peers, noisy Chromium)
# Traffic goes to 127.0.0.1 only; every run is bounded by its duration.
set -euo pipefail

REPS=${REPS:-5}
CONNS=${CONNS:-50}
DURATION=${DURATION:-8}
CALLERS=${CALLERS:-50}
RSS_SECONDS=${RSS_SECONDS:-5}
SESSIONS=${SESSIONS:-10000}
HOLD=${HOLD:-10}
MODES=${MODES:-h1 h2 ddp c1000 s10000 sio gql}
SSE_RATE=${SSE_RATE:-200}
SSE_H2_RATE=${SSE_H2_RATE:-20}
PEER_PORT=${PEER_PORT:-3220}
DDP_PORT=${DDP_PORT:-3210}
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
SHARED=${SHARED:-$ROOT/../shared}
OUT=${OUT:-$ROOT/bench/out/before-after-$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$OUT"
: "${OLD:?OLD=path to the bolide binary to compare with}"
# shellcheck source=bench/lib.sh
. "$HERE/lib.sh"
PEER_PID=""
# A node server of tests/peers on PEER_PORT, pinned to core 0.
start_peer() { # script [mode]
    taskset -c 0 node "$ROOT/crates/bolide/tests/peers/$1" "$PEER_PORT" ${2:+"$2"} >"$OUT/peer.log" 2>&1 &
    PEER_PID=$!
    for _ in $(seq 100); do
        grep -q port "$OUT/peer.log" 2>/dev/null && return 0
        sleep 0.05
    done
    log "the peer $1 did not start"
    exit 1
}
stop_peer() {
    if [ -n "$PEER_PID" ]; then kill "$PEER_PID" 2>/dev/null || true; wait "$PEER_PID" 2>/dev/null || true; fi
    PEER_PID=""
}
trap 'stop_nginx; stop_server; stop_peer' EXIT
export NGINX_H2C_PORT=8082
# Waits (up to 30 s) until something listens on a port of 127.0.0.1.
wait_port() {
    for _ in $(seq 300); do
        (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
        sleep 0.1
    done
    log "nothing listens on $1"
    exit 1
}
has() { case " $MODES " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }

apt=()
command -v nginx >/dev/null || apt+=(nginx-light)
command -v taskset >/dev/null || apt+=(util-linux)
[ -x /usr/bin/time ] || apt+=(time)
apt_install "${apt[@]}"
(cd "$ROOT" && cargo build --release --quiet -p bolide)
NEW=$ROOT/target/release/bolide
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
start_nginx

# The reference server (this tree's) for the DDP modes.
BOLIDE=$NEW
PORT=$DDP_PORT
TARGET="http://127.0.0.1:$DDP_PORT"
cat >"$OUT/calls.yml" <<YML
config:
  target: $TARGET
  phases: [{duration: $DURATION, users: $CALLERS}]
  ddp: {compression: false, cache: false}
scenarios:
  - flow:
      - connect
      - loop:
          - call: {method: fetchTasks}
        count: 200
      - disconnect
YML
cat >"$OUT/hold.yml" <<YML
config:
  target: $TARGET
  phases: [{duration: 10, arrivalRate: $((SESSIONS / 10))}]
  ddp: {compression: true, cache: true}
scenarios:
  - flow:
      - connect
      - subscribe: fetchTasks
      - think: ${HOLD}s
      - disconnect
YML

# The realtime protocols' workloads, aimed at the peer.
sed "s#http://127.0.0.1:3000#http://127.0.0.1:$PEER_PORT#" "$HERE/socketio-work.yml" >"$OUT/sio.yml"
sed "s#http://127.0.0.1:4000#http://127.0.0.1:$PEER_PORT#" "$HERE/graphql-work.yml" >"$OUT/gql.yml"

cat >"$OUT/flood.yml" <<YML
config:
  target: http://127.0.0.1:$PEER_PORT
  phases: [{duration: 1, arrivalCount: 1}]
  timeout: 5
scenarios:
  - engine: socketio
    flow:
      - emit: {channel: echo, data: {count: -1}}
        response: {channel: echoed, data: {done: true}}
YML
# Streamed completions, over HTTP/1.1 and HTTP/2.
for which in sse sse-h2; do
    rate=$SSE_RATE http2=false tokens=64
    [ "$which" = sse-h2 ] && rate=$SSE_H2_RATE http2=true tokens=32
    cat >"$OUT/$which.yml" <<YML
config:
  target: http://127.0.0.1:$PEER_PORT
  phases: [{duration: $DURATION, arrivalRate: $rate}]
  sse: {http2: $http2}
scenarios:
  - engine: sse
    flow:
      - chat: {model: m, prompt: "time people way water", max_tokens: $tokens}
YML
done
mkdir -p "$OUT/noisy"
cat >"$OUT/noisy/index.html" <<'HTML'
<!doctype html><title>noisy</title><p id=up>up</p><script>
setInterval(() => { for (let i = 0; i < 200; i++) console.error('boom ' + i + ' ' + 'x'.repeat(1000)); }, 10);
</script>
HTML
cat >"$OUT/noisy.yml" <<YML
config:
  target: http://127.0.0.1:$PEER_PORT
  phases: [{duration: 1, arrivalCount: 1}]
scenarios:
  - engine: browser
    flow:
      - goto: /
      - think: 8
      - waitForSelector: "#up"
YML

# One run of `mode` by `bin`, its document in $OUT/mode-which-i.json (and .time: user, system,
# wall, peak RSS in KB).
run_one() { # mode which bin i
    local mode=$1 which=$2 bin=$3 i=$4
    local json="$OUT/$mode-$which-$i.json" timed=(/usr/bin/time -o "$OUT/$mode-$which-$i.time" -f "%U %S %e %M")
    case $mode in
    h1) taskset -c 1 "$bin" http -t 1 -c "$CONNS" -d "${DURATION}s" -q --json "$json" http://127.0.0.1:8080/ ;;
    h2) taskset -c 1 "$bin" http -t 1 -c "$CONNS" -d "${DURATION}s" -q --json "$json" --h2c --streams 8 \
        "http://127.0.0.1:$NGINX_H2C_PORT/" ;;
    ddp) taskset -c 1 "$bin" run "$OUT/calls.yml" -t 1 -q --json "$json" ;;
    c1000) "${timed[@]}" "$bin" http -c 1000 -d "${RSS_SECONDS}s" -q --json "$json" http://127.0.0.1:8080/ ;;
    s10000) taskset -c 1 "${timed[@]}" "$bin" run "$OUT/hold.yml" -t 1 -q --json "$json" || true ;;
    sio) taskset -c 1 "$bin" run "$OUT/sio.yml" -t 1 -q --json "$json" ;;
    gql) taskset -c 1 "$bin" run "$OUT/gql.yml" -t 1 -q --json "$json" ;;
    flood) "${timed[@]}" "$bin" run "$OUT/flood.yml" -q --json "$json" || true ;;
    noisy) "$bin" run "$OUT/noisy.yml" -q --json "$json" || true ;;
    sse | sse-h2) taskset -c 1 "$bin" run "$OUT/$mode.yml" -t 1 -q --json "$json" ;;
    esac >/dev/null
}

for mode in h1 h2 ddp c1000 s10000 sio gql flood noisy sse sse-h2; do
    has "$mode" || continue
    case $mode in
    flood) start_peer hostile.mjs sio-flood ;;
    noisy)
        (cd "$OUT/noisy" && exec python3 -m http.server "$PEER_PORT" --bind 127.0.0.1) >"$OUT/peer.log" 2>&1 &
        PEER_PID=$!
        sleep 1
        ;;
    ddp) start_server 0 --threads 1 ;;
    s10000) start_server 0-1 --max-sessions $((SESSIONS * 2)) ;;
    sio) start_peer sio-server.mjs ;;
    gql) start_peer gql-server.mjs ;;
    sse)
        taskset -c 0 python3 "$HERE/llm/stream_server.py" "$PEER_PORT" 2 >"$OUT/peer.log" 2>&1 &
        PEER_PID=$!
        wait_port "$PEER_PORT"
        ;;
    sse-h2)
        (cd "$ROOT/crates/bolide/tests/peers" && exec taskset -c 0 "$ROOT/target/sse-venv/bin/python" -m hypercorn \
            sse_server:app --log-level warning --workers 0 --bind "127.0.0.1:$PEER_PORT") >"$OUT/peer.log" 2>&1 &
        PEER_PID=$!
        wait_port "$PEER_PORT"
        ;;
    esac
    for i in $(seq "$REPS"); do
        order=(old new)
        [ $((i % 2)) -eq 0 ] && order=(new old)
        for which in "${order[@]}"; do
            bin=$NEW
            [ "$which" = old ] && bin=$OLD
            log "run $i of $REPS: $mode $which"
            run_one "$mode" "$which" "$bin" "$i"
        done
    done
    stop_server
    stop_peer
done

python3 - "$OUT" "$REPS" "$MODES" <<'PY' | tee "$OUT/summary.md"
import json, os, statistics, sys
out, reps, modes = sys.argv[1], int(sys.argv[2]), sys.argv[3].split()
names = {
    "h1": "HTTP/1.1 keep-alive, CPU per request",
    "h2": "HTTP/2 h2c, 8 streams, CPU per request",
    "ddp": "DDP calls, CPU per message",
    "c1000": "HTTP/1.1, 1,000 connections, peak RSS",
    "s10000": "DDP, 10,000 held sessions, peak RSS",
    "sio": "Socket.IO echoes and acks, CPU per message",
    "gql": "GraphQL subscriptions and mutations, CPU per message",
    "flood": "Socket.IO response flooded by events that never answer, peak RSS",
    "noisy": "browser page logging 20,000 errors/s, bolide's own peak RSS",
    "sse": "SSE completions over HTTP/1.1, CPU per event",
    "sse-h2": "SSE completions over HTTP/2, CPU per event",
}
print("| what | bolide | median | runs | errors | also (median) |")
print("|---|---|---|---|---|---|")
for mode in modes:
    for which in ("old", "new"):
        docs, times = [], []
        for i in range(1, reps + 1):
            docs.append(json.load(open(f"{out}/{mode}-{which}-{i}.json")))
            t = f"{out}/{mode}-{which}-{i}.time"
            times.append(int(open(t).read().split()[3]) / 1024 if os.path.exists(t) else None)
        if mode in ("h1", "h2"):
            vals = [d["generator"]["cpu_us_per_request"] for d in docs]
            unit, also = "µs", f"{statistics.median(d['summary']['requests_per_s'] for d in docs):,.0f} req/s"
            errors = sum(d["summary"]["errors"] for d in docs)
        elif mode in ("sse", "sse-h2"):
            vals = [d["generator"]["cpu_us_per_message"] for d in docs]
            events = [d["summary"]["events"].get("sse.events", 0) for d in docs]
            unit, also = "µs", f"{statistics.median(events):,.0f} events"
            errors = sum(d["summary"]["step_errors"] for d in docs)
        elif mode in ("ddp", "sio", "gql"):
            vals = [d["generator"]["cpu_us_per_message"] for d in docs]
            msgs = [d["summary"]["messages_in"] + d["summary"]["messages_out"] for d in docs]
            unit, also = "µs", f"{statistics.median(msgs):,.0f} messages"
            errors = sum(d["summary"]["step_errors"] for d in docs)
        elif mode == "flood":
            vals, unit = times, "MB"
            also = f"{statistics.median(d['summary']['events'].get('socketio.events_received', 0) for d in docs):,.0f} events read"
            errors = sum(d["summary"]["step_errors"] for d in docs)
        elif mode == "noisy":
            vals, unit = [d["generator"]["peak_rss_bytes"] / 1048576 for d in docs], "MB"
            also = f"{statistics.median(d['browser']['console_errors'] for d in docs):,.0f} console errors counted"
            errors = sum(d["summary"]["step_errors"] for d in docs)
        else:
            vals = times
            unit = "MB"
            if mode == "c1000":
                also = f"{statistics.median(d['summary']['connects'] for d in docs):,.0f} connections"
                errors = sum(d["summary"]["errors"] for d in docs)
            else:
                also = f"{statistics.median(d['summary']['users']['completed'] for d in docs):,.0f} sessions completed"
                errors = sum(d["summary"]["users"]["failed"] for d in docs)
        each = ", ".join(f"{v:.2f}" for v in vals)
        print(f"| {names[mode]} | {which} | {statistics.median(vals):.2f} {unit} | {each} | {errors} | {also} |")
PY
