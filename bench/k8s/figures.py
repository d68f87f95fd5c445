"""bench/k8s-local.sh's readings: the merged document against the reference server's counts, the
pods' start skew, what the merge made of a re-run index. Each prints one line and exits 1 when
the case did not behave as it should."""

import datetime
import json
import re
import sys


def load(path):
    with open(path) as f:
        return json.load(f)


def count(doc, step):
    return sum(s["count"] for s in doc["steps"] if s["name"] == step)


def ours(doc):
    return {"sessions": count(doc, "connect"),
            "methods": count(doc, "call insertTask") + count(doc, "call removeAllTasks")}


def theirs(before, after):
    b, a = load(before), load(after)
    return {"sessions": a["sessions_started"] - b["sessions_started"],
            "methods": a["methods_called"] - b["methods_called"]}


def documents(log):
    """Every document the pods printed, from the collected log (kubectl's prefixes removed)."""
    docs, cur = [], None
    with open(log) as f:
        for line in f.read().splitlines():
            line = re.sub(r"^\[pod/[^\]]*\] ", "", line)
            if line == "=== bolide result begin ===":
                cur = []
            elif line == "=== bolide result end ===" and cur is not None:
                docs.append(json.loads("\n".join(cur)))
                cur = None
            elif cur is not None:
                cur.append(line)
    return docs


def check(name, merged, before, after):
    """The merged counts equal the server's."""
    m = load(merged)
    mine, server = ours(m), theirs(before, after)
    info = m.get("merged", {})
    interrupted = [s["index"] for s in info.get("segments", []) if s.get("interrupted")]
    print(f"{name}: merged sessions {mine['sessions']} / server {server['sessions']}, merged methods "
          f"{mine['methods']} / server {server['methods']}; segments {len(info.get('segments', []))}/"
          f"{info.get('segments_planned')}, missing {info.get('missing', [])}, interrupted {interrupted}")
    return mine == server


def deleted(merged):
    """A deleted pod's segment: in the merge, interrupted, none missing."""
    info = load(merged)["merged"]
    interrupted = [s["index"] for s in info["segments"] if s.get("interrupted")]
    return interrupted == [3] and not info.get("missing") and len(info["segments"]) == 4


def stamp(text):
    return datetime.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def skew(merged, shared, job, pods):
    """When the pods began their load against the shared start; when their containers started."""
    segs = load(merged)["merged"]["segments"]
    late = sorted(stamp(s["started_at"]) - stamp(shared) for s in segs)
    created = stamp(load(job)["metadata"]["creationTimestamp"])
    up = sorted(stamp(p["status"]["containerStatuses"][0]["state"]["terminated"]["startedAt"]) - created
                for p in load(pods)["items"])
    print(f"{len(late)} pods began their load {late[0] * 1000:.0f} to {late[-1] * 1000:.0f} ms after the shared "
          f"start (skew {(late[-1] - late[0]) * 1000:.0f} ms, median {late[len(late) // 2] * 1000:.0f} ms); their "
          f"containers started {up[0]:.0f} to {up[-1]:.0f} s after the Job was created")
    return len(late) == 20


def rerun(log, merged, before, after):
    """An index run twice: every document printed, together, equals the server's counts; the merge
    keeps the complete re-run, says the segment was given twice and how late it started."""
    docs = documents(log)
    printed = {k: sum(ours(d)[k] for d in docs) for k in ("sessions", "methods")}
    server = theirs(before, after)
    m = load(merged)
    info = m["merged"]
    seg3 = [s for s in info["segments"] if s["index"] == 3][0]
    print(f"a pod deleted, its index re-run: {len(docs)} documents printed, their sessions {printed['sessions']} / "
          f"server {server['sessions']}, methods {printed['methods']} / server {server['methods']}; merged "
          f"{ours(m)['sessions']} sessions, segments given twice {info.get('duplicated', [])}, segment 3 kept from "
          f"{seg3['source']}, started {seg3['offset_s']:.1f} s after the earliest")
    return (printed == server and len(docs) == 5 and info.get("duplicated") == [3]
            and not seg3.get("interrupted") and seg3["offset_s"] > 5)


if __name__ == "__main__":
    what, args = sys.argv[1], sys.argv[2:]
    ok = {"check": check, "deleted": deleted, "skew": skew, "rerun": rerun}[what](*args)
    sys.exit(0 if ok else 1)
