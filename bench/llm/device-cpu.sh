#!/usr/bin/env bash
# bolide's CPU per streamed event on a quiet machine: the standard-library streaming server
# (bench/llm/stream_server.py, one per rate, on SERVER_CORE, 0) and bolide's release build (one load
# thread on BOLIDE_CORE, 1) streaming completions of TOKENS chunks ITL_MS apart at each RATE; runs of
# SHORT and LONG seconds, CPU per event = (CPU_long - CPU_short) / (events_long - events_short), and
# the document's own figure (its load thread's CPU per message). Prints a Markdown table.
#   bench/llm/device-cpu.sh   (BOLIDE=target/release/bolide RATES="50 200" TOKENS=64 ITL_MS=2
#                              SHORT=5 LONG=20 OUT=/tmp/device-cpu)
# Traffic goes to 127.0.0.1 only; every run is bounded by its duration.
set -euo pipefail
BOLIDE=${BOLIDE:-target/release/bolide}
RATES=${RATES:-50 200}
TOKENS=${TOKENS:-64}
ITL_MS=${ITL_MS:-2}
SHORT=${SHORT:-5}
LONG=${LONG:-20}
OUT=${OUT:-/tmp/device-cpu}
HERE=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$OUT"
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
pin() { if command -v taskset >/dev/null; then taskset -c "$1" "${@:2}"; else "${@:2}"; fi; }
# GNU time where there is one; else the document's own clocks alone.
timed() { # file command...
    if [ -x /usr/bin/time ]; then /usr/bin/time -f '%U %S' -o "$1" "${@:2}"; else echo "0 0" >"$1"; "${@:2}"; fi
}
echo "| rate (requests/s) | events/s | process CPU per event (marginal) | load thread's CPU per event (marginal) | load thread's CPU per message (document) | bolide's CPU (long run) |"
echo "|---|---|---|---|---|---|"
port=18200
for rate in $RATES; do
    port=$((port + 1))
    pin "${SERVER_CORE:-0}" python3 "$HERE/stream_server.py" "$port" "$ITL_MS" >"$OUT/server-$rate.log" 2>&1 &
    server=$!
    for _ in $(seq 100); do grep -q port "$OUT/server-$rate.log" 2>/dev/null && break; sleep 0.1; done
    for len in "$SHORT" "$LONG"; do
        cat >"$OUT/run-$rate-$len.yml" <<YML
config:
  target: http://127.0.0.1:$port
  phases: [{duration: $len, arrivalRate: $rate}]
scenarios:
  - engine: sse
    flow:
      - chat: { prompt: "time people way water", max_tokens: $TOKENS }
YML
        pin "${BOLIDE_CORE:-1}" bash -c "$(declare -f timed); timed \"\$@\"" _ "$OUT/run-$rate-$len.time" "$BOLIDE" run "$OUT/run-$rate-$len.yml" -t 1 -q \
            --json "$OUT/run-$rate-$len.json" >/dev/null 2>"$OUT/run-$rate-$len.err" || true
    done
    kill "$server" 2>/dev/null || true
    wait "$server" 2>/dev/null || true
    python3 - "$OUT" "$rate" "$SHORT" "$LONG" <<'PY'
import json, sys
out, rate, short, long_ = sys.argv[1:5]
def run(n):
    d = json.load(open(f"{out}/run-{rate}-{n}.json"))
    u, s = open(f"{out}/run-{rate}-{n}.time").read().split()[-2:]
    ev = d["summary"].get("events", {})
    g = d["generator"]
    return ev.get("sse.events", 0), float(u) + float(s), g.get("cpu_us_per_message"), d["summary"]["step_errors"], d["summary"]["duration_s"], g.get("cpu_s", 0)
a, b = run(short), run(long_)
per = (b[1] - a[1]) / (b[0] - a[0]) * 1e6 if b[0] > a[0] else float("nan")
load = (b[5] - a[5]) / (b[0] - a[0]) * 1e6 if b[0] > a[0] else float("nan")
print(f"| {rate} | {b[0] / b[4]:,.0f} | {per:.1f} µs | {load:.1f} µs | {b[2]:.1f} µs | {b[1]:.2f} s for {b[0]:,} events, {b[3]} step errors |")
PY
done
