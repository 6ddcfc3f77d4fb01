#!/usr/bin/env python3
"""Read byte ranges through a JuiceFS mount with O_DIRECT and check them.

usage: warmup_read.py MOUNT LOCALDIR RANGES

RANGES has lines "PATH OFFSET LENGTH". Each range is read on its own
descriptor opened with O_DIRECT (no page cache, no kernel readahead, the exact
bytes asked for) and compared with LOCALDIR/PATH. Exit 1 on any difference.
"""
import mmap
import os
import sys


def main():
    mp, local, ranges = sys.argv[1], sys.argv[2], sys.argv[3]
    bad = 0
    for line in open(ranges):
        if not line.strip():
            continue
        path, off, ln = line.rsplit(None, 2)
        off, ln = int(off), int(ln)
        want = open(os.path.join(local, path), "rb")
        want.seek(off)
        want = want.read(ln)
        fd = os.open(os.path.join(mp, path), os.O_RDONLY | os.O_DIRECT)
        got = b""
        try:
            while len(got) < len(want):
                n = min(len(want) - len(got), 128 << 10)
                buf = mmap.mmap(-1, max(n, mmap.PAGESIZE))  # page-aligned
                r = os.preadv(fd, [memoryview(buf)[:n]], off + len(got))
                if r <= 0:
                    break
                got += buf[:r]
                buf.close()
        finally:
            os.close(fd)
        if got != want:
            print("MISMATCH %s %d %d (got %d bytes)" % (path, off, ln, len(got)), file=sys.stderr)
            bad += 1
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
