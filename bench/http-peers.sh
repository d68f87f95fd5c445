#!/usr/bin/env bash
# bolide beside the usual HTTP load generators, in one run, on one machine.
#
# One nginx worker pinned to core 0 (../shared/bench/nginx-bench.conf) serves a 2-byte body at /
# and a 100 KB file at /image.jpg on 127.0.0.1:8080. Every generator runs pinned to core 1 with
# one thread, 10 connections, for DURATION seconds, in three modes: keep-alive on /, no keep-alive
# on /, keep-alive on the 100 KB file. Tools are interleaved, REPS times, and the medians reported:
# requests/s, and the generator's own CPU time (user+sys) per completed request, the figure that
# ranks generators when nginx is the bottleneck. Then bolide alone with 1,000 connections, for its
# peak RSS.
#
# Usage: bench/http-peers.sh            (REPS=3 DURATION=10 by default; about 15 minutes)
#        REPS=1 DURATION=3 bench/http-peers.sh   (a quick look)
# Installs what it needs (apt, npm, cargo install --locked); stops what it started, by PID.
# Traffic goes to 127.0.0.1 only.
set -euo pipefail

REPS=${REPS:-3}
DURATION=${DURATION:-10}
CONNS=${CONNS:-10}
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
SHARED=${SHARED:-$ROOT/../shared}
OUT=${OUT:-$ROOT/bench/out/http-peers-$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$OUT"
RESULTS="$OUT/results.tsv"

log() { printf '%s\n' "$*" >&2; }

install_peers() {
    local apt=()
    command -v wrk >/dev/null || apt+=(wrk)
    command -v ab >/dev/null || apt+=(apache2-utils)
    command -v nginx >/dev/null || apt+=(nginx-light)
    command -v h2load >/dev/null || apt+=(nghttp2-client)
    command -v hey >/dev/null || apt+=(hey)
    [ -x /usr/bin/time ] || apt+=(time)
    command -v taskset >/dev/null || apt+=(util-linux)
    command -v python3 >/dev/null || apt+=(python3)
    if [ ${#apt[@]} -gt 0 ]; then
        log "installing ${apt[*]} (apt)"
        DEBIAN_FRONTEND=noninteractive apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${apt[@]}" >/dev/null
    fi
    local npm=()
    command -v autocannon >/dev/null || npm+=(autocannon)
    command -v loadtest >/dev/null || npm+=(loadtest)
    if [ ${#npm[@]} -gt 0 ]; then
        log "installing ${npm[*]} (npm)"
        npm install -g --silent "${npm[@]}" >/dev/null
    fi
    if ! command -v oha >/dev/null; then
        log "installing oha (cargo install --locked; a few minutes)"
        cargo install --locked --quiet oha
    fi
    log "building bolide (release)"
    (cd "$ROOT" && cargo build --release --quiet)
}

NGINX_PID=""
start_nginx() {
    local nb="$OUT/nginx"
    mkdir -p "$nb/www" "$nb/logs" "$nb/tmp"
    head -c 102400 /dev/urandom >"$nb/www/image.jpg"
    sed "s#BENCH_ROOT#$nb#g" "$SHARED/bench/nginx-bench.conf" >"$nb/nginx.conf"
    nginx -t -q -p "$nb" -c "$nb/nginx.conf"
    taskset -c 0 nginx -p "$nb" -c "$nb/nginx.conf" >"$nb/logs/stdout.log" 2>&1 &
    NGINX_PID=$!
    for _ in $(seq 50); do
        curl -fs -o /dev/null http://127.0.0.1:8080/ 2>/dev/null && return 0
        python3 -c 'import urllib.request; urllib.request.urlopen("http://127.0.0.1:8080/")' 2>/dev/null && return 0
        sleep 0.1
    done
    log "nginx did not come up"; exit 1
}
stop_nginx() {
    if [ -n "$NGINX_PID" ] && kill -0 "$NGINX_PID" 2>/dev/null; then
        kill -QUIT "$NGINX_PID"
        wait "$NGINX_PID" 2>/dev/null || true
    fi
}
trap stop_nginx EXIT

BOLIDE="$ROOT/target/release/bolide"
D=$DURATION
C=$CONNS

# Each tool: a command line per mode (empty: the tool cannot do that mode) and a parser that
# prints "requests rps" from its output file.
cmd() { # tool mode url
    local tool=$1 mode=$2 url=$3 ka=1
    [ "$mode" = noka ] && ka=0
    case $tool in
        bolide) if [ $ka = 1 ]; then echo "$BOLIDE http -t 1 -c $C -d ${D}s -q --json $OUT/last.json $url"
                else echo "$BOLIDE http -t 1 -c $C -d ${D}s -q --no-keepalive --json $OUT/last.json $url"; fi ;;
        wrk) if [ $ka = 1 ]; then echo "wrk -t 1 -c $C -d ${D}s $url"
             else echo "wrk -t 1 -c $C -d ${D}s -H Connection:close $url"; fi ;;
        ab) if [ $ka = 1 ]; then echo "ab -k -q -c $C -t $D -n 100000000 $url"
            else echo "ab -q -c $C -t $D -n 100000000 $url"; fi ;;
        h2load) [ $ka = 1 ] && echo "h2load --h1 -t 1 -c $C -D $D $url" ;;
        oha) if [ $ka = 1 ]; then echo "oha --no-tui -c $C -z ${D}s $url"
             else echo "oha --no-tui -c $C -z ${D}s --disable-keepalive $url"; fi ;;
        autocannon) [ $ka = 1 ] && echo "autocannon -c $C -d $D -j $url" ;;
        loadtest) if [ $ka = 1 ]; then echo "loadtest --cores 1 -c $C -t $D -k $url"
                  else echo "loadtest --cores 1 -c $C -t $D $url"; fi ;;
        loadtest-tcp) if [ $ka = 1 ]; then echo "loadtest --tcp --cores 1 -c $C -t $D -k $url"
                      else echo "loadtest --tcp --cores 1 -c $C -t $D $url"; fi ;;
        hey) if [ $ka = 1 ]; then echo "hey -z ${D}s -c $C -cpus 1 $url"
             else echo "hey -z ${D}s -c $C -cpus 1 -disable-keepalive $url"; fi ;;
    esac
}

