#!/usr/bin/env python3
"""Every relative link of the repository's markdown files resolves.

usage: doclinks.py REPO

For each [text](target) in a *.md file (build trees, .git and .venv apart)
whose target is not a URL: the file or directory exists, and a #fragment
names a heading of the markdown file it points at (GitHub's anchors:
lower case, punctuation dropped, blanks to '-'). Exit 1 on a broken link.
"""
import os
import re
import sys

SKIP_DIRS = {".git", ".venv", "build", "build-asan", "node_modules", "demo"}
LINK = re.compile(r"\]\(([^)\s]+)\)")


def anchors(path):
    out = set()
    fence = False
    for line in open(path, encoding="utf-8"):
        if line.startswith("```"):
            fence = not fence
        m = None if fence else re.match(r"^#+\s+(.*)", line)
        if m:
            out.add(re.sub(r"[^\w\- ]", "", m.group(1).strip().lower()).replace(" ", "-"))
    return out


def main():
    repo = sys.argv[1]
    bad = 0
    for root, dirs, files in os.walk(repo):
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS)
        for f in sorted(files):
            if not f.endswith(".md"):
                continue
            src = os.path.join(root, f)
            for target in LINK.findall(open(src, encoding="utf-8").read()):
                if re.match(r"[a-z][a-z0-9+.-]*:", target):
                    continue
                path, _, frag = target.partition("#")
                dst = os.path.normpath(os.path.join(root, path)) if path else src
                rel = os.path.relpath(src, repo)
                if not os.path.exists(dst):
                    print("doclinks: %s: %s does not exist" % (rel, target))
                    bad += 1
                elif frag and dst.endswith(".md") and frag not in anchors(dst):
                    print("doclinks: %s: %s names no heading of %s" % (rel, target, os.path.relpath(dst, repo)))
                    bad += 1
    if bad:
        return 1
    print("doclinks: every relative link resolves")
    return 0


if __name__ == "__main__":
    sys.exit(main())
