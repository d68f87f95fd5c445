#!/usr/bin/env python3
"""A stand-in for kubectl and a cluster, for `bolide k8s --wait` in the tests: the Job's pods are
processes here, each the manifest's own command with JOB_COMPLETION_INDEX set (as
tests/k8s.rs runs them); its answers are kubectl's JSON, cut down to what bolide reads. The real
cluster is bench/k8s-local.sh's; this one lets CI check what bolide does with the answers.

State lives in $STANDIN_DIR: one folder per pod (pid, exit code, log). Supported: create -f -,
get pods -l job-name=J|batch.kubernetes.io/controller-uid=U -o json, get job J -o json,
logs [-f] -c C POD, patch (accepted, nothing kept), delete job J, delete -f -, delete KIND/NAME.
A test deletes a pod by writing `deleted` in its folder and sending SIGTERM to its pid, as the
kubelet does.
"""

import json
import os
import signal
import subprocess
import sys
import time

STATE = os.environ["STANDIN_DIR"]


def args_of(yaml):
    """The Job's name, completions, and the container's command and args (JSON strings)."""
    lines = yaml.splitlines()
    job = lines.index("kind: Job")
    name = json.loads(lines[job + 2].split("name: ", 1)[1])
    n = int(next(l for l in lines if l.startswith("  completions: ")).split(": ")[1])
    command = json.loads(next(l for l in lines if l.strip().startswith("command: ")).strip()[len("command: "):])
    at = next(i for i, l in enumerate(lines) if l.strip() == "args:")
    args = []
    for l in lines[at + 1:]:
        if not l.strip().startswith('- "'):
            break
        args.append(json.loads(l.strip()[2:]))
    return name, n, command + args


def pods(job):
    out = []
    for d in sorted(os.listdir(STATE)):
        path = os.path.join(STATE, d)
        if not d.startswith(job + "-") or not os.path.isdir(path):
            continue
        out.append((d, path))
    return out


def read(path, name, default=None):
    try:
        with open(os.path.join(path, name)) as f:
            return f.read().strip()
    except OSError:
        return default


def pod_json(name, path):
    code = read(path, "code")
    phase = "Running" if code is None else ("Succeeded" if code == "0" else "Failed")
    status = {"phase": phase}
    if code is not None:
        status["containerStatuses"] = [{"state": {"terminated": {"exitCode": int(code), "reason": "Error" if code != "0" else "Completed"}}}]
    return {"metadata": {"name": name, "creationTimestamp": "2026-11-28T00:00:00Z",
                         "annotations": {"batch.kubernetes.io/job-completion-index": read(path, "index")}},
            "status": status}


def main(argv):
    while argv and argv[0].startswith("--namespace"):
        argv = argv[2:]
    if argv[:2] == ["create", "-f"]:
        name, n, command = args_of(sys.stdin.read())
        if os.path.exists(os.path.join(STATE, name + ".job")):
            print(f'Error from server (AlreadyExists): jobs.batch "{name}" already exists', file=sys.stderr)
            return 1
        with open(os.path.join(STATE, name + ".job"), "w") as f:
            f.write(str(n))
        for i in range(n):
            path = os.path.join(STATE, f"{name}-{i}")
            os.makedirs(os.path.join(path, "tmp"))
            with open(os.path.join(path, "index"), "w") as f:
                f.write(str(i))
            env = dict(os.environ, JOB_COMPLETION_INDEX=str(i), TMPDIR=os.path.join(path, "tmp"))
            # The pod: its command, its log, its exit code once it ends (written by a watcher).
            wrapper = 'log="$1"; shift; "$@" >"$log.part" 2>&1 & echo $! >pid.part; mv pid.part pid; wait $!; c=$?; ' \
                      'mv "$log.part" "$log"; echo $c >code.part; mv code.part code'
            subprocess.Popen(["sh", "-c", wrapper, "pod", "log"] + command, cwd=path, env=env,
                             stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             start_new_session=True)
        print(f"job.batch/{name} created")
        return 0
    if argv[:2] == ["get", "pods"]:
        key, value = argv[argv.index("-l") + 1].split("=", 1)
        job = value[len("uid-"):] if key.endswith("controller-uid") else value
        items = [pod_json(n, p) for n, p in pods(job) if not os.path.exists(os.path.join(p, "gone"))]
        print(json.dumps({"items": items}))
        return 0
    if argv[:2] == ["get", "job"]:
        job = argv[2]
        if not os.path.exists(os.path.join(STATE, job + ".job")):
            print(f'Error from server (NotFound): jobs.batch "{job}" not found', file=sys.stderr)
            return 1
        codes = [read(p, "code") for _, p in pods(job)]
        conditions = []
        if all(c is not None for c in codes):
            kind = "Complete" if all(c == "0" for c in codes) else "Failed"
            conditions.append({"type": kind, "status": "True", "reason": "StandIn", "message": "every pod ended"})
        print(json.dumps({"metadata": {"name": job, "uid": "uid-" + job}, "status": {"conditions": conditions}}))
        return 0
    if argv[0] == "logs":
        pod = argv[-1]
        path = os.path.join(STATE, pod)
        if read(path, "pid") is None:
            print(f'container "bolide" in pod "{pod}" is waiting to start: ContainerCreating', file=sys.stderr)
            return 1
        # Follows the log until the pod's end (bounded: 10 minutes); without -f, what it holds now.
        sent = 0
        for _ in range(6000 if "-f" in argv else 1):
            done = read(path, "code") is not None
            name = "log" if done else "log.part"
            try:
                with open(os.path.join(path, name), "rb") as f:
                    f.seek(sent)
                    chunk = f.read()
            except OSError:
                chunk = b""
            sys.stdout.buffer.write(chunk)
            sys.stdout.flush()
            sent += len(chunk)
            if done:
                # A deleted pod and its log are gone once it ended.
                if os.path.exists(os.path.join(path, "deleted")):
                    open(os.path.join(path, "gone"), "w").close()
                return 0
            time.sleep(0.1)
        return 1
    if argv[0] == "patch":
        return 0
    if argv[0] == "delete":
        if argv[1] == "job":
            jobs = [argv[2]]
        elif argv[1].startswith("job.batch/"):
            jobs = [argv[1].split("/", 1)[1]]
        elif argv[1] == "-f":
            jobs = [args_of(sys.stdin.read())[0]]
        else:
            return 0
        for job in jobs:
            try:
                os.remove(os.path.join(STATE, job + ".job"))
            except OSError:
                pass
            for _, p in pods(job):
                pid = read(p, "pid")
                if pid and read(p, "code") is None:
                    try:
                        os.kill(int(pid), signal.SIGTERM)
                    except OSError:
                        pass
        return 0
    print(f"kubectl stand-in: {' '.join(argv)} is not supported", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
