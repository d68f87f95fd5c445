#!/usr/bin/env bash
# Autobahn|Testsuite (the WebSocket conformance suite) against bolide's two WebSocket
# implementations: the reference server and the client that virtual users speak through.
#
# server: the suite's fuzzing client against `bolide serve --ws-echo`, whose /echo route sends
#   every message back through the same framing, compression, ping and close code as its DDP
#   routes.
# client: the suite's fuzzing server against crates/bolide/examples/ws_echo.rs, bolide's DDP
#   client framing (the same reader, inflater, ping and close handling) in an echo loop.
# The suite runs on Python 2.7: this script makes a virtualenv with `autobahntestsuite` from PyPI
# (Python 2.7 from pyenv if present, else `python2`).
#
#   bench/autobahn.sh [server|client]          # every case but 9.* (performance: minutes per case)
#   CASES='9.*' bench/autobahn.sh [server|client]  # only those (any case pattern the suite accepts)
#
# Writes bench/out/autobahn/ (the suite's HTML and JSON reports) and prints a summary by verdict.
# Traffic stays on 127.0.0.1; everything started is stopped on exit.
set -euo pipefail
cd "$(dirname "$0")/.."
MODE=${1:-server}
case "$MODE" in server|client) ;; *) echo "usage: bench/autobahn.sh [server|client]" >&2; exit 2;; esac
OUT=bench/out/autobahn
CASES=${CASES:-}
PORT=${PORT:-9011}
mkdir -p "$OUT"

PY2=""
for p in "${PYENV_ROOT:-$HOME/.pyenv}"/versions/2.7*/bin/python python2.7 python2; do
    if command -v "$p" >/dev/null 2>&1; then PY2=$p; break; fi
done
[ -n "$PY2" ] || { echo "autobahn: needs Python 2.7 (pyenv install 2.7.18, or a python2 package)" >&2; exit 2; }
VENV=$(realpath -m "${AUTOBAHN_VENV:-$OUT/venv}")
if [ ! -x "$VENV/bin/wstest" ]; then
    "$PY2" -m pip install --quiet --user virtualenv >/dev/null 2>&1 || true
    "$PY2" -m virtualenv -q "$VENV"
    "$VENV/bin/pip" install --quiet autobahntestsuite
fi

if [ -z "$CASES" ]; then cases='"*"'; exclude='["9.*"]'; else cases="\"$CASES\""; exclude='[]'; fi
wait_port() {
    for _ in $(seq 100); do
        python3 -c "import socket; socket.create_connection(('127.0.0.1', $PORT), 1)" 2>/dev/null && return 0
        sleep 0.1
    done
    echo "autobahn: nothing listens on 127.0.0.1:$PORT" >&2; exit 1
}

if [ "$MODE" = server ]; then
    cargo build --release --locked -p bolide --quiet
    target/release/bolide serve --port "$PORT" --ws-echo --max-message-bytes 16777216 \
        --max-pending-bytes 67108864 >"$OUT/server.log" 2>&1 &
    SERVER=$!
    trap 'kill $SERVER 2>/dev/null || true' EXIT
    wait_port
    cat >"$OUT/fuzzingclient.json" <<JSON
{
  "outdir": "$(realpath -m "$OUT/reports")",
  "servers": [{"agent": "bolide-serve", "url": "ws://127.0.0.1:$PORT/echo"}],
  "cases": [$cases],
  "exclude-cases": $exclude,
  "exclude-agent-cases": {}
}
JSON
    (cd "$OUT" && "$VENV/bin/wstest" -m fuzzingclient -s fuzzingclient.json >wstest.log 2>&1) || {
        echo "autobahn: wstest failed; see $OUT/wstest.log" >&2; exit 1; }
    INDEX=$OUT/reports/index.json
else
    cargo build --release --locked -p bolide --example ws_echo --quiet
    cat >"$OUT/fuzzingserver.json" <<JSON
{
  "url": "ws://127.0.0.1:$PORT",
  "outdir": "$(realpath -m "$OUT/clients")",
  "cases": [$cases],
  "exclude-cases": $exclude,
  "exclude-agent-cases": {}
}
JSON
    (cd "$OUT" && exec "$VENV/bin/wstest" -m fuzzingserver -s fuzzingserver.json >wstest-server.log 2>&1) &
    SERVER=$!
    trap 'kill $SERVER 2>/dev/null || true' EXIT
    wait_port
    target/release/examples/ws_echo "ws://127.0.0.1:$PORT" bolide-client 2>"$OUT/client.log" || {
        echo "autobahn: the echo client failed; see $OUT/client.log" >&2; exit 1; }
    INDEX=$OUT/clients/index.json
fi

python3 - "$INDEX" <<'PY'
import json, sys, collections
index = json.load(open(sys.argv[1]))
for agent, cases in index.items():
    by = collections.Counter(c["behavior"] for c in cases.values())
    close = collections.Counter(c["behaviorClose"] for c in cases.values())
    print(f"{agent}: {len(cases)} cases: " + ", ".join(f"{n} {k}" for k, n in sorted(by.items())))
    print("  closing handshake: " + ", ".join(f"{n} {k}" for k, n in sorted(close.items())))
    bad = sorted((k for k, c in cases.items() if c["behavior"] in ("FAILED", "UNIMPLEMENTED")),
                 key=lambda k: [int(p) for p in k.split(".")])
    if bad:
        print("  not passed: " + " ".join(bad))
    nonstrict = sorted((k for k, c in cases.items() if c["behavior"] == "NON-STRICT"),
                       key=lambda k: [int(p) for p in k.split(".")])
    if nonstrict:
        print("  non-strict: " + " ".join(nonstrict))
PY
