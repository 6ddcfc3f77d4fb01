#!/usr/bin/env python3
"""Print the long options a jfsops command accepts.

usage: optables.py [--args] [--bin JFSOPS] REPO CMD

With --args each line also carries the argument kind: 0 none, 1 required.

Every command reads its options from one table (common/opt.h) and dumps it
itself: `jfsops help --options-json CMD` (hidden rows left out). The binary
is --bin, else env JFSOPS_BIN, else REPO/build/jfsops. Exit 1 when the
binary gives no table for the command.
"""
import json
import os
import subprocess
import sys


def table_dump(binary, cmd):
    """{name: kind} from the command's own table, or None when it gives none."""
    p = subprocess.run([binary, "help", "--options-json", cmd], capture_output=True,
                       text=True, timeout=30)
    if p.returncode != 0 or not p.stdout.strip():
        return None
    t = json.loads(p.stdout)
    return {o["long"]: 1 if o["takes_value"] else 0 for o in t["options"] if not o["hidden"]}


def command_options(repo, cmd, binary=None):
    """{name: kind} of cmd from its table, {} when the binary gives none."""
    binary = binary or os.environ.get("JFSOPS_BIN") or os.path.join(repo, "build", "jfsops")
    names = table_dump(binary, cmd)
    return names if names is not None else {}


def main():
    args = sys.argv[1:]
    with_args = bool(args) and args[0] == "--args"
    if with_args:
        args = args[1:]
    binary = os.environ.get("JFSOPS_BIN") or None
    if len(args) > 1 and args[0] == "--bin":
        binary, args = args[1], args[2:]
    if len(args) != 2:
        sys.exit(__doc__)
    repo, cmd = args
    names = command_options(repo, cmd, binary)
    if not names:
        print("optables: no option table for %s (jfsops help --options-json %s)" % (cmd, cmd),
              file=sys.stderr)
        sys.exit(1)
    for n in sorted(names):
        print("--" + n + (" %d" % names[n] if with_args else ""))


if __name__ == "__main__":
    main()
