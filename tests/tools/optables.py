#!/usr/bin/env python3
"""Print the long options a jfsops command accepts.

usage: optables.py [--args] [--bin JFSOPS] REPO CMD

With --args each line also carries the argument kind: 0 none, 1 required,
2 optional.

A command with an option table (common/opt.h) dumps it itself:
`jfsops help --options-json CMD` (hidden rows left out); that is asked
first when --bin is given (else env JFSOPS_BIN, when set). A command that still parses with getopt_long
(warmup, trash) has no table: then this reads its source. It finds the file that defines `int cmd_CMD(`, runs it through the C
preprocessor (so CMD_VOL_LONGOPTS and table-building macros expand), and
prints the name of every `{ "name", no_argument|required_argument|
optional_argument, ...}` entry, one per line, sorted. Exit 1 when the
command's source cannot be found or has no option table.
"""
import json
import os
import re
import subprocess
import sys

FOLDERS = ("cmd", "gc", "leakcheck", "sync", "lanceparse", "usage", "trash")


def find_source(repo, cmd):
    pat = re.compile(r"^int\s+cmd_%s\s*\(" % re.escape(cmd), re.M)
    for folder in FOLDERS:
        d = os.path.join(repo, folder)
        if not os.path.isdir(d):
            continue
        for name in sorted(os.listdir(d)):
            if name.endswith(".c"):
                path = os.path.join(d, name)
                with open(path, encoding="utf-8", errors="replace") as f:
                    if pat.search(f.read()):
                        return path
    return None


def options(repo, path):
    cc = os.environ.get("CC", "cc")
    out = subprocess.run(
        [cc, "-E", "-P", "-I", repo, "-D_POSIX_C_SOURCE=200809L", "-D_DEFAULT_SOURCE",
         '-DJO_VERSION="0"', path],
        check=True, capture_output=True, text=True).stdout
    names = {}
    # after preprocessing, no_argument/required_argument/optional_argument
    # are 0/1/2 and NULL is ((void *)0)
    entry = re.compile(r'\{\s*((?:"[^"\n]*"\s*)+),\s*([012])\s*,\s*(?:\(\(void\s*\*\)\s*0\)|0|&\s*\w+)\s*,')
    for m in entry.finditer(out):
        names["".join(re.findall(r'"([^"]*)"', m.group(1)))] = int(m.group(2))
    return names


def table_dump(binary, cmd):
    """{name: kind} from the command's own table, or None when it has none."""
    p = subprocess.run([binary, "help", "--options-json", cmd], capture_output=True,
                       text=True, timeout=30)
    if p.returncode != 0 or not p.stdout.strip():
        return None
    t = json.loads(p.stdout)
    return {o["long"]: 1 if o["takes_value"] else 0 for o in t["options"] if not o["hidden"]}


def command_options(repo, cmd, binary=None):
    """{name: kind} of cmd: its table's dump, else its source's struct option."""
    if binary:
        names = table_dump(binary, cmd)
        if names is not None:
            return names
    path = find_source(repo, cmd)
    return options(repo, path) if path else {}


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
        print("optables: no option table for %s (in the binary or a source defining cmd_%s)"
              % (cmd, cmd), file=sys.stderr)
        sys.exit(1)
    for n in sorted(names):
        print("--" + n + (" %d" % names[n] if with_args else ""))


if __name__ == "__main__":
    main()
