#!/usr/bin/env python3
"""Write a `juicefs dump` JSON of a synthetic volume for `juicefs load`.

usage: usage_gen.py TEMPLATE.json FILES OUT.json

TEMPLATE is a dump of a freshly formatted volume (its Setting is reused).
The tree: /t0../t9, each with FILES/10000 directories d0..dN of up to 1000
files f0..f999 (one 1-64 KiB slice each, ages spread over two years), and
every 97th file hard-linked once more under /links.
"""
import json
import random
import sys


def main():
    tpl, nfiles, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    t = json.load(open(tpl))
    rnd = random.Random(42)
    now = int(t["FSTree"]["attr"]["mtime"])
    ino, chunk = [1], [0]

    def attr(typ, mode, length, age=0, nlink=1):
        ino[0] += 1
        ts = now - age
        return {"inode": ino[0], "type": typ, "mode": mode, "uid": 1000, "gid": 1000,
                "atime": ts, "mtime": ts, "ctime": ts, "nlink": nlink, "length": length}

    with open(out, "w") as f:
        w = f.write
        w('{\n"Setting": %s,\n' % json.dumps(t["Setting"]))
        counters_pos = f.tell()
        w(" " * 400 + "\n")
        w('"Sustained": [],\n"DelFiles": [],\n"FSTree": {\n"attr": %s,\n"entries": {\n'
          % json.dumps({**t["FSTree"]["attr"], "nlink": 13}))
        per_top = max(1, nfiles // 10)
        links = []
        first_top = True
        for top in range(10):
            w(('' if first_top else ',\n') + '"t%d": {"attr": %s, "entries": {\n'
              % (top, json.dumps(attr("directory", 0o755, 0, nlink=2 + (per_top + 999) // 1000))))
            first_top = False
            done, d = 0, 0
            while done < per_top:
                n = min(1000, per_top - done)
                w(('' if d == 0 else ',\n') + '"d%d": {"attr": %s, "entries": {\n'
                  % (d, json.dumps(attr("directory", 0o755, 0, nlink=2))))
                for i in range(n):
                    size = rnd.randint(1024, 65536)
                    chunk[0] += 1
                    linked = (done + i) % 97 == 0
                    a = attr("regular", 0o644, size, rnd.randint(0, 730 * 86400), 2 if linked else 1)
                    node = {"attr": a, "chunks": [{"index": 0, "slices": [
                        {"id": chunk[0], "size": size, "len": size}]}]}
                    if linked:
                        links.append(node)
                    w(('' if i == 0 else ',\n') + '"f%d": %s' % (i, json.dumps(node)))
                w('\n}}')
                done += n
                d += 1
            w('\n}}')
        w(',\n"links": {"attr": %s, "entries": {\n' % json.dumps(attr("directory", 0o755, 0)))
        for k, node in enumerate(links):
            w(('' if k == 0 else ',\n') + '"l%d": %s' % (k, json.dumps(node)))
        w('\n}}\n}\n},\n"Trash": {"attr": %s}\n}\n' % json.dumps(t["Trash"]["attr"])
          if "Trash" in t else '\n}\n}\n}\n')
        counters = dict(t["Counters"])
        counters["nextInodes"] = ino[0] + 1
        counters["nextChunk"] = chunk[0] + 1
        counters["usedInodes"] = ino[0]
        f.seek(counters_pos)
        f.write('"Counters": %s,' % json.dumps(counters))
    print("%d inodes, %d slices" % (ino[0], chunk[0]))


if __name__ == "__main__":
    main()
