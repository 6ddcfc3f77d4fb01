#!/usr/bin/env python3
"""Every file jfsops writes goes through common/file (ctest test_file_sites).

usage: filesites.py REPO

Scans the C sources jfsops is built from (cmd/, common/, gc/, leakcheck/,
sync/, lanceparse/; comments removed) and prints one line per call that
could create, truncate or append to a file by name outside common/file.c:

  - fopen/freopen with a mode that writes ("w", "a", "+"), or a mode that is
    not a string literal;
  - creat, mktemp, tmpnam, tempnam;
  - open/openat/open64 with O_CREAT but without both O_EXCL and O_NOFOLLOW;
  - rename() by path (renameat inside a directory descriptor is allowed);
  - libarchive's archive_write_open_filename, jansson's json_dump_file;
  - sqlite3_open (always creates), and SQLITE_OPEN_CREATE in a file that does
    not also check the file with jo_file_prepare and open it with
    SQLITE_OPEN_NOFOLLOW.

Reading (fopen "r", open O_RDONLY) is not in scope. A self-test feeds each
rule a line it must catch and one it must pass before the sources are read.
Exit 1 on any finding.
"""
import os
import re
import sys

DIRS = ("cmd", "common", "gc", "leakcheck", "sync", "lanceparse")
HELPER = os.path.join("common", "file.c")

CALL = re.compile(r"\b(fopen|freopen|creat|mktemp|tmpnam|tempnam|open|openat|open64|rename|"
                  r"archive_write_open_filename|json_dump_file|sqlite3_open)\s*\(")


def strip_comments(src):
    """The source with comments blanked (newlines kept), strings left alone."""
    out, i, n = [], 0, len(src)
    while i < n:
        c = src[i]
        if src.startswith("/*", i):
            j = src.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", src[i:j]))
            i = j
        elif src.startswith("//", i):
            j = src.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif c in "\"'":
            j = i + 1
            while j < n and src[j] != c:
                j += 2 if src[j] == "\\" else 1
            out.append(src[i:j + 1])
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def blank_strings(src):
    """src with the inside of every string and char literal blanked (same length)."""
    return re.sub(r'"(?:[^"\\\n]|\\.)*"|\'(?:[^\'\\\n]|\\.)*\'',
                  lambda m: m.group(0)[0] + " " * (len(m.group(0)) - 2) + m.group(0)[-1], src)


def call_args(src, start):
    """The text between the parenthesis at start and its match."""
    depth, i = 0, start
    while i < len(src):
        if src[i] == "(":
            depth += 1
        elif src[i] == ")":
            depth -= 1
            if depth == 0:
                return src[start + 1:i]
        elif src[i] in "\"'":
            q, i = src[i], i + 1
            while i < len(src) and src[i] != q:
                i += 2 if src[i] == "\\" else 1
        i += 1
    return src[start + 1:]


def split_args(args):
    parts, depth, cur, i = [], 0, [], 0
    while i < len(args):
        c = args[i]
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        elif c == "," and depth == 0:
            parts.append("".join(cur).strip())
            cur = []
            i += 1
            continue
        elif c in "\"'":
            j = i + 1
            while j < len(args) and args[j] != c:
                j += 2 if args[j] == "\\" else 1
            cur.append(args[i:j + 1])
            i = j + 1
            continue
        cur.append(c)
        i += 1
    if cur:
        parts.append("".join(cur).strip())
    return parts