parse() { # tool outfile -> "requests rps"
    python3 - "$1" "$2" "$OUT/last.json" <<'PY'
import json, re, sys
tool, path, bolide_json = sys.argv[1], sys.argv[2], sys.argv[3]
text = open(path, errors="replace").read()
def num(pattern, cast=float):
    m = re.search(pattern, text)
    return cast(m.group(1).replace(",", "")) if m else None
req = rps = None
if tool == "bolide":
    s = json.load(open(bolide_json))["summary"]
    req, rps = s["responses"], s["requests_per_s"]
elif tool == "wrk":
    req, rps = num(r"(\d+) requests in", int), num(r"Requests/sec:\s+([\d.]+)")
elif tool == "ab":
    req, rps = num(r"Complete requests:\s+(\d+)", int), num(r"Requests per second:\s+([\d.]+)")
elif tool == "h2load":
    req, rps = num(r"requests: \d+ total, \d+ started, (\d+) done", int), num(r"finished in [\d.]+\w+, ([\d.]+) req/s")
elif tool == "oha":
    rps = num(r"Requests/sec:\s+([\d.]+)")
    total = num(r"Total:\s+([\d.]+) sec")
    codes = [int(n) for n in re.findall(r"\[\d+\]\s+(\d+) responses", text)]
    req = sum(codes) if codes else (int(rps * total) if rps and total else None)
elif tool == "autocannon":
    j = json.loads(text[text.index("{"):])
    req, rps = j["requests"]["total"], j["requests"]["average"]
elif tool.startswith("loadtest"):
    req, rps = num(r"Completed requests:\s+(\d+)", int), num(r"Requests per second:\s+([\d.]+)")
elif tool == "hey":
    rps = num(r"Requests/sec:\s+([\d.]+)")
    codes = [int(n) for n in re.findall(r"\[\d+\]\s+(\d+) responses", text)]
    req = sum(codes) if codes else None
print(req if req is not None else "NA", rps if rps is not None else "NA")
PY
}

