#!/usr/bin/env bash
# Streamed LLM completions and Server-Sent Events: bolide beside GuideLLM (PyPI) and an
# independent httpx client (bench/llm/client.py), on the same server at the same rate, the three
# alternated REPS times; medians.
#
#   llama   llama-cpp-python's OpenAI-compatible server (PyPI; built from source, ~8 min on 2
#           cores the first time) serving a tiny random-weight model this script writes with
#           PyPI's gguf (bench/llm/make_tiny_gguf.py, ~0.5 MB, no download); GuideLLM gets a
#           tokenizer made from that model's own vocabulary (bench/llm/make_tokenizer.py).
#           Streamed text completions (`prompt`, max_tokens MAX_TOKENS, ignore_eos) at RATE a second.
#           Reports TTFT and ITL p50/p99 of each client, the tokens each counted, and each one's
#           CPU per streamed event.
#   mock    the same three clients against GuideLLM's model-free OpenAI server (`guidellm
#           mock-server`, which sends its usage: the server's own token count) at MOCK_RATE a
#           second: bolide's tokens against the server's usage, CPU per event at a higher rate.
#   hold    10,000 (STREAMS) SSE streams held open by bolide against a node server
#           (crates/bolide/tests/peers/sse-hold.mjs): bolide's peak RSS per stream (GNU time), over a baseline run of
#           100 streams.
#
# CPU per event is marginal: each client runs LONG and SHORT seconds, and (CPU_long - CPU_short) /
# (events_long - events_short) leaves out start-up (GuideLLM's imports take ~25 s of CPU). Events
# are the SSE events each client read (its chunks and [DONE]); GuideLLM's are its streaming
# iterations.
#
# Usage: bench/sse-llm.sh   (REPS=3 RATE=4 MOCK_RATE=40 SHORT=10 LONG=30 MAX_TOKENS=32
#        STREAMS=10000 MODES="llama mock hold" WORK=/tmp/bolide-sse-bench; LLAMA_WHEEL=path to a
#        built llama_cpp_python wheel skips its build)
# Traffic goes to 127.0.0.1 only; every run is bounded by its duration.
set -euo pipefail

REPS=${REPS:-3}
RATE=${RATE:-4}
MOCK_RATE=${MOCK_RATE:-40}
SHORT=${SHORT:-10}
LONG=${LONG:-30}
MAX_TOKENS=${MAX_TOKENS:-32}
STREAMS=${STREAMS:-10000}
MODES=${MODES:-llama mock hold}
WORK=${WORK:-/tmp/bolide-sse-bench}
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/.." && pwd)
OUT=${OUT:-$ROOT/bench/out/sse-llm-$(date -u +%Y%m%dT%H%M%SZ)}
PORT=${PORT:-18100}
mkdir -p "$OUT" "$WORK"
log() { printf '%s\n' "$*" >&2; }
has() { case " $MODES " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }
export HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false

# Python environments: the server's (llama-cpp-python, gguf), GuideLLM's (with gguf, httpx).
if [ ! -x "$WORK/venv/bin/python" ] || ! "$WORK/venv/bin/python" -c 'import llama_cpp, gguf, uvicorn' 2>/dev/null; then
    python3 -m venv "$WORK/venv"
    "$WORK/venv/bin/pip" install -q gguf numpy 'uvicorn' 'sse-starlette' 'fastapi' 'pydantic-settings' 'starlette-context'
    log "building llama-cpp-python (PyPI has no wheel: several minutes)"
    CMAKE_ARGS="-DLLAVA_BUILD=OFF -DGGML_NATIVE=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TESTS=OFF" \
        "$WORK/venv/bin/pip" install -q "${LLAMA_WHEEL:-llama-cpp-python[server]}"
fi
if [ ! -x "$WORK/gl/bin/guidellm" ]; then
    log "installing GuideLLM (PyPI; several GB with torch)"
    python3 -m venv "$WORK/gl"
    "$WORK/gl/bin/pip" install -q guidellm gguf
fi
(cd "$ROOT" && cargo build --release --quiet -p bolide)
BOLIDE=$ROOT/target/release/bolide
"$WORK/venv/bin/python" "$HERE/llm/make_tiny_gguf.py" "$WORK/tiny.gguf" >/dev/null
"$WORK/gl/bin/python" "$HERE/llm/make_tokenizer.py" "$WORK/tiny.gguf" "$WORK/tok" >/dev/null

