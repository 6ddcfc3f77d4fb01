#!/usr/bin/env python3
"""kvmeta.py: the test bed's direct access to a JuiceFS volume on etcd (the
tkv key layout, juicefs-engines.md B.2), through etcd's v3 JSON gateway, for
the few states a test must build or read that no client command gives (the
same commands as sqlmeta.py for the SQL engines):

    kvmeta.py age-delslices META SECONDS
    kvmeta.py age-trash META SECONDS
    kvmeta.py trash-entries META
    kvmeta.py digest META
    kvmeta.py gc-items META KIND   jfsops gc task items of KIND (f s d c t)
                                   recorded (keys "jfsops/gc/i/KIND:...")
    kvmeta.py keys META PREFIX     every key under PREFIX and its value (repr),
                                   one a line (e.g. "jfsops/trash/": the tasks)
    kvmeta.py pad META N      put N inert keys in the 'A' range (no JuiceFS kind)
    kvmeta.py unpad META      remove them

META is etcd://[user:pass@]host:port/NAME (the first endpoint is used).
Standard library only."""
import base64
import datetime as dt
import hashlib
import json
import struct
import sys
import urllib.parse
import urllib.request

TRASH = 0x7FFFFFFF10000000


class KV:
    def __init__(self, meta):
        u = urllib.parse.urlsplit(meta)
        if u.scheme != "etcd":
            raise SystemExit("kvmeta: not an etcd META-URL: %s" % meta)
        host = u.netloc.rsplit("@", 1)[-1].split(",")[0]
        if ":" not in host:
            host += ":2379"
        self.ep = "http://" + host
        self.pfx = u.path.encode() + b"\xfd"

    def call(self, path, body):
        req = urllib.request.Request(self.ep + path, data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=30) as r:
            return json.load(r)

    @staticmethod
    def b64(b):
        return base64.b64encode(b).decode()

    def scan(self, prefix):
        """Every (key, value) under the volume prefix + prefix, key without the volume prefix."""
        start = self.pfx + prefix
        end = bytearray(start)
        end[-1] += 1
        out, key, rev = [], start, 0
        while True:
            body = {"key": self.b64(key), "range_end": self.b64(bytes(end)), "limit": 1000}
            if rev:
                body["revision"] = rev
            r = self.call("/v3/kv/range", body)
            rev = rev or int(r["header"]["revision"])
            kvs = r.get("kvs", [])
            for kv in kvs:
                k = base64.b64decode(kv["key"])
                if out and k == self.pfx + out[-1][0]:
                    continue
                out.append((k[len(self.pfx):], base64.b64decode(kv.get("value", ""))))
            if not r.get("more"):
                return out
            key = base64.b64decode(kvs[-1]["key"])

    def txn(self, puts=(), dels=()):
        ops = [{"request_put": {"key": self.b64(self.pfx + k), "value": self.b64(v)}} for k, v in puts]
        ops += [{"request_delete_range": {"key": self.b64(self.pfx + k)}} for k in dels]
        for i in range(0, len(ops), 100):
            self.call("/v3/kv/txn", {"success": ops[i:i + 100]})


def le64(v):
    return struct.pack("<Q", v)


def age_delslices(kv, secs):
    puts, dels = [], []
    for k, v in kv.scan(b"L"):
        if len(k) != 17:
            continue
        ts, sid = struct.unpack(">QQ", k[1:])
        puts.append((b"L" + struct.pack(">QQ", ts - secs, sid), v))
        dels.append(k)
    kv.txn(dels=dels)
    kv.txn(puts=puts)


def trash_dirs(kv):
    return [(k[10:], struct.unpack(">Q", v[1:9])[0])
            for k, v in kv.scan(b"A" + le64(TRASH) + b"D")]


def trash_entries(kv):
    return sum(len(kv.scan(b"A" + le64(ino) + b"D")) for _, ino in trash_dirs(kv))


def age_trash(kv, secs):
    puts, dels = [], []
    for k, v in kv.scan(b"A" + le64(TRASH) + b"D"):
        name = k[10:].decode()
        t = dt.datetime.strptime(name, "%Y-%m-%d-%H") - dt.timedelta(seconds=secs)
        puts.append((k[:10] + t.strftime("%Y-%m-%d-%H").encode(), v))
        dels.append(k)
    kv.txn(dels=dels)
    kv.txn(puts=puts)


def digest(kv):
    h = hashlib.sha256()
    for k, v in kv.scan(b""):
        h.update(k + b"\0" + v + b"\n")
    return h.hexdigest()


PAD = b"A" + struct.pack("<Q", 1 << 62)[:7]


def pad(kv, n):
    filler = b"x" * 64
    for i in range(0, n, 100):
        kv.txn(puts=[(PAD + struct.pack(">I", j) + b"Z", filler) for j in range(i, min(n, i + 100))])


def unpad(kv):
    start = kv.pfx + PAD
    end = bytearray(start)
    end[-1] += 1
    kv.call("/v3/kv/deleterange", {"key": kv.b64(start), "range_end": kv.b64(bytes(end))})


def gc_items(kv, kind):
    return len(kv.scan(b"jfsops/gc/i/" + kind.encode() + b":"))


def keys(kv, prefix):
    return "\n".join("%r %r" % (k, v) for k, v in kv.scan(prefix.encode()))


# command -> (what it does given the store and the arguments after it, print its result)
COMMANDS = {
    "age-delslices": (lambda kv, a: age_delslices(kv, int(a[0])), False),
    "age-trash": (lambda kv, a: age_trash(kv, int(a[0])), False),
    "trash-entries": (lambda kv, a: trash_entries(kv), True),
    "digest": (lambda kv, a: digest(kv), True),
    "gc-items": (lambda kv, a: gc_items(kv, a[0]), True),
    "keys": (lambda kv, a: keys(kv, a[0]), True),
    "pad": (lambda kv, a: pad(kv, int(a[0])), False),
    "unpad": (lambda kv, a: unpad(kv), False),
}


def main():
    if len(sys.argv) < 3 or sys.argv[1] not in COMMANDS:
        raise SystemExit(__doc__)
    run, show = COMMANDS[sys.argv[1]]
    out = run(KV(sys.argv[2]), sys.argv[3:])
    if show:
        print(out)


if __name__ == "__main__":
    main()
