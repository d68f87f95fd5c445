#!/usr/bin/env python3
"""Summarizes a bench/pacing.sh output directory as a Markdown table of medians."""
import json
import pathlib
import statistics
import sys

out = pathlib.Path(sys.argv[1])
meta = json.loads((out / "meta.json").read_text())
reps = range(1, meta["reps"] + 1)


def cpu(name):
    t = out / f"{name}.time"
    if not t.exists():
        return None
    user, sys_ = t.read_text().split()[:2]
    return float(user) + float(sys_)


def med(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def bolide(name):
    p = out / f"{name}.json"
    if not p.exists():
        return None
    s = json.loads(p.read_text())["summary"]
    c = cpu(name)
    return {
        "p50": s["latency"]["p50_us"],
        "p99": s["latency"]["p99_us"],
        "lag50": s.get("lag_p50_us"),
        "lag99": s.get("lag_p99_us"),
        "lagmax": s.get("max_lag_us"),
        "late": s.get("late_sends"),
        "sent": s["sent"],
        "cpu_us": c * 1e6 / max(s["responses"], 1) if c is not None else None,
    }


def oha(name):
    p = out / f"{name}.out"
    if not p.exists() or cpu(name) is None:
        return None
    text = p.read_text()
    doc = json.loads(text[text.index("{"):])
    lp = doc["latencyPercentiles"]
    total = sum(doc.get("statusCodeDistribution", {}).values()) or 1
    return {"p50": lp["p50"] * 1e6, "p99": lp["p99"] * 1e6, "cpu_us": cpu(name) * 1e6 / total}


def fmt(v, unit="µs"):
    return "n/a" if v is None else f"{v:,.0f} {unit}"


closed = {c: med([(bolide(f"closed-c{c}-{r}") or {}).get("p50") for r in reps]) for c in (meta["connections"], 1)}
print(f"Medians of {meta['reps']} runs of {meta['duration']} s, {meta['connections']} connections, one generator thread.")
print(f"Closed-loop bolide p50: {fmt(closed[meta['connections']])} with {meta['connections']} connections, "
      f"{fmt(closed[1])} with 1.\n")
print("| rate (req/s) | tool | p50 | p99 | send lag p50 / p99 / max | late sends | CPU per request |")
print("|---:|---|---:|---:|---|---:|---:|")
for rate in meta["rates"].split():
    b = [bolide(f"bolide-{rate}-{r}") for r in reps]
    b = [x for x in b if x]
    o = [oha(f"oha-{rate}-{r}") for r in reps]
    o = [x for x in o if x]
    if b:
        m = lambda k: med([x[k] for x in b])
        lag = f"{fmt(m('lag50'))} / {fmt(m('lag99'))} / {fmt(m('lagmax'))}"
        late = f"{m('late'):,.0f} of {m('sent'):,.0f}"
        print(f"| {int(rate):,} | bolide --rps | {fmt(m('p50'))} | {fmt(m('p99'))} | {lag} | {late} | {fmt(m('cpu_us'), 'µs')} |")
    if o:
        m = lambda k: med([x[k] for x in o])
        print(f"| {int(rate):,} | oha -q --latency-correction | {fmt(m('p50'))} | {fmt(m('p99'))} | | | {fmt(m('cpu_us'), 'µs')} |")
