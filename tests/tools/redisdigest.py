#!/usr/bin/env python3
"""sha256 over every key, type and value of one Redis DB (for "nothing written"
checks; a Cluster volume's {DB} keys only). usage: redisdigest.py META-URL
(redis://, rediss://, Sentinel or Cluster, as juicefs spells them)"""
import hashlib
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from dumpcount import redis_volume  # noqa: E402


def main(url):
    r, pre = redis_volume(url)
    keys, cur = [], b"0"
    while True:
        cur, ks = r.cmd("SCAN", cur, "MATCH", pre.replace("{", "\\{") + "*", "COUNT", "1000")
        keys += ks
        if cur == b"0":
            break
    h = hashlib.sha256()
    for k in sorted(set(keys)):
        t = r.cmd("TYPE", k)
        if t == b"string":
            v = [r.cmd("GET", k)]
        elif t == b"hash":
            v = r.cmd("HGETALL", k)
            v = sorted(zip(v[0::2], v[1::2]))
            v = [a + b"=" + b for a, b in v]
        elif t == b"list":
            v = r.cmd("LRANGE", k, "0", "-1")
        elif t == b"set":
            v = sorted(r.cmd("SMEMBERS", k))
        elif t == b"zset":
            v = r.cmd("ZRANGE", k, "0", "-1", "WITHSCORES")
        else:
            v = [t]
        h.update(k + b"\0" + t + b"\0" + b"\0".join(x or b"" for x in v) + b"\n")
    print(h.hexdigest())


if __name__ == "__main__":
    main(sys.argv[1])
