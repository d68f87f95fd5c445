#!/usr/bin/env bash
# Execution segments across "machines": N bolide processes, each in a network namespace of its
# own, run `--segment I/N` of one fixed-rate plan from one shared start against one reference
# server in the root namespace; `bolide merge` makes the whole run of their documents. Beside it,
# one process (in a namespace of its own too) runs the whole plan at the same total rate. Per rep:
# sends scheduled vs sent + missed (exact), responses, p50 / p99 of both, and their ratio; then
# the medians over the reps.
#
# Usage (root): bench/segments.sh       (N=3 RATE=3000 CONNS=30 DURATION=10s REPS=3 ENDPOINT=/delay/2)
# ENDPOINT=/delay/2 makes each response take 2 ms at the server, so that latency is the server's and
# not the microseconds of CPU scheduling among N+1 processes on a small machine (ENDPOINT=/ shows those).
# The network: a bridge bseg-br (10.201.0.1/24, no route anywhere else) and namespaces bseg-1..N
# (10.201.0.11...) joined to it by veth pairs; the server listens on 10.201.0.1 only. Everything
# is created here and removed on exit (also on Ctrl-C and on errors). Every run is bounded by -d.
set -euo pipefail

N=${N:-3}
RATE=${RATE:-3000}
CONNS=${CONNS:-30}
DURATION=${DURATION:-10s}
REPS=${REPS:-3}
PORT=${PORT:-39301}
ENDPOINT=${ENDPOINT:-/delay/2}
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
OUT=${OUT:-$ROOT/bench/out/segments-$(date -u +%Y%m%dT%H%M%SZ)}
BRIDGE=bseg-br
SERVER_IP=10.201.0.1

if [ "$(id -u)" != 0 ]; then
  echo "bench/segments.sh creates network namespaces: run it as root" >&2
  exit 2
fi
mkdir -p "$OUT"
cargo build --release --quiet --manifest-path "$ROOT/Cargo.toml" -p bolide
BOLIDE=$ROOT/target/release/bolide

SERVER_PID=
cleanup() {
  [ -n "$SERVER_PID" ] && kill "$SERVER_PID" 2>/dev/null || true
  for i in $(seq "$N"); do ip netns del "bseg-$i" 2>/dev/null || true; done
  ip link del "$BRIDGE" 2>/dev/null || true
}
trap cleanup EXIT INT TERM
cleanup

ip link add "$BRIDGE" type bridge
ip addr add "$SERVER_IP/24" dev "$BRIDGE"
ip link set "$BRIDGE" up
for i in $(seq "$N"); do
  ns=bseg-$i
  ip netns add "$ns"
  ip link add "bseg-h$i" type veth peer name "bseg-n$i"
  ip link set "bseg-h$i" master "$BRIDGE" up
  ip link set "bseg-n$i" netns "$ns"
  ip -n "$ns" addr add "10.201.0.$((10 + i))/24" dev "bseg-n$i"
  ip -n "$ns" link set "bseg-n$i" up
  ip -n "$ns" link set lo up
done

"$BOLIDE" serve --host "$SERVER_IP" --port "$PORT" >"$OUT/server.txt" 2>&1 &
SERVER_PID=$!
for _ in $(seq 50); do
  ip netns exec bseg-1 "$BOLIDE" http -c 1 -n 1 -q "http://$SERVER_IP:$PORT/" >/dev/null 2>&1 && break
  sleep 0.1
done
URL="http://$SERVER_IP:$PORT$ENDPOINT"
PLAN=(http -c "$CONNS" --rps "$RATE" -d "$DURATION" -t 1 -q "$URL")

for r in $(seq "$REPS"); do
  # The whole plan in one process.
  ip netns exec bseg-1 "$BOLIDE" "${PLAN[@]}" --json "$OUT/single-$r.json"
  sleep 1
  # The same plan in N segments, one per namespace, from one start two seconds ahead.
  at=$(date -u -d "@$(( $(date +%s) + 3 ))" +%Y-%m-%dT%H:%M:%SZ)
  pids=()
  for i in $(seq "$N"); do
    ip netns exec "bseg-$i" "$BOLIDE" "${PLAN[@]}" --segment "$i/$N" --start-at "$at" \
      --json "$OUT/seg-$r-$i.json" &
    pids+=($!)
  done
  for p in "${pids[@]}"; do wait "$p"; done
  segs=()
  for i in $(seq "$N"); do segs+=("$OUT/seg-$r-$i.json"); done
  "$BOLIDE" merge "${segs[@]}" -o "$OUT/merged-$r.json" -q
  sleep 1
done

python3 - "$OUT" "$REPS" "$N" "$RATE" "$DURATION" "$CONNS" "$ENDPOINT" <<'PY'
import json, statistics as st, sys
out, reps, n, rate, dur, conns, endpoint = sys.argv[1], int(sys.argv[2]), sys.argv[3], float(sys.argv[4]), sys.argv[5], sys.argv[6], sys.argv[7]
rows, ratios50, ratios99 = [], [], []
for r in range(1, reps + 1):
    one = json.load(open(f"{out}/single-{r}.json"))["summary"]
    m = json.load(open(f"{out}/merged-{r}.json"))
    s = m["summary"]
    planned = lambda x: x["sent"] + x["missed_sends"]
    ratios50.append(s["latency"]["p50_us"] / one["latency"]["p50_us"])
    ratios99.append(s["latency"]["p99_us"] / one["latency"]["p99_us"])
    sus = [x["index"] for x in m["merged"]["segments"] if (x.get("generator") or {}).get("suspect")]
    rows.append((r, planned(one), planned(s), one["responses"], s["responses"], one["latency"]["p50_us"],
                 s["latency"]["p50_us"], one["latency"]["p99_us"], s["latency"]["p99_us"], len(m["merged"]["segments"]), sus))
print(f"plan: -c {conns} --rps {rate:g} -d {dur} {endpoint}; {n} segments in {n} network namespaces vs one process; {reps} reps")
print("| rep | scheduled (one / merged) | responses (one / merged) | p50 µs (one / merged) | p99 µs (one / merged) | segments | suspect |")
print("| ---: | ---: | ---: | ---: | ---: | ---: | --- |")
for (r, p1, pm, r1, rm, a50, b50, a99, b99, k, sus) in rows:
    print(f"| {r} | {p1} / {pm} | {r1} / {rm} | {a50} / {b50} | {a99} / {b99} | {k} | {', '.join(map(str, sus)) or 'none'} |")
print(f"\nmedian merged/one: p50 {st.median(ratios50):.3f}, p99 {st.median(ratios99):.3f} "
      f"(p99 within 5%: {'yes' if abs(st.median(ratios99) - 1) <= 0.05 else 'no'})")
PY
echo "documents in $OUT"
