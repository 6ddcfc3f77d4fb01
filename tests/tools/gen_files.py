#!/usr/bin/env python3
"""Write test files for the jfsops test bed.

usage: gen_files.py plain   DIR SEED COUNT MAXSIZE BLOCKSIZE [heavy]
       gen_files.py rewrite DIR SEED BLOCKSIZE
  plain:   COUNT files of random sizes 0..MAXSIZE under DIR (a few subdirs),
           plus exact multiples of BLOCKSIZE (and of the 64 MiB chunk with
           'heavy'), half random bytes, half compressible text.
  rewrite: (run on a JuiceFS mount) files rewritten at random offsets with
           os.pwrite + fsync between writes so chunks hold many overlapping
           slices, a truncated file, a sparse file with holes, a file grown
           by appends, an overwrite crossing a chunk boundary (heavy only).
       gen_files.py pending DIR SEED NCHUNKS
  pending: two files to be removed and left pending (see pending()).
Prints the relative paths it wrote, one a line.
"""
import os
import random
import sys

CHUNK = 64 << 20


def payload(rng, n, compressible):
    if n == 0:
        return b""
    if compressible:
        words = [b"juicefs", b"slice", b"chunk", b"block", b"jfsops", b"\n", b" ", b"0123456789"]
        seed = b"".join(rng.choice(words) for _ in range(512))
        return (seed * (n // len(seed) + 1))[:n]
    return rng.randbytes(n)


def write_file(path, rng, n, compressible):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        left = n
        while left > 0:
            k = min(left, 8 << 20)
            f.write(payload(rng, k, compressible))
            left -= k


def plain(d, seed, count, maxsize, bs, heavy):
    rng = random.Random(seed)
    out = []
    sizes = [0, 1, 4095, 4096, 4097, bs - 1, bs, bs + 1, 2 * bs, 3 * bs + 17]
    if heavy:
        sizes += [CHUNK, CHUNK + 1, CHUNK - 1, 2 * CHUNK, 2 * CHUNK + bs, 3 * CHUNK + 5]
    sizes = [s for s in sizes if s <= max(maxsize, 4 * bs) or heavy]
    while len(sizes) < count:
        r = rng.random()
        if r < 0.3:
            sizes.append(rng.randint(0, 64 << 10))
        elif r < 0.4:
            sizes.append(bs * rng.randint(1, max(1, maxsize // bs)))
        else:
            sizes.append(rng.randint(0, maxsize))
    for i, n in enumerate(sizes):
        rel = "d%d/f%03d_%d.bin" % (i % 5, i, n)
        write_file(os.path.join(d, rel), rng, n, i % 2 == 1)
        out.append(rel)
    return out


def rewrite(d, seed, bs, heavy):
    rng = random.Random(seed)
    out = []
    os.makedirs(os.path.join(d, "rw"), exist_ok=True)
    # many overlapping writes into a few files
    for i in range(4):
        rel = "rw/over%d.bin" % i
        size = rng.randint(bs, 3 * bs + 12345)
        p = os.path.join(d, rel)
        fd = os.open(p, os.O_CREAT | os.O_RDWR | os.O_TRUNC, 0o644)
        try:
            os.write(fd, payload(rng, size, i % 2 == 0))
            os.fsync(fd)
            for _ in range(20 + 5 * i):
                off = rng.randint(0, size + bs // 2)
                ln = rng.randint(1, max(1, bs // 3))
                os.pwrite(fd, payload(rng, ln, rng.random() < 0.5), off)
                os.fsync(fd)
        finally:
            os.close(fd)
        out.append(rel)
    # writes across a block boundary, repeated at the same place
    rel = "rw/boundary.bin"
    fd = os.open(os.path.join(d, rel), os.O_CREAT | os.O_RDWR | os.O_TRUNC, 0o644)
    try:
        os.write(fd, payload(rng, 2 * bs, False))
        os.fsync(fd)
        for k in range(10):
            os.pwrite(fd, payload(rng, 100 + k, False), bs - 50)
            os.fsync(fd)
    finally:
        os.close(fd)
    out.append(rel)
    # truncated file: written, cut, grown again by truncate (a hole at the end)
    rel = "rw/truncated.bin"
    p = os.path.join(d, rel)
    with open(p, "wb") as f:
        f.write(payload(rng, 2 * bs + 999, False))
        f.flush()
        os.fsync(f.fileno())
    os.truncate(p, bs // 2 + 7)
    os.truncate(p, bs + 333)
    with open(p, "r+b") as f:
        f.seek(bs // 4)
        f.write(b"after-truncate")
    out.append(rel)
    # cut to a smaller size only
    rel = "rw/cut.bin"
    p = os.path.join(d, rel)
    with open(p, "wb") as f:
        f.write(payload(rng, 3 * bs, True))
    os.truncate(p, bs + 1)
    out.append(rel)
    # sparse file with holes
    rel = "rw/sparse.bin"
    fd = os.open(os.path.join(d, rel), os.O_CREAT | os.O_RDWR | os.O_TRUNC, 0o644)
    try:
        os.pwrite(fd, b"start", 0)
        os.pwrite(fd, payload(rng, 1000, False), 3 * bs + 10)
        os.pwrite(fd, b"mid", 5 * bs)
        end = (CHUNK + 4 * bs) if heavy else 9 * bs
        os.ftruncate(fd, end)
        os.fsync(fd)
    finally:
        os.close(fd)
    out.append(rel)
    # appends with fsync (one slice each)
    rel = "rw/appended.bin"
    with open(os.path.join(d, rel), "ab") as f:
        for _ in range(15):
            f.write(payload(rng, rng.randint(1, bs // 2), False))
            f.flush()
            os.fsync(f.fileno())
    out.append(rel)
    if heavy:
        # an overwrite straddling the chunk boundary
        rel = "rw/chunkcross.bin"
        fd = os.open(os.path.join(d, rel), os.O_CREAT | os.O_RDWR | os.O_TRUNC, 0o644)
        try:
            os.ftruncate(fd, CHUNK + 3 * bs)
            for k in range(5):
                os.pwrite(fd, payload(rng, 2 * bs, False), CHUNK - bs + k * 1000)
                os.fsync(fd)
        finally:
            os.close(fd)
        out.append(rel)
    return out


def pending(d, seed, nchunks):
    """Two files meant to be removed and left as pending (not yet cleaned):
    one with data in NCHUNKS chunks (slow to clean in SQL engines), one
    sparse file of 32 PiB (slow to clean in Redis, which walks the length)."""
    rng = random.Random(seed)
    os.makedirs(d, exist_ok=True)
    fd = os.open(os.path.join(d, "many.bin"), os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o644)
    try:
        for j in range(nchunks):
            os.pwrite(fd, payload(rng, 1 + j % 7, False), j * CHUNK + (j % 3) * 4096)
    finally:
        os.close(fd)
    fd = os.open(os.path.join(d, "huge.bin"), os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o644)
    try:
        os.pwrite(fd, payload(rng, 5000, False), 0)
        os.pwrite(fd, payload(rng, 5000, False), 3 * CHUNK - 100)
        os.ftruncate(fd, 32 << 50)
    finally:
        os.close(fd)
    return ["many.bin", "huge.bin"]


def main(a):
    if len(a) < 2:
        sys.exit(__doc__)
    if a[0] == "plain" and len(a) >= 6:
        files = plain(a[1], int(a[2]), int(a[3]), int(a[4]), int(a[5]), len(a) > 6 and a[6] == "heavy")
    elif a[0] == "rewrite" and len(a) >= 4:
        files = rewrite(a[1], int(a[2]), int(a[3]), len(a) > 4 and a[4] == "heavy")
    elif a[0] == "pending" and len(a) >= 4:
        files = pending(a[1], int(a[2]), int(a[3]))
    else:
        sys.exit(__doc__)
    for f in files:
        print(f)


if __name__ == "__main__":
    main(sys.argv[1:])
