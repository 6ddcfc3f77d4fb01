#!/usr/bin/env python3
"""Check the Grafana dashboard of docs/grafana/ against what jfsops writes.

usage: dashcheck.py DASHBOARD.json [--bin JFSOPS] [FILE.prom ...]

Always: the JSON has a Grafana dashboard's shape (title, uid, an integer
schemaVersion, templating.list, panels with unique ids, a type, a title and a
gridPos inside the 24 columns; every panel but a row has targets, each with a
refId unique in its panel and a non-empty PromQL expr with balanced
brackets and quotes); every $variable a query uses is defined; every expr
and variable query names at least one jfsops_ metric.
--bin: every metric is jfsops_<command>_... for a command of
`jfsops --list-commands` (what ctest can check without a volume).
FILE.prom ...: metrics files written by real runs (tests/integration/
metrics.sh): every metric the dashboard queries is one of theirs, a
{__name__=~"RE"} matches one, and every label a selector or a by (...)
names (or label_values asks for) is on that metric in them.
Prints one line per problem; exit 1 if any.
"""
import json
import re
import subprocess
import sys

NAME_RE = re.compile(r'__name__\s*=~\s*"((?:[^"\\]|\\.)*)"')
METRIC = re.compile(r"\b(jfsops_[A-Za-z0-9_]+)\b(\s*\{[^}]*\})?")
LABEL_KEY = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\s*(?:=~|!~|!=|=)")
BY = re.compile(r"\b(?:by|without)\s*\(([^)]*)\)")
VAR = re.compile(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)")
LABEL_VALUES = re.compile(r"label_values\((.*),\s*([A-Za-z_][A-Za-z0-9_]*)\s*\)")


def balanced(expr):
    depth = []
    pairs = {")": "(", "}": "{", "]": "["}
    in_str = False
    prev = ""
    for ch in expr:
        if in_str:
            if ch == '"' and prev != "\\":
                in_str = False
        elif ch == '"':
            in_str = True
        elif ch in "({[":
            depth.append(ch)
        elif ch in ")}]":
            if not depth or depth.pop() != pairs[ch]:
                return False
        prev = ch
    return not depth and not in_str


def emitted(paths):
    """metric name -> set of label keys, from Prometheus text files"""
    names = {}
    for p in paths:
        for line in open(p, encoding="utf-8"):
            if not line.strip() or line.startswith("#"):
                continue
            m = re.match(r"([A-Za-z_:][A-Za-z0-9_:]*)(\{[^}]*\})?\s", line)
            if m:
                keys = set(re.findall(r'([A-Za-z_][A-Za-z0-9_]*)="', m.group(2) or ""))
                names.setdefault(m.group(1), set()).update(keys)
    return names


def queries(dash, problems):
    """(where, PromQL) of every target and query variable"""
    out = []
    for v in dash.get("templating", {}).get("list", []):
        if v.get("type") == "query":
            q = v.get("query")
            q = q.get("query") if isinstance(q, dict) else q
            if not isinstance(q, str) or not q:
                problems.append("variable %s: no query" % v.get("name"))
            else:
                out.append(("variable $%s" % v.get("name"), q))
    for p in dash.get("panels", []):
        if p.get("type") == "row":
            continue
        for t in p.get("targets", []):
            if isinstance(t, dict) and isinstance(t.get("expr"), str):
                out.append(("panel %r %s" % (p.get("title"), t.get("refId")), t["expr"]))
    return out


