#!/usr/bin/env python3
"""Summarises a bench/http-peers.sh run directory: parses every tool's output, then prints the
median requests/s and generator CPU per request per tool and mode as Markdown tables, with
bolide's ratio to the best peer. Usage: bench/summarize-peers.py RUN_DIR"""
import glob, json, os, re, statistics, sys

run = sys.argv[1]
meta = json.load(open(os.path.join(run, "meta.json")))
MODES = {"ka": "keep-alive, GET / (2 bytes)", "noka": "no keep-alive, GET / (2 bytes)",
         "big": "keep-alive, GET /image.jpg (100 KB)",
         "h2": f"HTTP/2 in clear (h2c), {meta.get('streams', 10)} streams per connection, GET / (2 bytes)"}


def parse(tool, text, json_path):
    """(requests completed, requests/s) from a tool's output, None where it does not say."""
    def num(pattern, cast=float):
        m = re.search(pattern, text)
        return cast(m.group(1).replace(",", "")) if m else None
    if tool == "bolide":
        s = json.load(open(json_path))["summary"]
        return s["responses"], s["requests_per_s"]
    if tool == "wrk":
        return num(r"(\d+) requests in", int), num(r"Requests/sec:\s+([\d.]+)")
    if tool == "ab":
        return num(r"Complete requests:\s+(\d+)", int), num(r"Requests per second:\s+([\d.]+)")
    if tool == "h2load":
        return (num(r"requests: \d+ total, \d+ started, (\d+) done", int),
                num(r"finished in [\d.]+\w+, ([\d.]+) req/s"))
    if tool in ("oha", "hey"):
        codes = [int(n) for n in re.findall(r"\[\d+\]\s+(\d+) responses", text)]
        return (sum(codes) if codes else None), num(r"Requests/sec:\s+([\d.]+)")
    if tool == "autocannon":
        j = json.loads(text[text.index("{"):])
        return j["requests"]["total"], j["requests"]["average"]
    if tool.startswith("loadtest"):
        return num(r"Completed requests:\s+(\d+)", int), num(r"Effective rps:\s+([\d.]+)")
    raise ValueError(tool)


rows = []
for out in sorted(glob.glob(os.path.join(run, "*.out"))):
    name = os.path.basename(out)[:-4]
    tool, mode, rep = name.rsplit("-", 2)
    timing = out[:-4] + ".time"
    if not os.path.exists(timing):
        continue
    fields = open(timing).read().split()
    try:
        user, sys_, rss = float(fields[-3]), float(fields[-2]), int(fields[-1])
        req, rps = parse(tool, open(out, errors="replace").read(), out[:-4] + ".json")
    except (ValueError, KeyError, IndexError, FileNotFoundError, json.JSONDecodeError):
        print(f"<!-- {name}: output not understood, left out -->")
        continue
    if not req or not rps:
        print(f"<!-- {name}: no completed requests, left out -->")
        continue
    rows.append({"tool": tool, "mode": mode, "rps": rps, "us": (user + sys_) * 1e6 / req, "rss": rss})

print(f"Medians of {meta['reps']} interleaved runs, {meta['duration']} s each, {meta['connections']} connections, "
      "one generator thread pinned to core 1, one nginx worker pinned to core 0.\n")
for mode, title in MODES.items():
    table = {}
    for r in rows:
        if r["mode"] == mode:
            t = table.setdefault(r["tool"], {"rps": [], "us": [], "rss": []})
            for k in ("rps", "us", "rss"):
                t[k].append(r[k])
    if not table:
        continue
    med = {k: (statistics.median(v["rps"]), statistics.median(v["us"]), max(v["rss"]), len(v["rps"]))
           for k, v in table.items()}
    print(f"### {title}\n")
    print("| tool | requests/s | generator CPU µs per request | peak RSS MB | runs |")
    print("|---|---:|---:|---:|---:|")
    for tool, (rps, us, rss, n) in sorted(med.items(), key=lambda kv: kv[1][1]):
        print(f"| {tool} | {rps:,.0f} | {us:.2f} | {rss / 1024:.1f} | {n} |")
    if "bolide" in med and len(med) > 1:
        others = {k: v for k, v in med.items() if k != "bolide"}
        best_rps = max(others.items(), key=lambda kv: kv[1][0])
        best_cpu = min(others.items(), key=lambda kv: kv[1][1])
        b = med["bolide"]
        print(f"\nbolide vs the best peer: requests/s {b[0] / best_rps[1][0]:.2f}x {best_rps[0]}'s; "
              f"CPU per request {b[1] / best_cpu[1][1]:.2f}x {best_cpu[0]}'s (below 1 is better)\n")
c1000 = os.path.join(run, "c1000.json")
if os.path.exists(c1000):
    rss = int(open(os.path.join(run, "c1000.time")).read().split()[-1])
    s = json.load(open(c1000))["summary"]
    print(f"### 1,000 connections\n\nbolide -t 1 -c 1000, keep-alive GET /: {s['requests_per_s']:,.0f} requests/s, "
          f"{s['errors']} errors, peak RSS {rss / 1024:.1f} MB\n")
