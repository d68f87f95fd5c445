#!/usr/bin/env bash
# bolide's Socket.IO users against Artillery's Socket.IO engine (artillery 2 from npm) on the same
# real Socket.IO 4 server (crates/bolide/tests/peers/sio-server.mjs), one scenario file for both:
#   1. bench/socketio-work.yml, REPS times interleaved: RATE users/s for DURATION s, each user 20
#      echoes and 20 acknowledgements; each generator's CPU (user + system, wait4: the process and
#      everything it started) per message it exchanged (the server's own counts: emits received,
#      echoes and acknowledgements sent), its peak RSS, and the counts both tools and the server
#      report;
#   2. bench/socketio-idle.yml at two sizes (IDLE_SMALL and IDLE_LARGE users that connect, join a
#      room and stay): the generator's peak RSS at each, and sessions per MB from the difference.
# The server runs pinned to SERVER_CORE, the generators to the other cores. Medians of the runs.
#
# Usage: bench/socketio.sh     (REPS=3 RATE=20 DURATION=20 IDLE_SMALL=100 IDLE_LARGE=1000)
# Needs node and npm (installs artillery@2.0.34 under bench/out once, and the peers' packages);
# traffic goes to 127.0.0.1 only; every run is bounded by its phases.
set -euo pipefail

REPS=${REPS:-3}
RATE=${RATE:-20}
DURATION=${DURATION:-20}
IDLE_SMALL=${IDLE_SMALL:-100}
IDLE_LARGE=${IDLE_LARGE:-1000}
SERVER_CORE=${SERVER_CORE:-0}
# shellcheck source=bench/lib.sh
. "$(dirname "$0")/lib.sh"
CLIENT_CORES=$(client_cores)
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
PEERS=$ROOT/crates/bolide/tests/peers
OUT=${OUT:-$ROOT/bench/out/socketio-$(date -u +%Y%m%dT%H%M%SZ)}
ART=${ART:-$ROOT/bench/out/artillery}
BOLIDE=${BOLIDE:-$ROOT/target/release/bolide}
mkdir -p "$OUT" "$ART"
[ -x "$BOLIDE" ] || (cd "$ROOT" && cargo build --release --quiet)
[ -d "$PEERS/node_modules/socket.io" ] || (cd "$PEERS" && npm ci --no-audit --no-fund --loglevel=error)
if [ ! -x "$ART/node_modules/.bin/artillery" ]; then
    log "installing artillery@2.0.34 (npm) into $ART"
    (cd "$ART" && PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm install --no-audit --no-fund --loglevel=error artillery@2.0.34 >/dev/null)
fi
ARTILLERY=$ART/node_modules/.bin/artillery

SERVER_PID=""
start_server() {
    taskset -c "$SERVER_CORE" node "$PEERS/sio-server.mjs" 0 >"$OUT/server.port" 2>>"$OUT/server.log" &
    SERVER_PID=$!
    for _ in $(seq 100); do
        PORT=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["port"])' "$OUT/server.port" 2>/dev/null) && return 0
        sleep 0.05
    done
    log "the Socket.IO server did not come up"; exit 1
}
stop_server() { [ -n "$SERVER_PID" ] && kill "$SERVER_PID" 2>/dev/null && wait "$SERVER_PID" 2>/dev/null || true; SERVER_PID=""; }
trap stop_server EXIT
counts() { python3 -c 'import urllib.request,sys; print(urllib.request.urlopen("http://127.0.0.1:%s/counts" % sys.argv[1]).read().decode())' "$PORT"; }