SERVER_PID=""
stop_server() { if [ -n "$SERVER_PID" ]; then kill "$SERVER_PID" 2>/dev/null || true; wait "$SERVER_PID" 2>/dev/null || true; fi; SERVER_PID=""; }
trap stop_server EXIT
wait_port() { for _ in $(seq 300); do (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0; sleep 0.1; done; log "nothing listens on $1"; exit 1; }

# bolide's scenario: the same request the others send.
scenario() { # rate seconds
    cat <<YML
config:
  target: http://127.0.0.1:$PORT
  phases: [{duration: $2, arrivalRate: $1}]
scenarios:
  - engine: sse
    flow:
      - chat: { prompt: "time people way water day part sound work place year back thing time people way water", max_tokens: $MAX_TOKENS, ignore_eos: true }
YML
}

# One client's run: its JSON line (events, tokens, CPU seconds, TTFT and ITL percentiles in ms).
run_bolide() { # rate seconds tag
    scenario "$1" "$2" >"$OUT/$3.yml"
    /usr/bin/time -f '%U %S' -o "$OUT/$3.time" "$BOLIDE" run "$OUT/$3.yml" -q --json "$OUT/$3.json" >/dev/null 2>&1 || true
    python3 "$HERE/llm/summarize.py" bolide "$OUT/$3.json" "$OUT/$3.time"
}
run_client() { # rate seconds tag
    /usr/bin/time -f '%U %S' -o "$OUT/$3.time" "$WORK/gl/bin/python" "$HERE/llm/client.py" \
        "http://127.0.0.1:$PORT" "$MODEL" "$1" "$2" "$MAX_TOKENS" 16 >"$OUT/$3.json"
    python3 "$HERE/llm/summarize.py" client "$OUT/$3.json" "$OUT/$3.time"
}
run_guidellm() { # rate seconds tag
    /usr/bin/time -f '%U %S' -o "$OUT/$3.time" "$WORK/gl/bin/guidellm" run \
        --backend "kind=openai_http,target=http://127.0.0.1:$PORT,model=$MODEL,validate_backend=false,request_format=/v1/completions" \
        --profile "kind=constant,rate=$1" --constraint "kind=max_duration,seconds=$2" \
        --data "kind=synthetic_text,prompt_tokens=16,output_tokens=$MAX_TOKENS" \
        --tokenizer "kind=huggingface_auto,model=$WORK/tok" --output "kind=json,path=$OUT/$3.json" \
        --disable-console-interactive >"$OUT/$3.log" 2>&1 || true
    python3 "$HERE/llm/summarize.py" guidellm "$OUT/$3.json" "$OUT/$3.time"
}

# REPS rounds, the three clients in turn (the first of a round rotating), SHORT and LONG each.
compare_clients() { # name rate
    local rows="$OUT/$1.jsonl" order
    : >"$rows"
    for rep in $(seq "$REPS"); do
        case $((rep % 3)) in 1) order="bolide client guidellm" ;; 2) order="client guidellm bolide" ;; *) order="guidellm bolide client" ;; esac
        for who in $order; do
            for len in "$SHORT" "$LONG"; do
                log "$1 round $rep: $who, ${len}s at $2/s"
                "run_$who" "$2" "$len" "$1-$who-$rep-$len" | python3 -c "import json,sys; r=json.load(sys.stdin); r.update(who='$who', rep=$rep, seconds=$len); print(json.dumps(r))" >>"$rows"
            done
        done
    done
    python3 "$HERE/llm/summarize.py" table "$rows" "$1" "$2"
}

if has llama; then
    "$WORK/venv/bin/python" -m llama_cpp.server --model "$WORK/tiny.gguf" --n_ctx 512 --model_alias tiny \
        --host 127.0.0.1 --port "$PORT" >"$OUT/llama.log" 2>&1 &
    SERVER_PID=$!
    wait_port "$PORT"
    MODEL=tiny
    compare_clients llama "$RATE"
    stop_server
fi

if has mock; then
    "$WORK/gl/bin/guidellm" mock-server --host 127.0.0.1 --port "$PORT" --model mock --ttft-ms 20 --itl-ms 2 \
        --output-tokens "$MAX_TOKENS" >"$OUT/mock.log" 2>&1 &
    SERVER_PID=$!
    wait_port "$PORT"
    MODEL=mock
    compare_clients mock "$MOCK_RATE"
    stop_server
fi

if has hold; then
    ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
    node "$ROOT/crates/bolide/tests/peers/sse-hold.mjs" "$PORT" >"$OUT/hold.log" 2>&1 &
    SERVER_PID=$!
    wait_port "$PORT"
    for n in 100 "$STREAMS"; do
        cat >"$OUT/hold-$n.yml" <<YML
config:
  target: http://127.0.0.1:$PORT/hold
  phases: [{duration: 10, arrivalCount: $n}]
  timeout: 60
scenarios:
  - engine: sse
    flow:
      - stream: { events: 1, keep: true }
      - think: 15
YML
        /usr/bin/time -f '%M' -o "$OUT/hold-$n.rss" "$BOLIDE" run "$OUT/hold-$n.yml" -q --json "$OUT/hold-$n.json" >/dev/null 2>&1 || true
    done
    python3 "$HERE/llm/summarize.py" hold "$OUT/hold-100.rss" "$OUT/hold-$STREAMS.rss" 100 "$STREAMS" "$OUT/hold-$STREAMS.json"
    stop_server
fi
log "results in $OUT"
