#!/usr/bin/env python3
"""sha256 over every key, type and value of one Redis DB (for "nothing written"
checks). usage: redisdigest.py redis://[user:pass@]host:port/db"""
import hashlib
import os
import sys
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from dumpcount import Resp  # noqa: E402


def main(url):
    u = urllib.parse.urlsplit(url)
    db = int((u.path or "/0").strip("/") or 0)
    r = Resp(u.hostname, u.port or 6379, db,
             urllib.parse.unquote(u.password) if u.password else None,
             urllib.parse.unquote(u.username) if u.username else None)
    keys, cur = [], b"0"
    while True:
        cur, ks = r.cmd("SCAN", cur, "COUNT", "1000")
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
