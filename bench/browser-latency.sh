#!/usr/bin/env bash
# The pages' method latency beside the protocol users' (issue 43's check): examples/browser-tasks.yml
# (3 browser users clicking the tasks page, 20 protocol users doing the same over DDP, one run)
# against a fresh `bolide serve`, the server pinned to core SERVER_CORE and bolide with its
# Chromium to the others, REPS times; per method, the median over the runs of the p50 in the
# pages (from their WebSocket frames, `method` to `result` and `updated`) and of the protocol
# users' call steps (the same span). Traffic goes to 127.0.0.1 only; each run lasts ~11 s.
#
# Usage: bench/browser-latency.sh          (REPS=3)
set -euo pipefail

REPS=${REPS:-3}
SERVER_CORE=${SERVER_CORE:-0}
# shellcheck source=bench/lib.sh
. "$(dirname "$0")/lib.sh"
CLIENT_CORES=$(client_cores)
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
OUT=${OUT:-$ROOT/bench/out/browser-latency-$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$OUT"
command -v chromium >/dev/null || { echo "needs chromium (apt-get install chromium)" >&2; exit 1; }
cargo build --release --quiet --manifest-path "$ROOT/Cargo.toml" -p bolide
BOLIDE=$ROOT/target/release/bolide
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
BASE=http://127.0.0.1:$PORT
SERVER=
stop_server() { [ -n "$SERVER" ] && { kill "$SERVER" 2>/dev/null || true; wait "$SERVER" 2>/dev/null || true; }; SERVER=; }
trap stop_server EXIT
for i in $(seq "$REPS"); do
  taskset -c "$SERVER_CORE" "$BOLIDE" serve --port "$PORT" >>"$OUT/serve.log" 2>&1 &
  SERVER=$!
  for _ in $(seq 50); do curl -fs -o /dev/null "$BASE/stats" && break; sleep 0.1; done
  echo "run $i of $REPS" >&2
  taskset -c "$CLIENT_CORES" "$BOLIDE" run "$ROOT/examples/browser-tasks.yml" --target "$BASE" -q --json "$OUT/run-$i.json" || true
  stop_server
done
python3 - "$OUT" "$REPS" <<'PY'
import json, statistics, sys
out, reps = sys.argv[1], int(sys.argv[2])
docs = [json.load(open(f"{out}/run-{i}.json")) for i in range(1, reps + 1)]
print(f"examples/browser-tasks.yml, {reps} runs, server on its own core; medians of the runs' p50, ms")
print()
print("| method | pages (in-page, CDP frames) | protocol users | pages - protocol |")
print("|---|---:|---:|---:|")
for name in [m["name"] for m in docs[0]["browser"]["methods"]]:
    page = statistics.median(next(m for m in d["browser"]["methods"] if m["name"] == name)["latency"]["p50_us"] for d in docs) / 1000
    proto = statistics.median(next(m for m in d["browser"]["methods"] if m["name"] == name)["protocol"]["p50_us"] for d in docs) / 1000
    print(f"| {name} | {page:.2f} | {proto:.2f} | {page - proto:.2f} |")
cost = [d["browser"]["cost"] for d in docs]
gen = [d["generator"] for d in docs]
print()
print(f"browsers: {statistics.median(c['cpu_pct_per_user'] for c in cost):.1f}% of a core per browser user "
      f"(peak pages open {statistics.median(c['peak_pages'] for c in cost):.0f}), "
      f"{statistics.median(c['rss_bytes_per_user'] for c in cost) / 1e6:.0f} MB each (Pss); "
      f"bolide's load threads {statistics.median(g['avg_cpu_pct'] for g in gen):.1f}% of a core in all")
PY
