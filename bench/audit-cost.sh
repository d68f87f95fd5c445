#!/usr/bin/env bash
# What the reactive-correctness audit costs: ../shared/meteor-server (Meteor 3.0.4's server
# packages serving the benchmark's tasks app), started afresh for every run (watched by
# --monitor; not a child of bolide, so that GNU time's peak RSS is bolide's alone), under
# tasks-reactive with USERS looping users for DURATION seconds, without --audit and with it,
# interleaved REPS times (the order alternating per round). Reports per variant the medians of:
# bolide's CPU per walk of the flow (its load threads' own clocks), bolide's peak RSS, the
# server's CPU, the messages the users received, the audit's own traffic (its truth reads), the
# walks done, and the users' step p50.
#
# Usage: bench/audit-cost.sh            (REPS=5 USERS=20 DURATION=20)
# Traffic goes to 127.0.0.1 only; every run is bounded by DURATION plus its users' flows.
set -euo pipefail

REPS=${REPS:-5}
USERS=${USERS:-20}
DURATION=${DURATION:-20}
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
SHARED=${SHARED:-$ROOT/../shared}
OUT=${OUT:-$ROOT/bench/out/audit-cost-$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$OUT"
cargo build --release --quiet --manifest-path "$ROOT/Cargo.toml" -p bolide
BOLIDE=$ROOT/target/release/bolide
MS=$OUT/meteor-server
cp -r "$SHARED/meteor-server" "$MS"
(cd "$MS" && npm ci --omit=optional --no-audit --no-fund --loglevel=error)
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
for i in $(seq "$REPS"); do
  order="off on"
  [ $((i % 2)) -eq 0 ] && order="on off"
  for which in $order; do
    port=$(free_port)
    audit=()
    [ "$which" = on ] && audit=(--audit)
    echo "run $i of $REPS: audit $which" >&2
    (cd "$MS" && exec node server.js --port "$port" --quiet) &
    server=$!
    for _ in $(seq 100); do
      python3 -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:$port/')" 2>/dev/null && break
      sleep 0.1
    done
    /usr/bin/time -f '%M' -o "$OUT/$which-$i.rss" "$BOLIDE" run tasks-reactive --target "http://127.0.0.1:$port" \
      --users "$USERS" -d "${DURATION}s" --think 0 --tasks 5 "${audit[@]}" --monitor "server=:$port" \
      -q --json "$OUT/$which-$i.json" >/dev/null || [ $? -le 1 ]
    kill "$server"; wait "$server" 2>/dev/null || true
  done
done
python3 - "$OUT" "$REPS" <<'PY'
import json, statistics, sys
out, reps = sys.argv[1], int(sys.argv[2])
med = statistics.median
def figures(which):
    rows = []
    for i in range(1, reps + 1):
        d = json.load(open(f"{out}/{which}-{i}.json"))
        rss_mb = int(open(f"{out}/{which}-{i}.rss").read().split()[-1]) / 1024
        s = d["summary"]
        walks = s["users"]["completed"]
        cpu_s = d["generator"]["cpu_s"] if "cpu_s" in d["generator"] else d["generator"]["cpu_ns"] / 1e9
        server = next(m["avg_cpu_pct"] for m in d["monitor"] if m["name"] == "server")
        a = d.get("audit") or {}
        steps = [x for x in d["steps"] if x.get("latency") and not x["name"].startswith("audit")]
        n = sum(x["count"] for x in steps)
        p50 = sum(x["latency"]["p50_us"] * x["count"] for x in steps) / n / 1000
        rows.append(dict(cpu_walk_us=cpu_s * 1e6 / max(walks, 1), rss_mb=rss_mb, server=server,
                         msgs=s["messages_in"], audit_msgs=a.get("messages_in", 0), reads=a.get("truth_reads", 0),
                         walks=walks, p50=p50, outcome=a.get("outcome", "-")))
    return rows
cols = [("cpu_walk_us", "bolide CPU per walk, µs", "{:.0f}"), ("rss_mb", "bolide peak RSS, MB", "{:.1f}"), ("server", "server CPU, % of a core", "{:.1f}"), ("msgs", "messages to the users", "{:.0f}"),
        ("audit_msgs", "audit's own messages", "{:.0f}"), ("reads", "truth reads", "{:.0f}"),
        ("walks", "walks done", "{:.0f}"), ("p50", "users' step p50, ms", "{:.3f}")]
print("| audit | " + " | ".join(c[1] for c in cols) + " | outcomes |")
print("|---|" + "---|" * (len(cols) + 1))
res = {}
for which in ["off", "on"]:
    rows = figures(which)
    res[which] = rows
    cells = [f.format(med([r[k] for r in rows])) for k, _, f in cols]
    print(f"| {which} | " + " | ".join(cells) + f" | {', '.join(sorted(set(r['outcome'] for r in rows)))} |")
print()
for k, name, f in cols[:3] + cols[6:7]:
    a, b = med([r[k] for r in res["off"]]), med([r[k] for r in res["on"]])
    print(f"{name}: {f.format(a)} without, {f.format(b)} with the audit (medians of {reps} interleaved runs)")
PY
