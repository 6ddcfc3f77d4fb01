#!/usr/bin/env python3
"""Helpers for leakcheck_restore_safe.sh (independent of jfsops).

  key NAME HASH_PREFIX(0|1) ID INDX BSIZE   a block key as JuiceFS writes it
  tar OUT.tar.zst ENTRY...                   a quarantine-like archive (pax tar,
                                             then zstd), entries in this order:
        file:KEY:PATH          a regular file KEY holding PATH's bytes
        symlink:KEY:TARGET     a symbolic link KEY -> TARGET
        hardlink:KEY:TARGET    a hard link KEY -> TARGET (an earlier entry)
      KEY is taken as given: "../x", "/abs/x", another volume's name...
"""
import io
import os
import subprocess
import sys
import tarfile

sys.dont_write_bytecode = True  # no __pycache__ beside the sources
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from leakcheck_tool import block_key  # noqa: E402


def make_tar(out, entries):
    raw = out + ".tar"
    with tarfile.open(raw, "w", format=tarfile.PAX_FORMAT) as tf:
        for e in entries:
            kind, key, arg = e.split(":", 2)
            ti = tarfile.TarInfo(key)  # addfile() keeps the name as it is
            ti.mtime = 1700000000
            ti.mode = 0o644
            if kind == "file":
                data = open(arg, "rb").read()
                ti.size = len(data)
                tf.addfile(ti, io.BytesIO(data))
            elif kind == "symlink":
                ti.type = tarfile.SYMTYPE
                ti.linkname = arg
                tf.addfile(ti)
            elif kind == "hardlink":
                ti.type = tarfile.LNKTYPE
                ti.linkname = arg
                tf.addfile(ti)
            else:
                sys.exit("restore_tool: unknown entry kind %r" % kind)
    subprocess.run(["zstd", "-q", "-f", "--rm", raw, "-o", out], check=True)


def main(a):
    if len(a) >= 6 and a[0] == "key":
        print(block_key(a[1], a[2] == "1", int(a[3]), int(a[4]), int(a[5])))
    elif len(a) >= 2 and a[0] == "tar":
        make_tar(a[1], a[2:])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:])
