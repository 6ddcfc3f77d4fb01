#!/usr/bin/env python3
"""The exit codes' copies, generated from their one source, common/exit.h.

usage: exit_codes.py REPO [--write] [--bin JFSOPS]

common/exit.h lists every code once, X(NAME, CODE, "brief", "full"), in
JO_EXIT_CODES (an entry may span lines, a text be split into adjacent
literals). From it:
  - every markdown file under REPO (README.md, docs/, bench/, ...) that holds
    the markers <!-- exit-codes: begin --> ... <!-- exit-codes: end --> gets
    the table of codes and full texts between them (--write rewrites them;
    without it a block that differs is an error);
  - no markdown file holds the list of exit codes outside such a block
    (rows "| 10 |", "| 11 |", "| 12 |" in a row, or "0 ok, 1 found ..." in
    prose: a hand-written copy; a command's own table, as doctor's, lists
    only its codes);
  - with --bin, `jfsops --help` lists every code with its brief text, in
    order (the man page jfsops(1) is generated from that text).
Exit 0 when every copy matches, 1 otherwise (one line per difference).
"""
import os
import re
import subprocess
import sys

BEGIN = "<!-- exit-codes: begin -->"
END = "<!-- exit-codes: end -->"
NOTE = "<!-- generated from common/exit.h by tests/tools/exit_codes.py: do not edit -->"
C_STR = r'"(?:[^"\\]|\\.)*"'
STRS = r"((?:" + C_STR + r"\s*)+)"
ENTRY = re.compile(r"X\(\s*(JO_EXIT_\w+)\s*,\s*(\d+)\s*,\s*" + STRS + r",\s*" + STRS + r"\)")
SKIP_DIRS = {".git", ".venv", "build", "build-asan", "node_modules", "demo"}


def c_strings(lits):
    """the text of adjacent C string literals"""
    return "".join(re.sub(r"\\(.)", lambda m: {"n": "\n", "t": "\t"}.get(m.group(1), m.group(1)), lit[1:-1])
                   for lit in re.findall(C_STR, lits))


def codes(repo):
    text = open(os.path.join(repo, "common", "exit.h"), encoding="utf-8").read()
    m = re.search(r"#define JO_EXIT_CODES\(X\)((?:.*\\\n)*.*\n)", text)
    if not m:
        sys.exit("exit_codes: common/exit.h has no JO_EXIT_CODES(X) list")
    body = m.group(1).replace("\\\n", " ")
    out = [(n, int(c), c_strings(b), c_strings(f)) for n, c, b, f in ENTRY.findall(body)]
    if len(out) != body.count("X("):
        sys.exit("exit_codes: an entry of JO_EXIT_CODES is not X(NAME, CODE, \"brief\", \"full\")")
    nums = [c for _, c, _, _ in out]
    if nums != sorted(set(nums)):
        sys.exit("exit_codes: JO_EXIT_CODES is not in increasing order of unique codes")
    return out


def table(entries):
    rows = ["| code | meaning |", "|---|---|"]
    for _, code, _, full in entries:
        rows.append("| %d | %s |" % (code, full.replace("|", "\\|")))
    return "\n".join([BEGIN, NOTE] + rows + [END])


def markdown_files(repo):
    for root, dirs, files in os.walk(repo):
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS)
        for f in sorted(files):
            if f.endswith(".md"):
                yield os.path.join(root, f)


def check_docs(repo, entries, write):
    want = table(entries)
    bad = []
    blocks = 0
    for path in markdown_files(repo):
        rel = os.path.relpath(path, repo)
        text = open(path, encoding="utf-8").read()
        pat = re.compile(re.escape(BEGIN) + r".*?" + re.escape(END), re.S)
        found = pat.findall(text)
        blocks += len(found)
        if found and any(b != want for b in found):
            if write:
                open(path, "w", encoding="utf-8").write(pat.sub(lambda _: want, text))
                print("exit_codes: wrote %s" % rel)
            else:
                bad.append("%s: the exit-code table differs from common/exit.h "
                           "(run tests/tools/exit_codes.py REPO --write)" % rel)
        # a hand-written copy of the whole list outside a block: rows for
        # 10, 11 and 12 (a command's own table, as doctor's, lists fewer), or
        # the list in prose ("0 ok, 1 found ...")
        rest = pat.sub("", text)
        if (re.search(r"^\|\s*10\s*\|.*\n\|\s*11\s*\|.*\n\|\s*12\s*\|", rest, re.M)
                or re.search(r"\b0 ok,\s+1 found", rest)):
            bad.append("%s: a table of exit codes outside an exit-codes block "
                       "(generate it from common/exit.h instead)" % rel)
    if blocks == 0:
        bad.append("no markdown file holds an exit-codes block (docs/exit-codes.md should)")
    return bad


def check_help(binary, entries):
    out = subprocess.run([binary, "--help"], capture_output=True, text=True).stdout
    if "\nExit codes:\n" not in out:
        return ["jfsops --help: no \"Exit codes:\" section"]
    lines = out.split("\nExit codes:\n", 1)[1].splitlines()
    want = ["  %3d  %s" % (code, brief) for _, code, brief, _ in entries]
    got = lines[:len(want)]
    if got != want:
        return ["jfsops --help: exit codes differ from common/exit.h:\n  got  %r\n  want %r" % (got, want)]
    return []


def main():
    args = sys.argv[1:]
    if not args or args[0].startswith("-"):
        sys.exit(__doc__)
    repo = args.pop(0)
    write = "--write" in args
    binary = args[args.index("--bin") + 1] if "--bin" in args else None
    entries = codes(repo)
    bad = check_docs(repo, entries, write)
    if binary:
        bad += check_help(binary, entries)
    for b in bad:
        print("exit_codes: " + b)
    if bad:
        sys.exit(1)
    print("exit_codes: %d codes, every copy matches common/exit.h" % len(entries))


if __name__ == "__main__":
    main()
