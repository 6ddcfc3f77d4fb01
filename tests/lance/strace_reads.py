#!/usr/bin/env python3
"""Observe the bytes pylance reads: run a command under strace and turn its
pread64/read calls into per-file [start, end) intervals.

Used by check_coverage.py; runnable alone for debugging:
  strace_reads.py ROOT -- python scan.py ...
prints {relative_path: [[start, end], ...]} for files under ROOT as JSON.
"""
import json
import os
import re
import subprocess
import sys
import tempfile

CALL = re.compile(r'^(\d+)\s+(\w+)\((.*)$')
RESUMED = re.compile(r'^(\d+)\s+<\.\.\. (\w+) resumed>(.*)$')
FD = re.compile(r'^(-?\d+)<([^>]*)>')
RET = re.compile(r'\)\s+=\s+(-?\d+)(?:<([^>]*)>)?')


def merge(iv):
    iv.sort()
    out = []
    for s, e in iv:
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return out


def parse(lines, root):
    root = os.path.realpath(root) + "/"
    pending = {}
    pos = {}       # fd number -> file position for read()
    reads = {}     # path -> [[s, e]]
    for line in lines:
        line = line.rstrip("\n")
        m = RESUMED.match(line)
        if m:
            pid, name, rest = m.groups()
            if pid not in pending:
                continue
            pname, head = pending.pop(pid)
            text = head + rest
            name = pname
        else:
            m = CALL.match(line)
            if not m:
                continue
            pid, name, text = m.groups()
            if text.endswith("<unfinished ...>"):
                pending[pid] = (name, text[: -len("<unfinished ...>")])
                continue
        r = RET.search(text)
        if not r:
            continue
        ret = int(r.group(1))
        if name == "openat":
            if ret >= 0:
                pos[ret] = 0
            continue
        f = FD.match(text)
        if not f:
            continue
        fd, path = int(f.group(1)), f.group(2)
        args = [a.strip() for a in text[: r.start()].split(",")]
        if name == "lseek" and ret >= 0:
            pos[fd] = ret
            continue
        if ret <= 0:
            continue
        if name == "pread64":
            start = int(args[-1])
        elif name == "read":
            start = pos.get(fd, 0)
            pos[fd] = start + ret
        else:
            continue
        if not path.startswith(root):
            continue
        reads.setdefault(path[len(root):], []).append([start, start + ret])
    return {k: merge(v) for k, v in reads.items()}


def observe(root, cmd, env=None):
    with tempfile.NamedTemporaryFile("r", suffix=".strace") as t:
        subprocess.run(["strace", "-f", "-y", "-s", "0", "-qq",
                        "-e", "trace=openat,pread64,read,lseek", "-o", t.name] + cmd,
                       check=True, stdout=subprocess.DEVNULL, env=env)
        return parse(t.readlines(), root)


if __name__ == "__main__":
    i = sys.argv.index("--")
    print(json.dumps(observe(sys.argv[1], sys.argv[i + 1:]), indent=1))
