#!/usr/bin/env bash
# What `bolide record` takes to turn a long session into a scenario: HARs of FRAMES WebSocket
# frames (a page calling a method once a second for hours, half sent, half received) made by
# python, one whose calls repeat (folded into a loop) and one whose calls all differ (refused:
# too large for a scenario), and a small one. For each: the HAR's size, bolide's peak resident
# memory (GNU time's maximum RSS), its ratio to the HAR's size, the wall time and what it said.
# BINARIES: bolide binaries to compare (default: this checkout's release build), e.g. an older
# commit's build beside this one.
#
# Usage: bench/record-memory.sh          (FRAMES=300000)
# No network traffic.
set -euo pipefail

FRAMES=${FRAMES:-300000}
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
OUT=${OUT:-$ROOT/bench/out/record-memory-$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$OUT"
if [ -z "${BINARIES:-}" ]; then
    cargo build --release --quiet --manifest-path "$ROOT/Cargo.toml" -p bolide
    BINARIES=$ROOT/target/release/bolide
fi
command -v /usr/bin/time >/dev/null || { echo "needs GNU time (apt install time)" >&2; exit 1; }

python3 - "$FRAMES" "$OUT" <<'PY'
import json, sys
frames, out = int(sys.argv[1]), sys.argv[2]
def har(calls, vary):
    t0, msgs = 1795477935.0, []
    def f(kind, time, m): msgs.append({"type": kind, "time": time, "opcode": 1, "data": json.dumps(m)})
    f("send", t0, {"msg": "connect", "version": "1", "support": ["1"]})
    f("receive", t0 + .01, {"msg": "connected", "session": "s"})
    t = t0 + 0.1
    for i in range(calls):
        params = [{"room": "lobby", "text": f"message {i}"}] if vary else [{"room": "lobby"}]
        f("send", t, {"msg": "method", "method": "poll", "params": params, "id": str(i + 1)})
        f("receive", t + 0.005, {"msg": "result", "id": str(i + 1), "result": {"ok": True, "n": i}})
        t += 1.0 + (i % 7) * 0.01
    return {"log": {"version": "1.2", "entries": [{"request": {"url": "ws://127.0.0.1:3000/websocket", "method": "GET", "headers": []},
            "response": {"status": 101, "headers": []}, "_webSocketMessages": msgs}]}}
for name, calls, vary in [("small", 3, False), ("repeats", frames // 2, False), ("all-different", frames // 2, True)]:
    json.dump(har(calls, vary), open(f"{out}/{name}.har", "w"))
PY

printf '%-28s %-14s %10s %12s %7s %8s  %s\n' binary har "HAR MB" "peak RSS MB" ratio "wall s" "outcome"
for bin in $BINARIES; do
    for name in small repeats all-different; do
        har=$OUT/$name.har
        /usr/bin/time -f '%M %e' -o "$OUT/time" "$bin" record "$har" -o "$OUT/$name.yml" >"$OUT/$name.out" 2>"$OUT/$name.err" && code=0 || code=$?
        read -r kb secs < <(tail -1 "$OUT/time")
        size=$(stat -c %s "$har")
        said=$(grep -hE '^error|folded' "$OUT/$name.err" "$OUT/$name.out" | head -1 | cut -c1-90)
        awk -v b="$(basename "$(dirname "$(dirname "$bin")")")/$(basename "$bin")" -v n="$name" -v s="$size" -v k="$kb" -v w="$secs" -v c="$code" -v o="$said" \
            'BEGIN { r = s > 1e6 ? sprintf("%.2f", (k*1024)/s) : "-"; printf "%-28s %-14s %10.1f %12.1f %7s %8.2f  exit %s %s\n", b, n, s/1e6, k/1024, r, w, c, o }'
    done
done
