#!/usr/bin/env bash
# The audit's power and its false alarms: every bug `bolide serve --inject-bug NAME` reproduces,
# over websocket and SockJS, REPS times each, and an honest server as often (half of its runs with
# every connection dropped mid-run, as the stale-after-reconnect runs have), all with
# bench/audit-bugs.yml. A bug run is caught when the audit fails (exit 1: a difference or a
# protocol violation); an honest run is a false alarm when it does not pass (exit 0). Prints one
# line per run, a table per bug, and last one line over everything it ran:
#   caught N of N, false alarms 0 of M
#
# Usage: bench/audit-power.sh             (REPS=3: 8 bugs x 2 transports x 3 + 48 honest runs,
#                                          about 6 s each: under 12 minutes on 2 cores)
# BOLIDE=path/to/bolide uses that binary; otherwise the release build here is made and used.
# Traffic goes to 127.0.0.1 only; every run is bounded by the scenario's 3 s phase and its walks.
set -euo pipefail

REPS=${REPS:-3}
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
OUT=${OUT:-$ROOT/bench/out/audit-power-$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$OUT"
if [ -z "${BOLIDE:-}" ]; then
    cargo build --release --quiet --manifest-path "$ROOT/Cargo.toml" -p bolide
    BOLIDE=$ROOT/target/release/bolide
fi
BUGS="lost-changed lost-removed ready-early ready-twice stale-after-reconnect limit-reappear leak dup-added"
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }

# One run: the server (with the bug, or honest), the scenario, the exit code on stdout.
one() { # bug|honest transport drop(yes|no) tag
    local bug=$1 transport=$2 drop=$3 tag=$4 port pid code
    port=$(free_port)
    local flags=()
    [ "$bug" = honest ] || flags=(--inject-bug "$bug")
    "$BOLIDE" serve --port "$port" "${flags[@]}" >"$OUT/$tag.serve.log" 2>&1 &
    pid=$!
    for _ in $(seq 100); do
        python3 -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:$port/ok')" 2>/dev/null && break
        sleep 0.05
    done
    local fault=()
    [ "$drop" = yes ] && fault=(--fault drop@1500ms:100%)
    set +e
    timeout 120 "$BOLIDE" run "$HERE/audit-bugs.yml" --target "http://127.0.0.1:$port" --transport "$transport" \
        "${fault[@]}" --json "$OUT/$tag.json" >"$OUT/$tag.out" 2>&1
    code=$?
    set -e
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    echo "$code"
}

caught=0 bug_runs=0 alarms=0 honest_runs=0
: >"$OUT/runs.tsv"
for rep in $(seq "$REPS"); do
    for transport in websocket sockjs; do
        for bug in $BUGS; do
            drop=no
            [ "$bug" = stale-after-reconnect ] && drop=yes
            code=$(one "$bug" "$transport" "$drop" "$bug-$transport-$rep")
            bug_runs=$((bug_runs + 1))
            [ "$code" = 1 ] && caught=$((caught + 1))
            printf '%s\t%s\t%s\t%s\n' "$bug" "$transport" "$rep" "$code" | tee -a "$OUT/runs.tsv" >&2
            # The honest server as often, every other run with the drop.
            hdrop=$([ $((bug_runs % 2)) = 0 ] && echo yes || echo no)
            code=$(one honest "$transport" "$hdrop" "honest-$bug-$transport-$rep")
            honest_runs=$((honest_runs + 1))
            [ "$code" = 0 ] || alarms=$((alarms + 1))
            printf 'honest(drop %s)\t%s\t%s\t%s\n' "$hdrop" "$transport" "$rep" "$code" | tee -a "$OUT/runs.tsv" >&2
        done
    done
done

echo "bug                      transport   runs  caught"
for bug in $BUGS; do
    for transport in websocket sockjs; do
        n=$(awk -F'\t' -v b="$bug" -v t="$transport" '$1==b && $2==t' "$OUT/runs.tsv" | wc -l)
        c=$(awk -F'\t' -v b="$bug" -v t="$transport" '$1==b && $2==t && $4==1' "$OUT/runs.tsv" | wc -l)
        printf '%-24s %-11s %4s  %6s\n' "$bug" "$transport" "$n" "$c"
    done
done
echo "runs and their documents: $OUT"
echo "caught $caught of $bug_runs, false alarms $alarms of $honest_runs"
