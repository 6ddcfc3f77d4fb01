#!/usr/bin/env python3
"""Validate a jfsops --metrics-file with prometheus_client's text parser.

usage: promcheck.py COMMAND FILE [key=value ...]

The contract (docs/metrics.md, common/run_metrics.c): the file parses as Prometheus
text format; every family has HELP and TYPE; every name is
jfsops_<COMMAND>_...; every sample is a gauge (a per-run value is
jfsops_<COMMAND>_last_run_<thing>, nothing is a counter that resets each
run); jfsops_<COMMAND>_last_run_timestamp_seconds, _last_run_duration_seconds,
_last_run_exit_code and _last_run_success are there; values are finite;
every sample carries the same volume/job labels. Each key=value says what a
sample must be:
  exit=N        last_run_exit_code
  success=0|1   last_run_success
  last_success=absent|present|T   last_success_timestamp_seconds (T: exact)
  volume=NAME   job=NAME          the labels every sample carries
Prints the problems; exit 1 if any. With -v, prints the samples as JSON.
"""
import json
import math
import re
import sys

from prometheus_client.parser import text_string_to_metric_families


def main():
    args = [a for a in sys.argv[1:] if a != "-v"]
    verbose = "-v" in sys.argv[1:]
    cmd, path = args[0], args[1]
    want = dict(a.split("=", 1) for a in args[2:])
    text = open(path, encoding="utf-8").read()
    problems = []
    prefix = "jfsops_%s_" % cmd
    try:
        fams = list(text_string_to_metric_families(text))
    except Exception as e:  # the parser raises ValueError and friends
        print("FAIL %s: not Prometheus text format: %s" % (path, e))
        return 1
    if not fams:
        problems.append("no metrics")
    helps = set(re.findall(r"^# HELP (\S+) ", text, re.M))
    types = dict(re.findall(r"^# TYPE (\S+) (\S+)$", text, re.M))
    samples = {}
    for fam in fams:
        if fam.type != "gauge":
            problems.append("%s is a %s: every jfsops metric is a gauge" % (fam.name, fam.type))
        for s in fam.samples:
            samples.setdefault(s.name, []).append(s)
            if not s.name.startswith(prefix):
                problems.append("%s does not follow jfsops_%s_<thing>" % (s.name, cmd))
            if not math.isfinite(s.value):
                problems.append("%s has a non-finite value" % s.name)
            for k in ("volume", "job"):
                if k in want and s.labels.get(k) != want[k]:
                    problems.append("%s%s: label %s=%r, want %r" % (s.name, s.labels, k, s.labels.get(k), want[k]))
        if fam.name not in helps:
            problems.append("%s has no # HELP" % fam.name)
        if fam.name not in types:
            problems.append("%s has no # TYPE" % fam.name)
    for need in ("last_run_timestamp_seconds", "last_run_duration_seconds", "last_run_exit_code",
                 "last_run_success"):
        if prefix + need not in samples:
            problems.append("missing %s%s" % (prefix, need))

    def one(name):
        s = samples.get(prefix + name)
        return s[0].value if s else None

    if "exit" in want and one("last_run_exit_code") != float(want["exit"]):
        problems.append("last_run_exit_code %s, want %s" % (one("last_run_exit_code"), want["exit"]))
    if "success" in want and one("last_run_success") != float(want["success"]):
        problems.append("last_run_success %s, want %s" % (one("last_run_success"), want["success"]))
    ls = one("last_success_timestamp_seconds")
    w = want.get("last_success")
    if w == "absent" and ls is not None:
        problems.append("last_success_timestamp_seconds %s, want none" % ls)
    elif w == "present" and ls is None:
        problems.append("last_success_timestamp_seconds missing")
    elif w not in (None, "absent", "present") and (ls is None or repr(ls) != repr(float(w))):
        problems.append("last_success_timestamp_seconds %r, want %r (kept at full precision)" % (ls, float(w)))
    if verbose:
        print(json.dumps({n: [[s.labels, s.value] for s in v] for n, v in samples.items()}))
    for p in problems:
        print("FAIL %s: %s" % (path, p))
    if not problems and not verbose:
        print("ok   %s: %d families" % (path, len(fams)))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
