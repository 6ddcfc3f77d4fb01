#!/usr/bin/env python3
"""Write a fragmented file through a JuiceFS mount and a byte-identical local
mirror: one initial write, then many small overwrites at random offsets, each
fsync'ed so the client commits a slice for each (chunks get one record per
write), a shrinking truncate, and a write past EOF that leaves a hole.

usage: fragment.py MOUNTED_FILE MIRROR_FILE SEED NWRITES SIZE [--append-loop SECONDS]
With --append-loop, keeps appending/overwriting both files for SECONDS
(a live writer racing a compaction) instead of the fixed pattern.
"""
import os
import random
import sys
import time


def both(fds, fn):
    for fd in fds:
        fn(fd)


def main():
    path, mirror, seed, nwrites, size = sys.argv[1:6]
    rnd = random.Random(int(seed))
    nwrites, size = int(nwrites), int(size)
    fds = [os.open(path, os.O_CREAT | os.O_RDWR, 0o644),
           os.open(mirror, os.O_CREAT | os.O_RDWR, 0o644)]
    if len(sys.argv) > 7 and sys.argv[6] == "--append-loop":
        end = time.time() + float(sys.argv[7])
        while time.time() < end:
            length = os.fstat(fds[1]).st_size
            if rnd.random() < 0.5 or length == 0:
                data = rnd.randbytes(rnd.randrange(1, 64 * 1024))
                both(fds, lambda fd: os.pwrite(fd, data, length))
            else:
                off = rnd.randrange(0, length)
                data = rnd.randbytes(rnd.randrange(1, 128 * 1024))
                both(fds, lambda fd: os.pwrite(fd, data, off))
            os.fsync(fds[0])
            time.sleep(0.01)
    else:
        data = rnd.randbytes(size)
        both(fds, lambda fd: os.pwrite(fd, data, 0))
        os.fsync(fds[0])
        for _ in range(nwrites):
            off = rnd.randrange(0, size)
            data = rnd.randbytes(rnd.randrange(1, max(2, size // 16)))
            both(fds, lambda fd: os.pwrite(fd, data, off))
            os.fsync(fds[0])
        cut = size - size // 5
        both(fds, lambda fd: os.ftruncate(fd, cut))
        os.fsync(fds[0])
        tail = rnd.randbytes(4096)
        both(fds, lambda fd: os.pwrite(fd, tail, cut + 1024 * 1024))
        os.fsync(fds[0])
    for fd in fds:
        os.close(fd)


if __name__ == "__main__":
    main()
