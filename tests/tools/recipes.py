#!/usr/bin/env python3
"""Extract the recipes of docs/operations.md (tests/integration/recipes.sh).

usage: recipes.py MARKDOWN OUTDIR SUBST_FILE

A recipe is a fenced code block between
  <!-- recipe: NAME file=PATH kind=crontab|systemd|config -->
and
  <!-- /recipe -->
Each recipe's text, with every "from<TAB>to" line of SUBST_FILE applied
(longest first), is written to OUTDIR/NAME; OUTDIR/index has one line
"NAME KIND PATH" per recipe. For crontab recipes, OUTDIR/NAME.env gets the
environment lines and OUTDIR/NAME.jobs the command of each job line as cron
would run it (schedule and user fields removed, \\% turned into %; a bare %,
which cron turns into a newline, is refused). Exit 1 on a malformed recipe.
"""
import re
import sys

START = re.compile(r"<!--\s*recipe:\s*(\S+)\s+file=(\S+)\s+kind=(\S+)\s*-->")


def main():
    md, out, subst_file = sys.argv[1:4]
    text = open(md, encoding="utf-8").read()
    subst = []
    for line in open(subst_file, encoding="utf-8"):
        line = line.rstrip("\n")
        if line:
            a, b = line.split("\t", 1)
            subst.append((a, b))
    subst.sort(key=lambda p: -len(p[0]))
    index = []
    pos = 0
    while True:
        m = START.search(text, pos)
        if not m:
            break
        name, path, kind = m.groups()
        end = text.find("<!-- /recipe -->", m.end())
        if end < 0:
            sys.exit("recipe %s: no <!-- /recipe --> marker" % name)
        body = text[m.end():end]
        fm = re.search(r"^```[^\n]*\n(.*?)^```", body, re.S | re.M)
        if not fm:
            sys.exit("recipe %s: no fenced code block" % name)
        code = fm.group(1)
        for a, b in subst:
            code = code.replace(a, b)
        with open("%s/%s" % (out, name), "w", encoding="utf-8") as f:
            f.write(code)
        if kind == "crontab":
            env, jobs = [], []
            for line in code.splitlines():
                s = line.strip()
                if not s or s.startswith("#"):
                    continue
                if re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", s):
                    env.append(s)
                    continue
                f = s.split(None, 6)
                if len(f) < 7:
                    sys.exit("recipe %s: cron.d line needs 5 time fields, a user and a command: %s" % (name, s))
                cmd = f[6]
                if re.search(r"(?<!\\)%", cmd):
                    sys.exit("recipe %s: an unescaped %% in a cron command becomes a newline" % name)
                jobs.append(cmd.replace("\\%", "%"))
            if not jobs:
                sys.exit("recipe %s: no job line" % name)
            with open("%s/%s.env" % (out, name), "w", encoding="utf-8") as f:
                f.write("".join(e + "\n" for e in env))
            with open("%s/%s.jobs" % (out, name), "w", encoding="utf-8") as f:
                f.write("".join(j + "\n" for j in jobs))
        index.append("%s %s %s" % (name, kind, path))
        pos = end
    if not index:
        sys.exit("no recipes (<!-- recipe: ... --> markers) in %s" % md)
    with open("%s/index" % out, "w", encoding="utf-8") as f:
        f.write("\n".join(index) + "\n")


if __name__ == "__main__":
    main()
