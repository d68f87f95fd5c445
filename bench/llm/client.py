# An independent streaming client for bench/sse-llm.sh: httpx (asyncio) sends the same streamed
# text completion bolide's bench scenario sends (a prompt, max_tokens, ignore_eos), RATE requests a second for SECONDS, and times each
# as vLLM's benchmark does: TTFT from the request sent to the first chunk with text, ITL every gap
# between two such chunks. Prints one JSON line: requests, tokens (chunks with text), events,
# ttft and itl percentiles (ms), and its own CPU seconds.
#   python client.py URL MODEL RATE SECONDS MAX_TOKENS INPUT_WORDS
import asyncio
import json
import random
import resource
import sys
import time

import httpx

url, model = sys.argv[1], sys.argv[2]
rate, seconds, max_tokens, words = float(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6])
WORDS = ["time", "people", "way", "water", "day", "part", "sound", "work", "place", "year", "back", "thing"]
ttft, itl = [], []
counts = {"requests": 0, "tokens": 0, "events": 0, "errors": 0}


async def one(client):
    prompt = " ".join(random.choice(WORDS) for _ in range(words))
    body = {"model": model, "stream": True, "stream_options": {"include_usage": True}, "max_tokens": max_tokens,
            "ignore_eos": True, "prompt": prompt}
    sent = time.perf_counter()
    last = None
    try:
        async with client.stream("POST", url + "/v1/completions", json=body) as r:
            async for line in r.aiter_lines():
                if not line.startswith("data:"):
                    continue
                counts["events"] += 1
                data = line[5:].strip()
                if data == "[DONE]":
                    break
                c = json.loads(data)
                ch = c.get("choices") or []
                text = ch[0].get("text") if ch else None
                if text:
                    now = time.perf_counter()
                    counts["tokens"] += 1
                    if last is None:
                        ttft.append((now - sent) * 1000)
                    else:
                        itl.append((now - last) * 1000)
                    last = now
        counts["requests"] += 1
    except Exception:
        counts["errors"] += 1


async def main():
    async with httpx.AsyncClient(timeout=120, limits=httpx.Limits(max_connections=1000)) as client:
        tasks, start, i = [], time.perf_counter(), 0
        while i / rate < seconds:
            due = start + i / rate
            await asyncio.sleep(max(0, due - time.perf_counter()))
            tasks.append(asyncio.create_task(one(client)))
            i += 1
        await asyncio.gather(*tasks)


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))] if xs else None


asyncio.run(main())
ru = resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps({**counts, "ttft_p50_ms": pct(ttft, 50), "ttft_p99_ms": pct(ttft, 99), "itl_p50_ms": pct(itl, 50),
                  "itl_p99_ms": pct(itl, 99), "cpu_s": ru.ru_utime + ru.ru_stime}))