def findings(src):
    """(line, message) for each call that may write a file by name."""
    text = strip_comments(src)
    code = blank_strings(text)  # calls are found here; literals are read from text
    out = []
    for m in CALL.finditer(code):
        name = m.group(1)
        # a member or a declaration (m->ops->open(...)) is not the libc call; a
        # library's function is one however it is reached (la->archive_...)
        before = code[:m.start()].rstrip()
        libc = name not in ("archive_write_open_filename", "json_dump_file")
        if libc and (before.endswith(("->", ".")) or
                     re.search(r"\b(int|void|static)\s*\**$", before)):
            continue
        args = call_args(code, m.end() - 1)
        line = code.count("\n", 0, m.start()) + 1
        if name in ("fopen", "freopen"):
            a = split_args(text[m.end():m.end() + len(args)])
            mode = a[1] if len(a) > 1 else ""
            lit = re.fullmatch(r'"([^"]*)"', mode)
            if not lit:
                out.append((line, f"{name} with a mode that is not a literal ({mode})"))
            elif re.search(r"[wa+]", lit.group(1)):
                out.append((line, f"{name} \"{lit.group(1)}\" writes by name"))
        elif name in ("creat", "mktemp", "tmpnam", "tempnam"):
            out.append((line, f"{name}() makes a file by a guessable name"))
        elif name in ("open", "openat", "open64"):
            if "O_CREAT" in args and not ("O_EXCL" in args and "O_NOFOLLOW" in args):
                out.append((line, f"{name} with O_CREAT but not O_EXCL|O_NOFOLLOW"))
        elif name == "rename":
            out.append((line, "rename() by path"))
        elif name == "sqlite3_open":
            out.append((line, "sqlite3_open() creates the file and follows a symlink"))
        else:
            out.append((line, f"{name}() opens a file by name for writing"))
    if "SQLITE_OPEN_CREATE" in code and not (
            "jo_file_prepare" in code and "SQLITE_OPEN_NOFOLLOW" in code):
        line = code[:code.index("SQLITE_OPEN_CREATE")].count("\n") + 1
        out.append((line, "SQLITE_OPEN_CREATE without jo_file_prepare and SQLITE_OPEN_NOFOLLOW"))
    return out


SELF_TEST = [
    ('FILE *f = fopen(p, "w");', 1), ('FILE *f = fopen(p, "a");', 1),
    ('FILE *f = fopen(p, "r+");', 1), ('FILE *f = fopen(p, mode);', 1),
    ('FILE *f = fopen(p, "r");', 0), ('FILE *f = fopen(p, "rb");', 0),
    ("fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);", 1),
    ("fd = open(p,\n O_WRONLY | O_CREAT | O_EXCL, 0600);", 1),
    ("fd = openat(d, n, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW, 0666);", 0),
    ("fd = open(p, O_RDONLY | O_CLOEXEC);", 0),
    ("/* open(p, O_CREAT) */ x = 1;", 0), ('puts("open(p, O_CREAT)");', 0),
    ("rc = m->ops->open(m, err);", 0), ("if (rename(a, b)) return 1;", 1),
    ("renameat(d, a, d, b);", 0), ("fd = creat(p, 0644);", 1),
    ("la->archive_write_open_filename(a, p);", 1), ("archive_write_open_filename(a, p);", 1),
    ("la->archive_write_open_fd(a, fd);", 0), ("X(archive_write_open_filename) \\", 0),
    ("json_dump_file(j, p, 0);", 1), ("sqlite3_open(p, &db);", 1),
    ("flags = SQLITE_OPEN_CREATE; sqlite3_open_v2(p, &db, flags, 0);", 1),
    ("jo_file_prepare(p, 0600, 0, 0, e); f = SQLITE_OPEN_CREATE | SQLITE_OPEN_NOFOLLOW;", 0),
]


def self_test():
    bad = 0
    for src, want in SELF_TEST:
        got = len(findings(src))
        if got != want:
            print(f"filesites self-test: {src!r}: {got} findings, expected {want}")
            bad += 1
    return bad


def main():
    if len(sys.argv) != 2:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    repo = sys.argv[1]
    if self_test():
        return 1
    n = files = 0
    for d in DIRS:
        for root, _, names in os.walk(os.path.join(repo, d)):
            for name in sorted(names):
                if not name.endswith((".c", ".h")):
                    continue
                path = os.path.join(root, name)
                rel = os.path.relpath(path, repo)
                if rel == HELPER:
                    continue
                files += 1
                with open(path, encoding="utf-8", errors="replace") as f:
                    for line, msg in findings(f.read()):
                        print(f"{rel}:{line}: {msg} (use common/file.h)")
                        n += 1
    if files == 0:
        print(f"filesites: no sources under {repo}")
        return 1
    if n:
        print(f"filesites: {n} place(s) write a file by name outside common/file.c")
        return 1
    print(f"filesites: {files} files, every write goes through common/file.c")
    return 0


if __name__ == "__main__":
    sys.exit(main())
