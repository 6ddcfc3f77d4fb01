#!/usr/bin/env python3
"""The folders depend one way: cmd -> features -> common (ctest test_layering).

usage: layering.py REPO

Reads every #include "..." of the C sources and headers of the tree and
prints one line per include that runs against the arrow:

  - a file outside cmd/ that includes a cmd/ header (cmd/ is linked into
    the executable only: what a feature folder needs is in common/);
  - a file of common/ that includes a feature folder's header.

Tests (tests/) and tools may include anything. A self-test feeds each rule
an include it must catch and one it must pass before the sources are read.
Exit 1 on any finding.
"""
import os
import re
import sys

FEATURES = ("gc", "leakcheck", "sync", "lanceparse", "usage", "trash")
SKIP = ("tests", "build", "bench", "contrib", ".git")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def findings(rel, src):
    """(line, what) for each include of rel (a path under the repo) against the arrow."""
    top = rel.split("/", 1)[0]
    out = []
    for m in INCLUDE.finditer(src):
        inc = m.group(1)
        line = src.count("\n", 0, m.start()) + 1
        head = inc.split("/", 1)[0]
        if top != "cmd" and head == "cmd":
            out.append((line, "includes %s (cmd/ is above every other folder)" % inc))
        elif top == "common" and head in FEATURES:
            out.append((line, "includes %s (a feature folder is above common/)" % inc))
    return out


def selftest():
    assert findings("gc/cmd_gc.c", '#include "cmd/util.h"\n')
    assert findings("common/warmup/follow.c", ' # include "cmd/cmd.h"\n')
    assert findings("common/volume.c", '#include "sync/sync.h"\n')
    assert not findings("cmd/main.c", '#include "cmd/cmd.h"\n#include "gc/gc.h"\n')
    assert not findings("gc/cmd_gc.c", '#include "common/command.h"\n#include "gc/gc.h"\n')
    assert not findings("sync/cmd_sync.c", '#include "common/volume.h"\n')


def main():
    if len(sys.argv) != 2:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    repo = sys.argv[1]
    selftest()
    bad = 0
    for root, dirs, files in os.walk(repo):
        rel_root = os.path.relpath(root, repo)
        if rel_root == ".":
            dirs[:] = [d for d in dirs if d not in SKIP]
            continue
        for name in sorted(files):
            if not name.endswith((".c", ".h")):
                continue
            rel = os.path.join(rel_root, name).replace(os.sep, "/")
            with open(os.path.join(root, name), encoding="utf-8", errors="replace") as f:
                src = f.read()
            for line, what in findings(rel, src):
                print("%s:%d: %s" % (rel, line, what))
                bad += 1
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
