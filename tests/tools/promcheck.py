#!/usr/bin/env python3
"""Validate a jfsops --metrics-file with prometheus_client's text parser.

usage: promcheck.py COMMAND FILE

Checks: the file parses as Prometheus text format; every family has HELP and
TYPE; every name follows the jfsops scheme jfsops_<COMMAND>_...; counters'
samples end in _total; jfsops_<COMMAND>_duration_seconds and
jfsops_<COMMAND>_last_success_timestamp_seconds (or, for a failed run,
jfsops_<COMMAND>_last_run_timestamp_seconds) are present; values are finite.
Prints the problems; exit 1 if any.
"""
import math
import re
import sys

from prometheus_client.parser import text_string_to_metric_families


def main():
    cmd, path = sys.argv[1], sys.argv[2]
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
    names = set()
    for fam in fams:
        for s in fam.samples:
            names.add(s.name)
            if not s.name.startswith(prefix):
                problems.append("%s does not follow jfsops_%s_<thing>" % (s.name, cmd))
            if fam.type == "counter" and not s.name.endswith(("_total", "_created")):
                problems.append("counter sample %s does not end in _total" % s.name)
            if not math.isfinite(s.value):
                problems.append("%s has a non-finite value" % s.name)
        exposed = fam.name + ("_total" if fam.type == "counter" and fam.name + "_total" in names else "")
        if fam.name not in helps and exposed not in helps:
            problems.append("%s has no # HELP" % fam.name)
        if fam.name not in types and exposed not in types:
            problems.append("%s has no # TYPE" % fam.name)
    for need in ("duration_seconds",):
        if prefix + need not in names:
            problems.append("missing %s%s" % (prefix, need))
    if prefix + "last_success_timestamp_seconds" not in names and \
            prefix + "last_run_timestamp_seconds" not in names:
        problems.append("missing %slast_success_timestamp_seconds" % prefix)
    for p in problems:
        print("FAIL %s: %s" % (path, p))
    if not problems:
        print("ok   %s: %d families" % (path, len(fams)))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
