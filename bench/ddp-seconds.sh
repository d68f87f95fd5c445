#!/usr/bin/env bash
# What the DDP response time per second costs the generator: tasks-reactive at 4 arrivals/s
# against bolide serve (127.0.0.1), by this checkout and by BASE (a revision without it, built in
# a git worktree), interleaved, REPS times each. Reports the load threads' CPU (the document's
# generator.avg_cpu_pct, % of one core) of each run and the medians.
#
# Usage: bench/ddp-seconds.sh            (REPS=3 DURATION=20s BASE=b2af942^)
# Traffic goes to 127.0.0.1 only; every run is bounded by DURATION plus its users' flows.
set -euo pipefail

REPS=${REPS:-3}
DURATION=${DURATION:-20s}
BASE=${BASE:-b2af942^}
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
OUT=${OUT:-$ROOT/bench/out/ddp-seconds-$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$OUT"
cargo build --release --quiet --manifest-path "$ROOT/Cargo.toml" -p bolide
NEW=$ROOT/target/release/bolide
WT=$OUT/base-src
git -C "$ROOT" worktree add -q --detach "$WT" "$BASE"
trap 'git -C "$ROOT" worktree remove --force "$WT" 2>/dev/null || true; kill $SERVER 2>/dev/null || true' EXIT
SERVER=
CARGO_TARGET_DIR=$OUT/base-target cargo build --release --quiet --manifest-path "$WT/Cargo.toml" -p bolide
OLD=$OUT/base-target/release/bolide
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
"$NEW" serve --port "$PORT" >"$OUT/serve.log" 2>&1 &
SERVER=$!
sleep 1
for i in $(seq "$REPS"); do
  for which in base new; do
    bin=$OLD; [ "$which" = new ] && bin=$NEW
    "$bin" run tasks-reactive --target "http://127.0.0.1:$PORT" --arrival-rate 4 -d "$DURATION" -q \
      --json "$OUT/$which-$i.json" >/dev/null
  done
done
python3 - "$OUT" "$REPS" <<'PY'
import json, statistics, sys
out, reps = sys.argv[1], int(sys.argv[2])
res = {}
for which in ("base", "new"):
    cpu = [json.load(open(f"{out}/{which}-{i}.json"))["generator"]["avg_cpu_pct"] for i in range(1, reps + 1)]
    res[which] = cpu
    print(f"{which:5} load threads' CPU (% of one core): median {statistics.median(cpu):.2f}  runs {' / '.join(f'{c:.2f}' for c in cpu)}")
print(f"ratio new/base: {statistics.median(res['new']) / statistics.median(res['base']):.2f}")
PY