def check_shape(dash, problems):
    if not isinstance(dash, dict):
        problems.append("not a JSON object")
        return
    for k, typ in (("title", str), ("uid", str), ("schemaVersion", int), ("panels", list)):
        if not isinstance(dash.get(k), typ):
            problems.append("dashboard: %s missing or not a %s" % (k, typ.__name__))
    if not isinstance(dash.get("templating", {}).get("list"), list):
        problems.append("dashboard: templating.list missing")
    ids = set()
    for p in dash.get("panels", []):
        what = "panel %r" % p.get("title")
        for k in ("type", "title"):
            if not isinstance(p.get(k), str) or not p.get(k):
                problems.append("%s: no %s" % (what, k))
        if not isinstance(p.get("id"), int) or p["id"] in ids:
            problems.append("%s: id %r missing or not unique" % (what, p.get("id")))
        ids.add(p.get("id"))
        g = p.get("gridPos", {})
        if not all(isinstance(g.get(k), int) for k in "xywh") or g["x"] + g["w"] > 24 or g["w"] < 1 or g["h"] < 1:
            problems.append("%s: gridPos %r is not inside the 24 columns" % (what, g))
        if p.get("type") == "row":
            continue
        ts = p.get("targets")
        if not isinstance(ts, list) or not ts:
            problems.append("%s: no targets" % what)
            continue
        refs = set()
        for t in ts:
            if not isinstance(t, dict) or not isinstance(t.get("expr"), str) or not t["expr"].strip():
                problems.append("%s: a target without an expr" % what)
                continue
            if t.get("refId") in refs or not t.get("refId"):
                problems.append("%s: refId %r missing or repeated" % (what, t.get("refId")))
            refs.add(t.get("refId"))


def main():
    args = sys.argv[1:]
    if not args or args[0].startswith("-"):
        sys.exit(__doc__)
    path = args.pop(0)
    binary = None
    if "--bin" in args:
        i = args.index("--bin")
        binary = args[i + 1]
        del args[i:i + 2]
    problems = []
    try:
        dash = json.load(open(path, encoding="utf-8"))
    except ValueError as e:
        print("dashcheck: %s: not JSON: %s" % (path, e))
        return 1
    check_shape(dash, problems)
    defined = {v.get("name") for v in dash.get("templating", {}).get("list", [])}
    commands = None
    if binary:
        commands = subprocess.run([binary, "--list-commands"], capture_output=True, text=True,
                                  check=True).stdout.split()
    names = emitted(args) if args else None
    used = set()
    for where, q in queries(dash, problems):
        if not balanced(q):
            problems.append("%s: unbalanced brackets or quotes: %s" % (where, q))
        for v in VAR.findall(q):
            if v not in defined and not v.startswith("__"):
                problems.append("%s: $%s is not a dashboard variable" % (where, v))
        metrics = []
        for rx in NAME_RE.findall(q):
            if names is not None and not any(re.fullmatch(rx, n) for n in names):
                problems.append("%s: __name__=~%r matches no metric jfsops wrote" % (where, rx))
            metrics.append(None)
        for name, sel in METRIC.findall(NAME_RE.sub("", q)):
            used.add(name)
            metrics.append(name)
            if commands is not None and not any(name.startswith("jfsops_%s_" % c) for c in commands):
                problems.append("%s: %s is not jfsops_<command>_... of a jfsops command" % (where, name))
            if names is None:
                continue
            if name not in names:
                problems.append("%s: %s is not a metric jfsops wrote" % (where, name))
                continue
            for k in LABEL_KEY.findall(sel):
                if k not in names[name]:
                    problems.append("%s: %s has no label %s" % (where, name, k))
        if not metrics:
            problems.append("%s: queries no jfsops metric: %s" % (where, q))
        if names is not None:
            for sel, k in LABEL_VALUES.findall(q):
                rxs = NAME_RE.findall(sel)
                have = [n for n in names if any(re.fullmatch(rx, n) for rx in rxs)] + \
                    [m for m in metrics if m in names]
                if not any(k in names[n] for n in have):
                    problems.append("%s: label_values(..., %s): no metric it names has that label" % (where, k))
            for by in BY.findall(q):
                for k in (x.strip() for x in by.split(",")):
                    for name in (m for m in metrics if m in names):
                        if k and k not in names[name]:
                            problems.append("%s: by (%s): %s has no label %s" % (where, by, name, k))
    for p in problems:
        print("dashcheck: " + p)
    if problems:
        return 1
    print("dashcheck: %s: %d panels, %d metrics, all %s" % (
        path, len(dash["panels"]), len(used),
        "written by the runs given" if names is not None else "well-formed"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