# One run of TOOL (bolide|artillery) on FILE with RATE/s for DUR s; writes NAME.time (wall, user,
# system, max RSS KB) and NAME.before/.after (the server's counts). A fresh server for each.
one() { # tool file rate dur name
    local tool=$1 file=$2 rate=$3 dur=$4 name=$5
    start_server
    counts >"$OUT/$name.before"
    local target="http://127.0.0.1:$PORT"
    case $tool in
        bolide)
            taskset -c "$CLIENT_CORES" /usr/bin/time -f '%e %U %S %M' -o "$OUT/$name.time" \
                "$BOLIDE" run "$file" --target "$target" --arrival-rate "$rate" -d "${dur}s" -q --json "$OUT/$name.json" >"$OUT/$name.log" 2>&1 &
            ;;
        artillery)
            local over
            over=$(printf '{"config":{"target":"%s","phases":[{"duration":%s,"arrivalRate":%s}]}}' "$target" "$dur" "$rate")
            taskset -c "$CLIENT_CORES" /usr/bin/time -f '%e %U %S %M' -o "$OUT/$name.time" \
                env ARTILLERY_DISABLE_TELEMETRY=true DO_NOT_TRACK=1 "$ARTILLERY" run --overrides "$over" --output "$OUT/$name.artillery.json" "$file" >"$OUT/$name.log" 2>&1 &
            ;;
    esac
    # The generator's whole process tree, summed (its workers included).
    local gen=$!
    python3 "$HERE/tree-rss.py" "$gen" >"$OUT/$name.tree" &
    local sampler=$!
    wait "$gen" || true
    wait "$sampler" || true
    sleep 1
    counts >"$OUT/$name.after"
    stop_server
}

# Artillery's own example (crates/bolide/tests/peers/artillery-socket-io.yml, unchanged), 5 users/s
# for 4 s by each tool: the server's counts side by side.
for tool in bolide artillery; do
    log "Artillery's example: $tool"
    one "$tool" "$PEERS/artillery-socket-io.yml" 5 4 "example-$tool"
done
for i in $(seq "$REPS"); do
    for tool in bolide artillery; do
        log "work $i/$REPS: $tool"
        one "$tool" "$HERE/socketio-work.yml" "$RATE" "$DURATION" "work-$tool-$i"
    done
done
# GraphQL (graphql-ws): bolide alone (Artillery has no graphql-ws engine), CPU per message from the
# server's counts (operations received; next, complete and error messages sent).
gql() { # name
    taskset -c "$SERVER_CORE" node "$PEERS/gql-server.mjs" 0 >"$OUT/gql.port" 2>>"$OUT/server.log" &
    local pid=$! gport=""
    for _ in $(seq 100); do
        gport=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["port"])' "$OUT/gql.port" 2>/dev/null) && break
        sleep 0.05
    done
    taskset -c "$CLIENT_CORES" /usr/bin/time -f '%e %U %S %M' -o "$OUT/$1.time" \
        "$BOLIDE" run "$HERE/graphql-work.yml" --target "http://127.0.0.1:$gport/graphql" -q --json "$OUT/$1.json" >"$OUT/$1.log" 2>&1 || true
    python3 -c 'import urllib.request,sys; print(urllib.request.urlopen("http://127.0.0.1:%s/counts" % sys.argv[1]).read().decode())' "$gport" >"$OUT/$1.counts"
    kill "$pid"; wait "$pid" 2>/dev/null || true
}
for i in $(seq "$REPS"); do
    log "graphql $i/$REPS: bolide"
    gql "graphql-$i"
done
for size in "$IDLE_SMALL" "$IDLE_LARGE"; do
    for tool in bolide artillery; do
        log "idle $size users: $tool"
        # All the users arrive within 5 s and stay 15 s: the peak holds every one of them.
        one "$tool" "$HERE/socketio-idle.yml" "$((size / 5))" 5 "idle-$tool-$size"
    done
done

python3 - "$OUT" "$REPS" "$IDLE_SMALL" "$IDLE_LARGE" <<'PY'
import json, statistics, sys
out, reps, small, large = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
def load(name):
    wall, user, sys_, rss = open(f"{out}/{name}.time").read().split()[-4:]
    before, after = (json.load(open(f"{out}/{name}.{k}")) for k in ("before", "after"))
    d = lambda k: after[k] - before[k] if isinstance(after.get(k), int) else 0
    received = sum(after["received"].values()) - sum(before["received"].values())
    tree_kb = int(open(f"{out}/{name}.tree").read().strip() or 0)
    return dict(cpu=float(user) + float(sys_), rss_mb=max(int(rss), tree_kb) / 1024, emits=received,
                answers=d("responses") + d("acks"), connections=d("connections"), upgrades=d("upgrades"),
                peak=after.get("peak_connected", 0))
