#!/usr/bin/env bash
# TTFT and ITL as bolide times them beside an independent client in Go (bench/llm/steady/client.go:
# goroutines that wake within microseconds, timing as vLLM's benchmark does), both against one
# steady streaming server in Go (bench/llm/steady/server.go: the first token TTFT_MS after the
# request, then one every ITL_MS, each due at a fixed time), the two clients alternated REPS times
# (the first of each round rotating) at the same RATE for DURATION seconds each. Prints each run and the
# medians, the gap between the two clients' medians, and each client's own spread over its runs
# (the noise floor any agreement is read against). Needs Go (the two programs are built here).
#   bench/llm/agreement.sh   (BOLIDE=target/release/bolide RATE=20 DURATION=30 TOKENS=32 TTFT_MS=20
#                             ITL_MS=2 REPS=5 SERVER_CORE=0 CLIENT_CORE=1 OUT=/tmp/agreement)
# Traffic goes to 127.0.0.1 only; every run is bounded by DURATION (and the client's 120 s timeout).
set -euo pipefail
BOLIDE=${BOLIDE:-target/release/bolide}
RATE=${RATE:-20}
DURATION=${DURATION:-30}
TOKENS=${TOKENS:-32}
TTFT_MS=${TTFT_MS:-20}
ITL_MS=${ITL_MS:-2}
REPS=${REPS:-5}
OUT=${OUT:-/tmp/agreement}
HERE=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$OUT"
BOLIDE=$(cd "$(dirname "$BOLIDE")" && pwd)/$(basename "$BOLIDE")
pin() { if command -v taskset >/dev/null; then taskset -c "$1" "${@:2}"; else "${@:2}"; fi; }
(cd "$HERE/steady" && go build -o "$OUT/steady-server" server.go && go build -o "$OUT/steady-client" client.go)
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
pin "${SERVER_CORE:-0}" "$OUT/steady-server" "$port" "$TTFT_MS" "$ITL_MS" >"$OUT/server.log" 2>&1 &
server=$!
trap 'kill $server 2>/dev/null || true' EXIT
for _ in $(seq 100); do grep -q port "$OUT/server.log" 2>/dev/null && break; sleep 0.1; done
cat >"$OUT/chat.yml" <<YML
config:
  target: http://127.0.0.1:$port
  phases: [{duration: $DURATION, arrivalRate: $RATE}]
scenarios:
  - engine: sse
    flow:
      - chat: { model: steady, prompt: "time people way water", max_tokens: $TOKENS, ignore_eos: true }
YML
for round in $(seq "$REPS"); do
    order="bolide go"
    [ $((round % 2)) -eq 0 ] && order="go bolide"
    for who in $order; do
        case $who in
            bolide) pin "${CLIENT_CORE:-1}" "$BOLIDE" run "$OUT/chat.yml" -t 1 -q --json "$OUT/bolide-$round.json" \
                        >/dev/null 2>"$OUT/bolide-$round.err" || true ;;
            go) GOGC=off pin "${CLIENT_CORE:-1}" "$OUT/steady-client" "http://127.0.0.1:$port" steady "$RATE" "$DURATION" "$TOKENS" \
                    >"$OUT/go-$round.json" 2>"$OUT/go-$round.err" || true ;;
        esac
    done
done
python3 - "$OUT" "$REPS" "$RATE" "$TOKENS" "$TTFT_MS" "$ITL_MS" <<'PY' | tee "$OUT/summary.md"
import json, statistics, sys
out, reps = sys.argv[1], int(sys.argv[2])
rate, tokens, ttft, itl = sys.argv[3:7]
keys = ["ttft_p50_ms", "ttft_p99_ms", "itl_p50_ms", "itl_p99_ms"]
def bolide(r):
    d = json.load(open(f"{out}/bolide-{r}.json"))
    s = d["summary"]
    m = s.get("measures", {})
    ms = lambda name, p: m[name][p] / 1000 if name in m else None
    return {"requests": s["events"].get("llm.requests", 0), "tokens": s["events"].get("llm.output_tokens", 0),
            "errors": s["step_errors"], "ttft_p50_ms": ms("llm.ttft", "p50_us"), "ttft_p99_ms": ms("llm.ttft", "p99_us"),
            "itl_p50_ms": ms("llm.itl", "p50_us"), "itl_p99_ms": ms("llm.itl", "p99_us")}
def go(r):
    return json.load(open(f"{out}/go-{r}.json"))
runs = {"bolide": [bolide(r) for r in range(1, reps + 1)], "Go client": [go(r) for r in range(1, reps + 1)]}
print(f"Steady server: first token {ttft} ms after the request, then one every {itl} ms, {tokens} tokens; {rate} requests/s.\n")
print("| client | round | requests | tokens | errors | TTFT p50 | TTFT p99 | ITL p50 | ITL p99 |")
print("|---|---|---|---|---|---|---|---|---|")
for who, rs in runs.items():
    for i, r in enumerate(rs, 1):
        print(f"| {who} | {i} | {r['requests']} | {r['tokens']} | {r['errors']} | " + " | ".join(f"{r[k]:.3f} ms" for k in keys) + " |")
med = {who: {k: statistics.median(r[k] for r in rs) for k in keys} for who, rs in runs.items()}
spread = {who: {k: (max(r[k] for r in rs) - min(r[k] for r in rs)) / med[who][k] * 100 for k in keys} for who, rs in runs.items()}
print("\n| | TTFT p50 | TTFT p99 | ITL p50 | ITL p99 |")
print("|---|---|---|---|---|")
for who in runs:
    print(f"| {who}, median of {reps} | " + " | ".join(f"{med[who][k]:.3f} ms" for k in keys) + " |")
print("| bolide against the Go client | " + " | ".join(f"{(med['bolide'][k] / med['Go client'][k] - 1) * 100:+.2f}%" for k in keys) + " |")
for who in runs:
    print(f"| {who}'s own spread (max - min over its runs) | " + " | ".join(f"{spread[who][k]:.2f}%" for k in keys) + " |")
PY
