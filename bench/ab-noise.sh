#!/usr/bin/env bash
# Does the interleaved A/B (`bench --parameter-list`) keep its promises on this machine?
#
#  1. A/A: the reference server's /delay/10 against itself, REPS times: how often the gate
#     `rps<-5%` fails (a false alarm; target: at most 5%).
#  2. A/B: /delay/10 against /delay/11 (1 ms, 10% of the server's delay, more per request: about
#     -8% requests per second at -c 2), REPS times: how often the gate fails (a detection; target:
#     at least 90% with the runs the MDE says are enough, RUNS=2 here).
#  3. DDP: Meteor's own server (../shared/meteor-server) with compression on and off under
#     ddp-calls (bench.echo, USERS users), RUNS runs each, interleaved: the comparison, once.
#
#  4. The 3 ms A/B: /delay/0 against /delay/3 at -c 2, 4 runs a side of 2 s, gate mean>+50%, and its
#     A/A (/delay/0 twice): the exit codes (1 expected for the A/B; 0, or 4 with the reason, for the A/A).
#
# Every run starts its own server (`--spawn`) on a loopback port; RUN_S seconds each.
# BURNERS=N starts N CPU burners (busy loops, niced 0, killed when the script ends) for the whole
# measurement: the busy machine the verdicts must hold on (6 on 2 cores: load 8 or more).
# Usage: bench/ab-noise.sh          (REPS=20 RUNS=5 RUN_S=1 USERS=10 BURNERS=0; METEOR=0 skips part 3)
set -euo pipefail

REPS=${REPS:-20}
RUNS=${RUNS:-5}
RUN_S=${RUN_S:-1}
USERS=${USERS:-10}
METEOR=${METEOR:-1}
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
SHARED=${SHARED:-$ROOT/../shared}
OUT=${OUT:-$ROOT/bench/out/ab-noise-$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$OUT"
cargo build --release --quiet --manifest-path "$ROOT/Cargo.toml" -p bolide
BOLIDE=$ROOT/target/release/bolide
BURNERS=${BURNERS:-0}
burners=()
stop_burners() { [ ${#burners[@]} -eq 0 ] || kill "${burners[@]}" 2>/dev/null || true; }
trap stop_burners EXIT
for _ in $(seq "$BURNERS"); do
  # Bounded: each burner ends by itself after two hours if the script is killed outright.
  timeout 7200 sh -c 'while :; do :; done' &
  burners+=($!)
done
[ "$BURNERS" = 0 ] || { sleep 5; echo "burners: $BURNERS, load average: $(cut -d' ' -f1-3 /proc/loadavg)" | tee "$OUT/load.txt" >&2; }
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# One interleaved A/B of /delay/A against /delay/B; prints the gate's outcome and the MDE of rps.
ab() {
  local a=$1 b=$2 dir=$3 port
  port=$(free_port)
  "$BOLIDE" bench http -L d "$a,$b" --runs "$RUNS" --cooldown 0 \
    --spawn "exec $BOLIDE serve --port $port" --ready-url "http://127.0.0.1:$port/ok" \
    -c 2 -d "${RUN_S}s" --out "$dir" --fail-on 'rps<-5%' --detect 10% \
    "http://127.0.0.1:$port/delay/{d}" >"$dir.log" 2>&1 || true
  python3 - "$dir/comparison.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
g = c["gate"][0]
m = next(m for m in c["comparisons"][0]["metrics"] if m["metric"].startswith("Requests"))
print(g["outcome"], f'{m["detectable_pct"]:.2f}', (m.get("detect") or {}).get("runs_needed"), f'{g["change_pct"]:.2f}')
PY
}

for kind in aa ab; do
  : >"$OUT/$kind.txt"
  for i in $(seq "$REPS"); do
    b=11
    [ "$kind" = aa ] && b=10
    echo "$kind $i of $REPS" >&2
    ab 10 "$b" "$OUT/$kind-$i" >>"$OUT/$kind.txt"
  done
done

# Meteor's server, compression on against off.
if [ "$METEOR" = 1 ]; then
  MS=$OUT/meteor-server
  cp -r "$SHARED/meteor-server" "$MS"
  (cd "$MS" && npm ci --omit=optional --no-audit --no-fund --loglevel=error)
  port=$(free_port)
  "$BOLIDE" bench run ddp-calls -L c on,off --runs "$RUNS" --cooldown 0 \
    --spawn "cd $MS && exec node server.js --port $port --quiet --bench-echo --compression {c}" \
    --ready-url "http://127.0.0.1:$port/" --target "http://127.0.0.1:$port" --users "$USERS" -d "$((RUN_S * 3))s" \
    --out "$OUT/meteor-compression" --detect 5% >"$OUT/meteor-compression.log" 2>&1 || true
fi

# The 3 ms A/B of the issue, and its A/A: exit codes and the gate's verdict.
three() {
  local a=$1 b=$2 dir=$3 port code
  port=$(free_port)
  set +e
  "$BOLIDE" bench http -c 2 -d 2s --runs 4 --cooldown 0 -L delay "$a,$b" \
    --spawn "exec $BOLIDE serve --port $port" --ready-url "http://127.0.0.1:$port/ok" \
    --out "$dir" --fail-on 'mean>+50%' "http://127.0.0.1:$port/delay/{delay}" >"$dir.log" 2>&1
  code=$?
  set -e
  echo "delay $a against $b: exit $code; $(python3 -c 'import json,sys; g=json.load(open(sys.argv[1]))["gate"][0]; print(g["outcome"], "|", g["verdict"])' "$dir/comparison.json" 2>/dev/null || echo 'no comparison')"
}
three 0 3 "$OUT/three-ab" | tee "$OUT/three.txt"
three 0 0 "$OUT/three-aa" | tee -a "$OUT/three.txt"
[ "$BURNERS" = 0 ] || echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$OUT/load.txt" >&2

python3 - "$OUT" "$REPS" <<'PY'
import sys, statistics
out, reps = sys.argv[1], int(sys.argv[2])
def read(kind):
    return [l.split() for l in open(f"{out}/{kind}.txt") if l.strip()]
aa, ab = read("aa"), read("ab")
fails = lambda rows: sum(r[0] == "fail" for r in rows)
print(f"A/A (/delay/10 twice), {reps} interleaved A/Bs: gate rps<-5% failed {fails(aa)} times "
      f"({100 * fails(aa) / len(aa):.0f}% false alarms); outcomes:",
      {o: sum(r[0] == o for r in aa) for o in ("pass", "inconclusive", "fail")})
print(f"A/B (/delay/10 vs /delay/11), {reps} interleaved A/Bs: gate rps<-5% failed {fails(ab)} times "
      f"({100 * fails(ab) / len(ab):.0f}% detected); outcomes:",
      {o: sum(r[0] == o for r in ab) for o in ("pass", "inconclusive", "fail")})
mde = [float(r[1]) for r in aa + ab]
need = [int(r[2]) for r in aa + ab if r[2] != "None"]
change = [float(r[3]) for r in ab]
print(f"MDE of requests/s per A/B: median {statistics.median(mde):.2f}% (range {min(mde):.2f} to {max(mde):.2f}); "
      f"runs a side to detect 10%: median {statistics.median(need) if need else 'n/a'}; "
      f"measured change of the A/Bs: median {statistics.median(change):.2f}%")
PY
if [ "$METEOR" = 1 ]; then
  echo "Meteor compression on vs off: $OUT/meteor-compression/comparison.md" >&2
  sed -n '/against c=on/,/Smallest/p' "$OUT/meteor-compression/comparison.md" || true
fi
