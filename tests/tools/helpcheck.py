#!/usr/bin/env python3
"""Check the --help text of every jfsops command (tests/integration/help.sh).

usage: helpcheck.py REPO JFSOPS-BINARY

For each command of `jfsops --list-commands`:
  - `jfsops CMD --help` and `jfsops help CMD` exit 0 and print the same text;
  - its first line is "jfsops CMD - SUMMARY" with the summary that
    `jfsops --help` lists for CMD (one line, from the command table);
  - every long option of the command's option table (its own dump:
    `jfsops help --options-json`) is on an option line of the help, and every flag
    on an option line is in the table;
  - every option that takes a value says its default ("default" or
    "required" in its description);
  - no line shows a printf escape ("%%": the text is printed with fputs);
  - an "Examples:" section has at least two commands that run
    `jfsops CMD` (optionally after VAR=value assignments), and every --flag
    those examples give to a jfsops command is one that command accepts.
Prints one line per problem, grouped by command; exit 1 if any.
"""
import json
import os
import re
import subprocess
import sys


def command_options(binary, cmd):
    """{name: 1 takes a value, 0 not} of cmd, from the table the binary dumps
    (`jfsops help --options-json CMD`, hidden rows left out); {} for none."""
    p = subprocess.run([binary, "help", "--options-json", cmd], capture_output=True,
                       text=True, timeout=30)
    if p.returncode != 0 or not p.stdout.strip():
        return {}
    t = json.loads(p.stdout)
    return {o["long"]: 1 if o["takes_value"] else 0 for o in t["options"] if not o["hidden"]}


OPT_LINE = re.compile(r"^( {1,8})(-[A-Za-z0-9], )?--[a-z0-9]")
FLAG = re.compile(r"(?:^|[\s,\[|(])(--[a-z0-9][a-z0-9-]*)")


def run(binary, *args):
    p = subprocess.run([binary, *args], capture_output=True, text=True, timeout=30)
    return p.returncode, p.stdout, p.stderr


def option_blocks(lines):
    """[(flags, text)] for each option line (before Examples:)."""
    blocks = []
    i = 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("Examples:"):
            break
        m = OPT_LINE.match(line)
        if not m:
            i += 1
            continue
        indent = len(m.group(1))
        # the flag part ends where the description starts (2+ spaces)
        body = line.strip()
        parts = re.split(r"\s{2,}", body, maxsplit=1)
        flags = [f for f in FLAG.findall(" " + parts[0])]
        text = body
        j = i + 1
        while j < len(lines):
            nxt = lines[j]
            if not nxt.strip() or OPT_LINE.match(nxt):
                break
            lead = len(nxt) - len(nxt.lstrip(" "))
            if lead <= indent:
                break
            text += " " + nxt.strip()
            j += 1
        blocks.append((flags, text))
        i = j
    return blocks


def examples(lines):
    """Commands of the Examples section, continuation lines joined."""
    try:
        start = next(i for i, l in enumerate(lines) if l.rstrip() == "Examples:")
    except StopIteration:
        return None
    cmds, cur = [], ""
    for line in lines[start + 1:]:
        if line and not line.startswith(" "):
            break
        s = line.strip()
        if not s:
            if cur:
                cmds.append(cur)
                cur = ""
            continue
        if cur and (cur.endswith("\\") or cur.endswith("|") or line.startswith("    ")):
            cur = cur.rstrip("\\").rstrip() + " " + s
        else:
            if cur:
                cmds.append(cur)
            cur = s
    if cur:
        cmds.append(cur)
    return cmds


def strip_env(seg):
    seg = seg.strip()
    while re.match(r"^[A-Za-z_][A-Za-z0-9_]*=\S*\s+", seg):
        seg = re.sub(r"^[A-Za-z_][A-Za-z0-9_]*=\S*\s+", "", seg, count=1)
    return seg


def main():
    repo, binary = sys.argv[1], sys.argv[2]
    rc, top, _ = run(binary, "--help")
    summaries = {}
    for line in top.splitlines():
        m = re.match(r"^  ([a-z][a-z0-9-]*)\s{2,}(\S.*)$", line)
        if m:
            summaries[m.group(1)] = m.group(2)
    _, cmds, _ = run(binary, "--list-commands")
    cmds = cmds.split()
    tables = {}
    for c in cmds:
        tables[c] = command_options(binary, c)
    _, help_all, _ = run(binary, "help")
    problems = {}

    def bad(c, msg):
        problems.setdefault(c, []).append(msg)

    if help_all != top:
        bad("(global)", "`jfsops help` differs from `jfsops --help`")
    for c in cmds:
        rc1, h, err = run(binary, c, "--help")
        rc2, h2, _ = run(binary, "help", c)
        if rc1 != 0 or not h:
            bad(c, "`jfsops %s --help` exits %d / prints nothing (%s)" % (c, rc1, err.strip()[:100]))
            continue
        if rc2 != 0 or h2 != h:
            bad(c, "`jfsops help %s` differs from `jfsops %s --help`" % (c, c))
        lines = h.splitlines()
        # help text goes out with fputs: a printf escape left in it shows as is
        for i, line in enumerate(lines):
            if "%%" in line:
                bad(c, "line %d shows a printf escape '%%%%': %r" % (i + 1, line.strip()[:90]))
        want = "jfsops %s - %s" % (c, summaries.get(c, "?"))
        if c not in summaries:
            bad(c, "`jfsops --help` does not list %s with a summary" % c)
        if lines[0] != want:
            bad(c, "first line is %r, want the one-line summary %r" % (lines[0], want))
        table = tables[c]
        if not table:
            bad(c, "no option table from `jfsops help --options-json %s`" % c)
        blocks = option_blocks(lines)
        documented = {}
        for flags, text in blocks:
            for f in flags:
                documented[f[2:]] = text
        for name, kind in sorted(table.items()):
            if name not in documented:
                bad(c, "--%s is accepted but not documented in --help" % name)
            elif kind and not re.search(r"default|required", documented[name], re.I):
                bad(c, "--%s takes a value but its help gives no default: %r" % (name, documented[name][:90]))
        for name in sorted(documented):
            if table and name not in table:
                bad(c, "--%s is documented but not in the option table" % name)
        ex = examples(lines)
        if ex is None:
            bad(c, "no 'Examples:' section")
            continue
        n = 0
        for cmd in ex:
            for seg in re.split(r"\s(?:\||&&|;)\s*", cmd):
                seg = strip_env(seg)
                m = re.match(r"^jfsops(?:-|\s+)([a-z]+)\b(.*)$", seg)
                if not m:
                    continue
                sub, rest = m.group(1), m.group(2)
                if sub == c:
                    n += 1
                if sub not in tables:
                    bad(c, "example runs `jfsops %s`, not a command: %r" % (sub, seg[:80]))
                    continue
                rest = re.sub(r"'[^']*'|\"[^\"]*\"", "", rest.split("#")[0])
                for f in re.findall(r"(?:^|\s)--([a-z0-9][a-z0-9-]*)", rest):
                    if f not in tables[sub]:
                        bad(c, "example gives --%s to jfsops %s, which does not accept it" % (f, sub))
        if n < 2:
            bad(c, "only %d example(s) run `jfsops %s` (want 2+)" % (n, c))
    for c in sorted(problems):
        for p in problems[c]:
            print("FAIL %s: %s" % (c, p))
    ok = [c for c in cmds if c not in problems]
    print("help ok: %s" % (" ".join(ok) if ok else "(none)"))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
