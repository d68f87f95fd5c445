# bench/sse-llm.sh's reader: one client's run as a JSON line (bolide's document, the httpx
# client's line, GuideLLM's JSON; each with its GNU time file), then the table of a mode.
import json
import statistics
import sys


def cpu(path):
    u, s = open(path).read().split()[-2:]
    return float(u) + float(s)


def bolide(doc, time):
    d = json.load(open(doc))
    s = d["summary"]
    ev, m = s.get("events", {}), s.get("measures", {})
    ms = lambda name, k: m[name][k] / 1000 if name in m else None
    return {"events": ev.get("sse.events", 0), "tokens": ev.get("llm.output_tokens", 0),
            "usage_tokens": ev.get("llm.usage_completion_tokens"), "requests": ev.get("llm.requests", 0),
            "errors": s.get("step_errors", 0), "cpu_s": cpu(time),
            "ttft_p50_ms": ms("llm.ttft", "p50_us"), "ttft_p99_ms": ms("llm.ttft", "p99_us"),
            "itl_p50_ms": ms("llm.itl", "p50_us"), "itl_p99_ms": ms("llm.itl", "p99_us")}


def client(line, time):
    r = json.loads(open(line).read().strip().splitlines()[-1])
    r["cpu_s"] = cpu(time)
    return r


def guidellm(path, time):
    try:
        b = json.load(open(path))["benchmarks"][0]
    except (OSError, ValueError, IndexError, KeyError):
        return {"events": 0, "tokens": 0, "requests": 0, "cpu_s": cpu(time), "errors": None}
    m = b["metrics"]
    ok = lambda k: m[k]["successful"]
    return {"events": ok("request_streaming_iterations_count")["total_sum"], "tokens": ok("output_token_count")["total_sum"],
            "requests": ok("output_token_count")["count"], "errors": len(b["requests"]["errored"]), "cpu_s": cpu(time),
            "ttft_p50_ms": ok("time_to_first_token_ms")["percentiles"]["p50"],
            "ttft_p99_ms": ok("time_to_first_token_ms")["percentiles"]["p99"],
            # GuideLLM's ITL is each request's mean gap: its percentiles are over requests.
            "itl_p50_ms": ok("inter_token_latency_ms")["percentiles"]["p50"],
            "itl_p99_ms": ok("inter_token_latency_ms")["percentiles"]["p99"]}


def med(xs):
    xs = [x for x in xs if x is not None]
    return statistics.median(xs) if xs else None


def fmt(x, nd=2):
    return "-" if x is None else f"{x:,.{nd}f}"


def table(rows_path, mode, rate):
    rows = [json.loads(l) for l in open(rows_path)]
    seconds = sorted({r["seconds"] for r in rows})
    short, long_ = seconds[0], seconds[-1]
    out = {}
    for who in ["bolide", "client", "guidellm"]:
        mine = [r for r in rows if r["who"] == who]
        per_event = []
        for rep in sorted({r["rep"] for r in mine}):
            a = next(r for r in mine if r["rep"] == rep and r["seconds"] == short)
            b = next(r for r in mine if r["rep"] == rep and r["seconds"] == long_)
            if b["events"] > a["events"]:
                per_event.append((b["cpu_s"] - a["cpu_s"]) / (b["events"] - a["events"]) * 1e6)
        longs = [r for r in mine if r["seconds"] == long_]
        out[who] = {"cpu_us_per_event": med(per_event),
                    **{k: med([r.get(k) for r in longs]) for k in ["events", "tokens", "requests", "ttft_p50_ms", "ttft_p99_ms", "itl_p50_ms", "itl_p99_ms"]},
                    "usage_tokens": med([r.get("usage_tokens") for r in longs])}
    print(f"## {mode}: {rate} requests/s, medians of {len({r['rep'] for r in rows})} rounds ({long_} s runs; CPU per event from {long_} s minus {short} s)")
    print("| client | CPU per event | events | tokens | server's usage tokens | TTFT p50 | TTFT p99 | ITL p50 | ITL p99 |")
    print("|---|---|---|---|---|---|---|---|---|")
    for who, r in out.items():
        print(f"| {who} | {fmt(r['cpu_us_per_event'], 1)} µs | {fmt(r['events'], 0)} | {fmt(r['tokens'], 0)} | {fmt(r['usage_tokens'], 0)} | "
              f"{fmt(r['ttft_p50_ms'])} ms | {fmt(r['ttft_p99_ms'])} ms | {fmt(r['itl_p50_ms'])} ms | {fmt(r['itl_p99_ms'])} ms |")
    b, g, c = out["bolide"], out["guidellm"], out["client"]
    if b["cpu_us_per_event"] and g["cpu_us_per_event"]:
        print(f"\nGuideLLM / bolide CPU per event: {g['cpu_us_per_event'] / b['cpu_us_per_event']:.1f}x; "
              f"httpx client / bolide: {c['cpu_us_per_event'] / b['cpu_us_per_event']:.1f}x")
    for k in ["ttft_p99_ms", "itl_p99_ms"]:
        if b[k] and c[k]:
            print(f"bolide's {k} against the httpx client's: {100 * (b[k] - c[k]) / c[k]:+.1f}%")
    print()


def hold(rss_small, rss_big, n_small, n_big, doc):
    a, b = int(open(rss_small).read().split()[-1]), int(open(rss_big).read().split()[-1])
    d = json.load(open(doc))["summary"]
    per = (b - a) * 1024 / (int(n_big) - int(n_small))
    print(f"## hold: {n_big} streams kept open: peak RSS {b / 1024:.1f} MB ({n_small} streams: {a / 1024:.1f} MB), "
          f"{per / 1024:.2f} KB per stream; users completed {d['users']['completed']} of {d['users']['launched']}, "
          f"sse.streams {d.get('events', {}).get('sse.streams')}")


if __name__ == "__main__":
    kind = sys.argv[1]
    if kind == "table":
        table(sys.argv[2], sys.argv[3], sys.argv[4])
    elif kind == "hold":
        hold(*sys.argv[2:7])
    else:
        print(json.dumps({"bolide": bolide, "client": client, "guidellm": guidellm}[kind](sys.argv[2], sys.argv[3])))
