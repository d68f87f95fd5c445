#!/usr/bin/env python3
"""Samples the resident memory of a process and all its descendants (summed) every 0.2 s until it
exits; prints the peak in KB. A load generator that runs workers as child processes is measured
whole (wait4's max RSS is the largest single process's).

Usage: tree-rss.py PID
"""
import os
import sys
import time


def children(pid):
    out = []
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/children") as f:
                out += [int(c) for c in f.read().split()]
    except OSError:
        pass
    return out


def rss_kb(pid):
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def main():
    root = int(sys.argv[1])
    peak = 0
    while os.path.exists(f"/proc/{root}"):
        todo, total = [root], 0
        while todo:
            p = todo.pop()
            total += rss_kb(p)
            todo += children(p)
        peak = max(peak, total)
        time.sleep(0.2)
    print(peak)


main()