run_one() { # tool mode path rep
    local tool=$1 mode=$2 path=$3 rep=$4
    local line; line=$(cmd "$tool" "$mode" "http://127.0.0.1:8080$path")
    [ -n "$line" ] || return 0
    local out="$OUT/$tool-$mode-$rep.out" tm="$OUT/$tool-$mode-$rep.time"
    # shellcheck disable=SC2086
    if ! taskset -c 1 /usr/bin/time -o "$tm" -f "%U %S %M" $line >"$out" 2>&1; then
        log "  $tool $mode failed (see $out)"
        return 0
    fi
    local parsed; parsed=$(parse "$tool" "$out")
    local user sys rss; read -r user sys rss <"$tm"
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$mode" "$tool" "$rep" $parsed "$(python3 -c "print($user+$sys)")" "$rss" >>"$RESULTS"
    log "  $mode $tool rep $rep: $(tail -n1 "$RESULTS" | cut -f4-)"
    sleep 1
}

install_peers
ulimit -n 65536
start_nginx
printf 'mode\ttool\trep\trequests\trps\tcpu_s\tmax_rss_kb\n' >"$RESULTS"
TOOLS=(bolide wrk ab h2load oha autocannon loadtest loadtest-tcp hey)
for rep in $(seq "$REPS"); do
    for mode in ka noka big; do
        path=/; [ "$mode" = big ] && path=/image.jpg
        for tool in "${TOOLS[@]}"; do
            run_one "$tool" "$mode" "$path" "$rep"
        done
    done
done

# bolide with 1,000 connections: peak RSS.
log "bolide with 1000 connections"
taskset -c 1 /usr/bin/time -o "$OUT/c1000.time" -f "%U %S %M" \
    "$BOLIDE" http -t 1 -c 1000 -d "${D}s" -q --json "$OUT/c1000.json" http://127.0.0.1:8080/
read -r _ _ C1000_RSS <"$OUT/c1000.time"
C1000_RPS=$(python3 -c "import json;print(round(json.load(open('$OUT/c1000.json'))['summary']['requests_per_s']))")

python3 - "$RESULTS" "$C1000_RSS" "$C1000_RPS" "$REPS" "$DURATION" <<'PY' | tee "$OUT/summary.md"
import csv, statistics, sys
path, c1000_rss, c1000_rps, reps, duration = sys.argv[1:6]
rows = list(csv.DictReader(open(path), delimiter="\t"))
names = {"ka": "keep-alive, GET / (2 bytes)", "noka": "no keep-alive, GET / (2 bytes)", "big": "keep-alive, GET /image.jpg (100 KB)"}
print(f"Medians of {reps} interleaved runs, {duration} s each, 10 connections, one generator thread pinned to core 1, one nginx worker on core 0.\n")
for mode, title in names.items():
    table = {}
    for r in rows:
        if r["mode"] != mode or r["requests"] == "NA" or r["rps"] == "NA" or int(float(r["requests"])) == 0:
            continue
        t = table.setdefault(r["tool"], {"rps": [], "us": [], "rss": []})
        t["rps"].append(float(r["rps"]))
        t["us"].append(float(r["cpu_s"]) * 1e6 / float(r["requests"]))
        t["rss"].append(int(r["max_rss_kb"]))
    if not table:
        continue
    med = {k: (statistics.median(v["rps"]), statistics.median(v["us"]), max(v["rss"])) for k, v in table.items()}
    print(f"### {title}\n")
    print("| tool | requests/s | generator CPU µs/request | peak RSS MB |")
    print("|---|---:|---:|---:|")
    for tool, (rps, us, rss) in sorted(med.items(), key=lambda kv: kv[1][1]):
        print(f"| {tool} | {rps:,.0f} | {us:.2f} | {rss/1024:.1f} |")
    if "bolide" in med and len(med) > 1:
        others = {k: v for k, v in med.items() if k != "bolide"}
        best_rps = max(others.items(), key=lambda kv: kv[1][0])
        best_cpu = min(others.items(), key=lambda kv: kv[1][1])
        b = med["bolide"]
        print(f"\nbolide / best peer: requests/s {b[0]/best_rps[1][0]:.2f}x ({best_rps[0]}), "
              f"CPU per request {b[1]/best_cpu[1][1]:.2f}x ({best_cpu[0]}; below 1 is better)\n")
print(f"### 1,000 connections\n\nbolide -c 1000, keep-alive GET /: {int(c1000_rps):,} requests/s, peak RSS {int(c1000_rss)/1024:.1f} MB\n")
PY
log "raw results: $RESULTS"
