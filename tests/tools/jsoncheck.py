#!/usr/bin/env python3
"""Validate jfsops JSON lines against docs/json/*.schema.json.

usage: jsoncheck.py [--exit N] [--command C] FILE...
       jsoncheck.py --outputs FILE...

Every line of type "summary" is checked against summary.schema.json, every
leakcheck candidate line (type leaked, missing, skipped, foreign) against
leakcheck-candidate.schema.json; other lines (progress events, plan lines)
are left alone. With --exit N the last summary's "exit" must be N (the
process's exit code); with --command C its "command" must be C. Each file
must end in a summary. Prints one line per problem; exit 1 if any.

--outputs: the files are whatever a test script kept (captured stdout, logs,
reports); those that hold a jfsops summary line are a run's --json output,
and every summary and candidate line in them is checked (other lines, not
JSON or of other types, are left alone); the rest are skipped.
"""
import json
import os
import sys

import jsonschema

HERE = os.path.dirname(os.path.abspath(__file__))
SCHEMAS = os.path.join(HERE, "..", "..", "docs", "json")


def load(name):
    with open(os.path.join(SCHEMAS, name)) as f:
        s = json.load(f)
    jsonschema.Draft202012Validator.check_schema(s)
    return jsonschema.Draft202012Validator(s)


CANDIDATE_TYPES = ("leaked", "missing", "skipped", "foreign")


def check_record(summary, cand, path, i, rec):
    """Check one record against its schema; None if its type has none, else the problem count."""
    t = rec.get("type")
    v = summary if t == "summary" else cand if t in CANDIDATE_TYPES else None
    if v is None:
        return None
    problems = 0
    for e in v.iter_errors(rec):
        print("FAIL %s:%d: %s at %s" % (path, i, e.message, "/".join(map(str, e.absolute_path)) or "."))
        problems += 1
    return problems


def outputs(paths):
    """--outputs: check the --json output among the files a script kept."""
    summary = load("summary.schema.json")
    cand = load("leakcheck-candidate.schema.json")
    problems = files = lines = 0
    for path in paths:
        recs = []
        try:
            with open(path, "rb") as f:
                data = f.read()
        except OSError:
            continue
        if b'"type":"summary"' not in data:
            continue
        for i, raw in enumerate(data.decode("utf-8", "replace").splitlines(), 1):
            if not raw.startswith("{"):
                continue
            try:
                rec = json.loads(raw)
            except ValueError:
                continue
            if isinstance(rec, dict):
                recs.append((i, rec))
        if not any(r.get("type") == "summary" and "version" in r and "command" in r for _, r in recs):
            continue
        files += 1
        for i, rec in recs:
            bad = check_record(summary, cand, path, i, rec)
            if bad is None:
                continue
            lines += 1
            problems += bad
    if not problems:
        print("ok   %d output file(s), %d records valid" % (files, lines))
    return 1 if problems else 0


def main(argv):
    if argv[:1] == ["--outputs"]:
        return outputs(argv[1:])
    want_exit = want_cmd = None
    files = []
    it = iter(argv)
    for a in it:
        if a == "--exit":
            want_exit = int(next(it))
        elif a == "--command":
            want_cmd = next(it)
        else:
            files.append(a)
    summary = load("summary.schema.json")
    cand = load("leakcheck-candidate.schema.json")
    problems = 0
    for path in files:
        last = None
        n = 0
        for i, line in enumerate(open(path, encoding="utf-8"), 1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except ValueError as e:
                print("FAIL %s:%d: not JSON: %s" % (path, i, e))
                problems += 1
                continue
            if not isinstance(rec, dict):
                continue
            bad = check_record(summary, cand, path, i, rec)
            if bad is None:
                continue
            n += 1
            problems += bad
            if rec.get("type") == "summary":
                last = rec
        if last is None:
            print("FAIL %s: no summary line" % path)
            problems += 1
            continue
        if want_exit is not None and last.get("exit") != want_exit:
            print("FAIL %s: summary says exit %s, the process exited %d" % (path, last.get("exit"), want_exit))
            problems += 1
        if want_cmd is not None and last.get("command") != want_cmd:
            print("FAIL %s: summary of command %s, want %s" % (path, last.get("command"), want_cmd))
            problems += 1
        if not problems:
            print("ok   %s: %d records valid" % (path, n))
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