print("# Artillery's own Socket.IO example, 5 users/s for 4 s: the server's counts\n")
print("| generator | connections | /personalised | echo received | userDetails received | responses | acks |")
print("|---|---:|---:|---:|---:|---:|---:|")
for tool in ("bolide", "artillery"):
    before, after = (json.load(open(f"{out}/example-{tool}.{k}")) for k in ("before", "after"))
    d = lambda *path: (lambda a, b: a - b)(*[
        __import__("functools").reduce(lambda v, k: v.get(k, 0) if isinstance(v, dict) else 0, path, x)
        for x in (after, before)])
    print(f"| {tool} | {d('connections')} | {d('namespaces', '/personalised')} | {d('received', 'echo')} | "
          f"{d('received', 'userDetails')} | {d('responses')} | {d('acks')} |")
print()
rows = {}
for tool in ("bolide", "artillery"):
    runs = [load(f"work-{tool}-{i}") for i in range(1, reps + 1)]
    for r in runs:
        r["per_msg_us"] = r["cpu"] / max(1, r["emits"] + r["answers"]) * 1e6
    rows[tool] = runs
print(f"# bench/socketio.sh: {reps} runs each, medians (range)\n")
print("| generator | CPU per message (µs) | CPU (s) | peak RSS (MB) | emits | answers | connections | upgrades |")
print("|---|---:|---:|---:|---:|---:|---:|---:|")
for tool, runs in rows.items():
    med = lambda k: statistics.median(r[k] for r in runs)
    rng = lambda k: f"{min(r[k] for r in runs):.1f}-{max(r[k] for r in runs):.1f}"
    print(f"| {tool} | {med('per_msg_us'):.1f} ({rng('per_msg_us')}) | {med('cpu'):.2f} | {med('rss_mb'):.0f} | "
          f"{med('emits'):.0f} | {med('answers'):.0f} | {med('connections'):.0f} | {med('upgrades'):.0f} |")
b, a = (statistics.median(r["per_msg_us"] for r in rows[t]) for t in ("bolide", "artillery"))
print(f"\nbolide / Artillery CPU per message: {b / a:.3f}")
print("\n(peak RSS: the generator's process tree, summed; users: the server's most connections at once)\n")
print("| generator | peak RSS at %d users (MB) | at %d users (MB) | sessions per MB |" % (small, large))
print("|---|---:|---:|---:|")
for tool in ("bolide", "artillery"):
    s, l = load(f"idle-{tool}-{small}"), load(f"idle-{tool}-{large}")
    slope = (l["rss_mb"] - s["rss_mb"]) / max(1, l["peak"] - s["peak"])
    per_mb = 1 / slope if slope > 0 else float("inf")
    print(f"| {tool} | {s['rss_mb']:.1f} ({s['peak']} at once) | {l['rss_mb']:.1f} ({l['peak']} at once) | {per_mb:.0f} |")
g = []
for i in range(1, reps + 1):
    wall, user, sys_, rss = open(f"{out}/graphql-{i}.time").read().split()[-4:]
    c = json.load(open(f"{out}/graphql-{i}.counts"))
    msgs = c["subscriptions"] + c["queries"] + c["mutations"] + c["nexts"] + c["completes"]
    g.append(((float(user) + float(sys_)) / max(1, msgs) * 1e6, msgs, c["nexts"], int(rss) / 1024))
g.sort()
m = g[len(g) // 2]
print(f"\nGraphQL (graphql-ws), bolide: {m[0]:.1f} µs of CPU per message (range {g[0][0]:.1f}-{g[-1][0]:.1f}), "
      f"{m[1]} messages ({m[2]} next), peak RSS {m[3]:.0f} MB")
PY
