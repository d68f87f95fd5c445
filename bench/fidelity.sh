#!/usr/bin/env bash
# Fidelity of a recorded scenario against the browsers it was recorded from, the way the Meteor
# benchmark loads a server (one headless Chromium page per user, arriving at a fixed rate):
#   1. bolide serve (127.0.0.1), one browser session of its tasks page recorded as a HAR
#      (crates/refserver/tests/node/record.mjs: add two tasks, remove one), turned into a
#      scenario by bolide record;
#   2. interleaved, REPS times: RATE users/s for DURATION seconds as browsers
#      (crates/refserver/tests/node/browsers.mjs: Playwright, Debian's Chromium, a context per
#      user), then as bolide's replay of the recorded scenario at the same rate, then as the same
#      replay paced like those browsers (the recorded thinks scaled so that a user stays connected
#      as long as the browsers' median user did: how long sessions overlap sets the fan-out; and
#      the page's script loaded, as a fresh browser context loads it);
#      and as bolide's own browser users doing the same session (bench/fidelity-pages.yml,
#      `engine: browser`: Chromium driven over the DevTools protocol, no Node);
#   3. each run measured from outside by bench/fidelity.py (server CPU and RSS, the generator's CPU
#      with all its descendants and its process tree's RSS, the server's own /stats counts) and
#      the medians put side by side, server CPU per user with the runs' range.
# The server runs pinned to core SERVER_CORE and every generator to the others (taskset), so that
# browsers busy on every core do not slow the server they measure; the server's idle CPU
# (IDLE_S seconds before each run, no load) is subtracted from its CPU over the run.
#
# Usage: bench/fidelity.sh            (REPS=3 RATE=2 DURATION=30, in seconds)
# Needs chromium (apt) and the node packages of crates/refserver/tests/node (npm ci); traffic goes
# to 127.0.0.1 only; each run is bounded by DURATION plus its users' sessions.
set -euo pipefail

REPS=${REPS:-3}
SERVER_CORE=${SERVER_CORE:-0}
# shellcheck source=bench/lib.sh
. "$(dirname "$0")/lib.sh"
CLIENT_CORES=$(client_cores)
export IDLE_S=${IDLE_S:-3}
RATE=${RATE:-2}
DURATION=${DURATION:-30}
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
NODE=$ROOT/crates/refserver/tests/node
OUT=${OUT:-$ROOT/bench/out/fidelity-$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$OUT"
command -v chromium >/dev/null || { echo "needs chromium (apt-get install chromium)" >&2; exit 1; }
[ -d "$NODE/node_modules/playwright-core" ] || (cd "$NODE" && npm ci --no-audit --no-fund --loglevel=error)
cargo build --release --quiet --manifest-path "$ROOT/Cargo.toml" -p bolide
BOLIDE=$ROOT/target/release/bolide
PORT=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
BASE=http://127.0.0.1:$PORT
# A fresh server for the recording and for each run: the same state (no tasks left by the run
# before, which every new subscriber would receive) and the same memory to start from.
SERVER=
start_server() {
  taskset -c "$SERVER_CORE" "$BOLIDE" serve --port "$PORT" >>"$OUT/serve.log" 2>&1 &
  SERVER=$!
  for _ in $(seq 50); do curl -fs -o /dev/null "$BASE/stats" && return 0; sleep 0.1; done
  echo "bolide serve did not come up" >&2; exit 1
}
stop_server() { kill "$SERVER" 2>/dev/null || true; wait "$SERVER" 2>/dev/null || true; }
trap stop_server EXIT
start_server

# 1. One browser session, recorded, and what it cost the server.
before=$(curl -fs "$BASE/stats")
node "$NODE/record.mjs" "$BASE" "$OUT/session.har" >"$OUT/session.json"
after=$(curl -fs "$BASE/stats")
"$BOLIDE" record "$OUT/session.har" -o "$OUT/session.yml" >"$OUT/record.txt"
stop_server
python3 - "$before" "$after" "$RATE" "$DURATION" "$REPS" >"$OUT/meta.json" <<'PY'
import json, sys
b, a = json.loads(sys.argv[1]), json.loads(sys.argv[2])
print(json.dumps({"session": {"calls": a["methods_called"] - b["methods_called"],
                              "subs": a["subscriptions_ready"] - b["subscriptions_ready"]},
                  "rate": float(sys.argv[3]), "seconds": float(sys.argv[4]), "reps": int(sys.argv[5])}))
PY

# 2. Interleaved runs.
for i in $(seq "$REPS"); do
  echo "run $i of $REPS: browsers" >&2
  start_server
  python3 "$HERE/fidelity.py" run "$SERVER" "$BASE" "$OUT/browsers-$i.json" -- \
    taskset -c "$CLIENT_CORES" node "$NODE/browsers.mjs" "$BASE" "$RATE" "$DURATION"
  stop_server
  echo "run $i of $REPS: bolide" >&2
  start_server
  python3 "$HERE/fidelity.py" run "$SERVER" "$BASE" "$OUT/bolide-$i.json" -- \
    taskset -c "$CLIENT_CORES" "$BOLIDE" run "$OUT/session.yml" --arrival-rate "$RATE" -d "${DURATION}s" -q --json "$OUT/bolide-run-$i.json"
  stop_server
  # Paced like the browsers of this round (thinks scaled to their median connected time), and
  # loading the page's script as a fresh browser context does (--keep-static).
  scale=$(python3 "$HERE/fidelity.py" scale "$OUT/browsers-$i.json" "$OUT/session.yml")
  "$BOLIDE" record "$OUT/session.har" --think-scale "$scale" --think-max 10m --keep-static -o "$OUT/paced-$i.yml" >/dev/null
  echo "run $i of $REPS: bolide paced like the browsers (thinks x $scale, page assets too)" >&2
  start_server
  python3 "$HERE/fidelity.py" run "$SERVER" "$BASE" "$OUT/paced-$i.json" -- \
    taskset -c "$CLIENT_CORES" "$BOLIDE" run "$OUT/paced-$i.yml" --arrival-rate "$RATE" -d "${DURATION}s" -q --json "$OUT/paced-run-$i.json"
  stop_server
  # The same session as bolide's own browser users: real Chromium pages driven over CDP.
  echo "run $i of $REPS: bolide browser users (engine: browser)" >&2
  start_server
  python3 "$HERE/fidelity.py" run "$SERVER" "$BASE" "$OUT/pages-$i.json" -- \
    taskset -c "$CLIENT_CORES" "$BOLIDE" run "$HERE/fidelity-pages.yml" --target "$BASE" --arrival-rate "$RATE" -d "${DURATION}s" -q --json "$OUT/pages-run-$i.json"
  stop_server
done

echo "server on core $SERVER_CORE, users on $CLIENT_CORES; idle CPU measured for $IDLE_S s before each run" >"$OUT/pinning.txt"

# 3. Side by side.
python3 "$HERE/fidelity.py" table "$OUT" | tee "$OUT/table.md"
