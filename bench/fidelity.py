#!/usr/bin/env python3
"""Runs one load generator against the reference server and measures, from outside both, what the
run cost: the server's CPU (its threads' schedstat over the run, in ns) and RSS, the generator's CPU
(wait4's rusage: the process and every descendant it reaped, so each Chromium process counts) and
the peak memory of its whole process tree (PSS: shared pages split, not counted per process), and the server's own counts from /stats (methods,
subscriptions, sessions, DDP messages in and out) over the run.

The server's idle CPU is measured first (IDLE_S seconds with no load, 3 by default) and its rate
subtracted from the run's, so that what is compared is what the users cost.

Usage: fidelity.py run SERVER_PID BASE OUT.json -- COMMAND...
       fidelity.py scale BROWSERS_RUN.json SCENARIO.yml   (the think scale that paces a replay like them)
       fidelity.py table RESULTS_DIR     (the side-by-side table of a bench/fidelity.sh run)
"""
import json
import os
import resource
import statistics
import subprocess
import sys
import time
import urllib.request

TICK = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")


def stat(pid):
    """(utime+stime in seconds, rss bytes, ppid) of a live process, or None."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    # fields[0] is the state (field 3); utime is field 14, stime 15, rss 24, ppid 4.
    return (int(fields[11]) + int(fields[12])) / TICK, int(fields[21]) * PAGE, int(fields[1])


def cpu_ns(pid):
    """CPU time of every thread of a process, in nanoseconds (schedstat: finer than stat's ticks)."""
    total = 0
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            try:
                with open(f"/proc/{pid}/task/{tid}/schedstat") as f:
                    total += int(f.read().split()[0])
            except OSError:
                pass
    except OSError:
        return None
    return total


def pss(pid):
    """Proportional set size in bytes (shared pages split among the processes that share them)."""
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def tree_pss(root):
    children = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            s = stat(int(name))
            if s:
                children.setdefault(s[2], []).append(int(name))
    total, todo = pss(root), [root]
    while todo:
        for pid in children.get(todo.pop(), []):
            total += pss(pid)
            todo.append(pid)
    return total


def stats(base):
    with urllib.request.urlopen(base + "/stats", timeout=10) as r:
        return json.load(r)


def run(server_pid, base, out, command):
    idle_s = float(os.environ.get("IDLE_S", "3"))
    i0, it0 = cpu_ns(server_pid), time.monotonic()
    time.sleep(idle_s)
    idle_rate = (cpu_ns(server_pid) - i0) / 1e9 / (time.monotonic() - it0)
    before, server0, t0 = stats(base), cpu_ns(server_pid), time.monotonic()
    proc = subprocess.Popen(command, stdout=subprocess.PIPE)
    server_rss, gen_rss = [], []
    # Samples every 200 ms while the generator runs (stdout is read at the end: it is one line).
    while proc.poll() is None:
        s = stat(server_pid)
        if s:
            server_rss.append(s[1])
        gen_rss.append(tree_pss(proc.pid))
        time.sleep(0.2)
    # The generator has exited; wait4 on it was done by poll(), so take the rusage of children.
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    wall = time.monotonic() - t0
    server1, after = cpu_ns(server_pid), stats(base)
    output = proc.stdout.read().decode()
    counts = {k: after[k] - before[k] for k in ("methods_called", "subscriptions_ready", "sessions_started",
                                                 "messages_in", "messages_out")}
    doc = {
        "command": command,
        "json": command[command.index("--json") + 1] if "--json" in command else None,
        "exit": proc.returncode,
        "wall_s": wall,
        "server_cpu_s": (server1 - server0) / 1e9,
        # The server's CPU when nobody uses it, per second, and the run's with it taken away.
        "server_idle_cpu_per_s": idle_rate,
        "server_cpu_net_s": max(0.0, (server1 - server0) / 1e9 - idle_rate * wall),
        "server_rss_peak_mb": max(server_rss, default=0) / 1e6,
        "server_rss_mean_mb": statistics.mean(server_rss) / 1e6 if server_rss else 0,
        "generator_cpu_s": usage.ru_utime + usage.ru_stime,
        "generator_rss_peak_mb": max(gen_rss, default=0) / 1e6,
        "counts": counts,
        "output": output[-200000:],
    }
    with open(out, "w") as f:
        json.dump(doc, f, indent=1)


def pct(values, p):
    values = sorted(values)
    if not values:
        return float("nan")
    return values[min(len(values) - 1, int(round(p / 100 * (len(values) - 1))))]


def scale(browsers_run, scenario):
    """The think scale that keeps a replayed user connected as long as the browsers' median user."""
    connected = json.loads(json.load(open(browsers_run))["output"])["connected_ms"]
    thinks = 0
    for line in open(scenario):
        line = line.strip()
        if line.startswith("- think: ") and line.endswith("ms"):
            thinks += int(line[len("- think: "):-2])
    print(f"{statistics.median(connected) / max(1, thinks):.3f}")


KINDS = [("browsers", "browsers (Playwright + Chromium)"), ("bolide", "bolide replay, recorded pacing"),
         ("paced", "bolide replay, paced like the browsers, page assets too"),
         ("pages", "bolide browser users (engine: browser, Chromium over CDP)")]


def table(results):
    meta = json.load(open(os.path.join(results, "meta.json")))
    rows = {}
    for which, _ in KINDS:
        runs = []
        i = 1
        while os.path.exists(os.path.join(results, f"{which}-{i}.json")):
            runs.append(json.load(open(os.path.join(results, f"{which}-{i}.json"))))
            i += 1
        rows[which] = runs
    session = meta["session"]

    def users(which, r):
        if which == "browsers":
            return json.loads(r["output"])["completed"]
        return json.load(open(r["json"]))["summary"]["users"]["completed"]

    def method_p50(which, r):
        if which == "browsers":
            return pct(json.loads(r["output"])["method_ms"], 50)
        doc = json.load(open(r["json"]))
        if which == "pages":
            # The pages' methods, from their WebSocket frames (to both result and updated).
            calls = doc["browser"]["methods"]
            n = sum(c["count"] for c in calls)
            return sum(c["latency"]["p50_us"] / 1000 * c["count"] for c in calls) / n if n else float("nan")
        calls = [s for s in doc["steps"] if s["name"].startswith("call ") and s.get("to_result")]
        # The count-weighted mean of the call steps' medians (the browsers' p50 pools all calls).
        n = sum(s["count"] for s in calls)
        return sum(s["to_result"]["p50_us"] / 1000 * s["count"] for s in calls) / n if n else float("nan")

    med = statistics.median
    kinds = [(w, name) for w, name in KINDS if rows[w]]
    lines = [
        f"Session: {session['calls']} method calls and {session['subs']} subscriptions per user "
        f"(recorded from one browser); {meta['rate']:g} users/s for {meta['seconds']:g} s; "
        f"{meta['reps']} rounds, medians.",
        "",
        "| | " + " | ".join(name for _, name in kinds) + " | " + " | ".join(f"{w} / browsers" for w, _ in kinds[1:]) + " |",
        "|---|" + "---:|" * (2 * len(kinds) - 1),
    ]

    def row(name, f, fmt="{:.1f}", spread=False):
        """The medians (with the runs' range when `spread`) and each one's ratio to the browsers'."""
        runs = [[f(w, r) for r in rows[w]] for w, _ in kinds]
        values = [med(v) for v in runs]
        ratios = [f"{v / values[0]:.2f}" if values[0] else "" for v in values[1:]]
        if spread:
            cells = [fmt.format(m) + " (" + fmt.format(min(v)) + "-" + fmt.format(max(v)) + ")" for m, v in zip(values, runs)]
            # The ratio's range: the extremes of one over the other's.
            ratios = [f"{values[k] / values[0]:.2f} ({min(runs[k]) / max(runs[0]):.2f}-{max(runs[k]) / min(runs[0]):.2f})"
                      if min(runs[0]) > 0 else "" for k in range(1, len(runs))]
        else:
            cells = [fmt.format(v) for v in values]
        lines.append(f"| {name} | " + " | ".join(cells) + " | " + " | ".join(ratios) + " |")

    row("users completed", users, "{:.0f}")
    row("method calls per user (server's count)",
        lambda w, r: r["counts"]["methods_called"] / max(1, users(w, r)), "{:.2f}")
    row("subscriptions per user (server's count)",
        lambda w, r: r["counts"]["subscriptions_ready"] / max(1, users(w, r)), "{:.2f}")
    row("server CPU per user, ms (idle CPU taken away; median, range)",
        lambda w, r: 1000 * r.get("server_cpu_net_s", r["server_cpu_s"]) / max(1, users(w, r)), "{:.2f}", spread=True)
    row("server idle CPU, % of one core", lambda w, r: 100 * r.get("server_idle_cpu_per_s", 0), "{:.2f}")
    row("server CPU, % of one core", lambda w, r: 100 * r["server_cpu_s"] / r["wall_s"], "{:.2f}")
    row("server RSS peak, MB", lambda w, r: r["server_rss_peak_mb"])
    row("DDP messages in per second (server)", lambda w, r: r["counts"]["messages_in"] / r["wall_s"])
    row("DDP messages out per second (server)", lambda w, r: r["counts"]["messages_out"] / r["wall_s"])
    row("DDP messages in per user", lambda w, r: r["counts"]["messages_in"] / max(1, users(w, r)))
    row("DDP messages out per user", lambda w, r: r["counts"]["messages_out"] / max(1, users(w, r)))
    row("method latency p50, ms (client side)", method_p50, "{:.2f}")
    row("generator CPU per user, ms", lambda w, r: 1000 * r["generator_cpu_s"] / max(1, users(w, r)), "{:.1f}")
    row("generator CPU, % of one core", lambda w, r: 100 * r["generator_cpu_s"] / r["wall_s"], "{:.2f}")
    row("generator memory peak, MB (PSS of its process tree)", lambda w, r: r["generator_rss_peak_mb"])
    if rows.get("pages"):
        # What bolide says its browsers cost (their processes watched during the run), per user.
        def own(w, r):
            if w != "pages":
                return float("nan")
            doc = json.load(open(r["json"]))
            cost = doc["browser"]["cost"]
            return cost["avg_cpu_pct"] / 100 * doc["summary"]["duration_s"] * 1000 / max(1, users(w, r))
        row("browsers' CPU per user as bolide measured it, ms", own, "{:.1f}")
    row("wall time of the run, s", lambda w, r: r["wall_s"])
    print("\n".join(lines))
    b = med([r["generator_cpu_s"] / max(1, users("browsers", r)) for r in rows["browsers"]])
    for w, _ in kinds[1:]:
        o = med([r["generator_cpu_s"] / max(1, users(w, r)) for r in rows[w]])
        print(f"\ngenerator CPU per user, browsers / {w}: {b / o:.0f}x")


if __name__ == "__main__":
    if sys.argv[1] == "run":
        i = sys.argv.index("--")
        run(int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[i + 1:])
    elif sys.argv[1] == "scale":
        scale(sys.argv[2], sys.argv[3])
    elif sys.argv[1] == "table":
        table(sys.argv[2])
    else:
        sys.exit(__doc__)
