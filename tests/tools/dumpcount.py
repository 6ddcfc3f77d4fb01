#!/usr/bin/env python3
"""Count what a `juicefs dump` JSON shows, in the terms of `jfsops info --json`.

usage: dumpcount.py DUMP.json [META-URL]

From the dump (FSTree + Trash, inodes counted once even when hard-linked):
  files          regular-file inodes (live tree and trash)
  dirs           directory inodes of the live tree, root included (the trash's
                 hourly dirs are counted apart in trash_dirs, and whether the
                 trash root is an inode of the database in trash_root_node)
  chunks         chunk records with at least one slice record, over all files
  records        slice records in those chunks (hole records with id 0 too)
  slice_records  the records with a non-zero slice id
  live_slices    distinct non-zero slice ids referenced by those records
  pending_files  entries of DelFiles
  hist           {"<records in a chunk>": number of chunks}
A dump does not carry delayed slices nor the chunks still held by pending
(removed, not yet cleaned) files; when META-URL (sqlite3:// or redis://) is
given (sqlite3://, postgres://, mysql://, etcd:// or redis://) they are read from the database directly:
  delayed_slices  12-byte records in delSlices / jfs_delslices
  delayed_entries entries (rows / hash fields) of delSlices / jfs_delslices
  pending_chunks / pending_records / pending_slice_records / pending_hist:
                  the chunk records of pending files (not in the counts above)
  slices          distinct non-zero slice ids over live chunks, pending files'
                  chunks and delayed slices
Prints one JSON object.
"""
import json
import os
import socket
import sys
import urllib.parse

TRASH_INODE = 0x7FFFFFFF10000000


def walk(node, st, live):
    a = node.get("attr", {})
    ino = a.get("inode")
    typ = a.get("type")
    if typ == "directory":
        if ino not in st["seen_dirs"]:
            st["seen_dirs"].add(ino)
            st["dirs" if live else "trash_dirs"] += 1
    elif typ == "regular":
        if ino not in st["seen"]:
            st["seen"].add(ino)
            st["files"] += 1
            for c in node.get("chunks") or []:
                sl = c.get("slices") or []
                if not sl:
                    continue
                st["chunks"] += 1
                st["records"] += len(sl)
                st["hist"][str(len(sl))] = st["hist"].get(str(len(sl)), 0) + 1
                for s in sl:
                    sid = s.get("id", s.get("chunkid", 0))
                    if sid:
                        st["ids"].add(sid)
                        st["slice_records"] += 1
    for child in (node.get("entries") or {}).values():
        walk(child, st, live)


class Resp:
    def __init__(self, host, port, db, password=None, user=None, tls=None):
        self.s = socket.create_connection((host, port), timeout=10)
        if tls is not None:
            self.s = tls.wrap_socket(self.s, server_hostname=host)
        self.f = self.s.makefile("rb")
        if password:
            self.cmd(*(["AUTH", user, password] if user else ["AUTH", password]))
        if db is not None:
            self.cmd("SELECT", str(db))

    def cmd(self, *args):
        out = b"*%d\r\n" % len(args)
        for a in args:
            a = a if isinstance(a, bytes) else str(a).encode()
            out += b"$%d\r\n%s\r\n" % (len(a), a)
        self.s.sendall(out)
        return self.read()

    def read(self):
        line = self.f.readline()
        t, rest = line[:1], line[1:-2]
        if t == b"+":
            return rest
        if t == b"-":
            raise RuntimeError(rest.decode())
        if t == b":":
            return int(rest)
        if t == b"$":
            n = int(rest)
            if n < 0:
                return None
            data = self.f.read(n + 2)
            return data[:-2]
        if t == b"*":
            n = int(rest)
            return None if n < 0 else [self.read() for _ in range(n)]
        raise RuntimeError("bad RESP reply %r" % line)


def redis_volume(url):
    """(Resp to the server holding the volume, key prefix) for a juicefs Redis
    META-URL: standalone, rediss:// (tls-ca-cert-file, tls-cert-file,
    tls-key-file), Sentinel MASTER,host:port,... (SENTINEL_PASSWORD) or a
    Cluster (several host:port, or one node in cluster mode; keys "{DB}"...)."""
    import ssl
    u = urllib.parse.urlsplit(url)
    q = urllib.parse.parse_qs(u.query)
    tls = None
    if u.scheme == "rediss":
        tls = ssl.create_default_context(cafile=(q.get("tls-ca-cert-file") or [None])[0])
        if q.get("tls-cert-file"):
            tls.load_cert_chain(q["tls-cert-file"][0], (q.get("tls-key-file") or [None])[0])
    user = urllib.parse.unquote(u.username) if u.username else None
    pw = urllib.parse.unquote(u.password) if u.password else None
    db = int((u.path or "/0").strip("/") or 0)
    hosts = u.netloc.rsplit("@", 1)[-1].split(",")

    def hp(a, port):
        h, _, p = a.rpartition(":")
        return (h.strip("[]"), int(p)) if h else (a, port)
    if len(hosts) > 1 and ":" in u.netloc.rsplit("@", 1)[-1] and \
            u.netloc.rsplit("@", 1)[-1].index(",") < u.netloc.rsplit("@", 1)[-1].index(":"):
        name = hosts[0]
        for a in hosts[1:]:
            try:
                s = Resp(*hp(a, 26379), None, os.environ.get("SENTINEL_PASSWORD") or None,
                         None, tls)
                h, p = s.cmd("SENTINEL", "get-master-addr-by-name", name)
                return Resp(h.decode(), int(p), db, pw, user, tls), ""
            except OSError:
                continue
        sys.exit("no sentinel answered for %s" % name)
    h, p = hp(hosts[0], 6379)
    c = Resp(h, p, None, pw, user, tls)
    try:
        cluster = b"cluster_state:" in c.cmd("CLUSTER", "INFO")
    except RuntimeError:
        cluster = False
    if not cluster:
        c.cmd("SELECT", str(db))
        return c, ""
    prefix = "{%d}" % db
    slot = c.cmd("CLUSTER", "KEYSLOT", prefix)
    for r in c.cmd("CLUSTER", "SLOTS"):
        if r[0] <= slot <= r[1]:
            return Resp(r[2][0].decode() or h, r[2][1], None, pw, user, tls), prefix
    sys.exit("no cluster node serves slot %d" % slot)


def chunk_stats(blobs, res):
    """Chunk records ([pos u32][id u64][size u32][off u32][len u32], big
    endian, 24 bytes) of pending files."""
    chunks = recs = nz = 0
    ids = set()
    hist = {}
    for b in blobs:
        n = len(b) // 24
        if n == 0:
            continue
        chunks += 1
        recs += n
        hist[str(n)] = hist.get(str(n), 0) + 1
        for i in range(n):
            sid = int.from_bytes(b[i * 24 + 4:i * 24 + 12], "big")
            if sid:
                ids.add(sid)
                nz += 1
    res.update(pending_chunks=chunks, pending_records=recs, pending_slice_records=nz,
               pending_hist=hist)
    res["pending_ids"] = ids


def delayed_ids(vals):
    ids = set()
    for v in vals:
        for i in range(len(v) // 12):
            sid = int.from_bytes(v[i * 12:i * 12 + 8], "big")
            if sid:
                ids.add(sid)
    return ids


def from_db(url, pending_inodes):
    u = urllib.parse.urlsplit(url)
    res = {}
    if u.scheme in ("sqlite3", "postgres", "mysql"):
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        import sqlmeta
        db = sqlmeta.DB(url, readonly=True)
        rows = [bytes(r[0]) for r in db.q("SELECT slices FROM @delslices").fetchall()]
        res["delayed_entries"] = len(rows)
        res["delayed_slices"] = sum(len(r) // 12 for r in rows)
        res["delayed_ids"] = delayed_ids(rows)
        res["trash_root_node"] = db.q("SELECT count(*) FROM @node WHERE inode=?",
                                      (TRASH_INODE,)).fetchone()[0]
        blobs = []
        for ino in pending_inodes:
            blobs += [bytes(r[0]) for r in db.q("SELECT slices FROM @chunk WHERE inode=?", (ino,)).fetchall()]
        chunk_stats(blobs, res)
    elif u.scheme == "etcd":
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        import kvmeta
        kv = kvmeta.KV(url)
        rows = [v for k, v in kv.scan(b"L") if len(k) == 17]
        res["delayed_entries"] = len(rows)
        res["delayed_slices"] = sum(len(r) // 12 for r in rows)
        res["delayed_ids"] = delayed_ids(rows)
        res["trash_root_node"] = len(kv.scan(b"A" + kvmeta.le64(TRASH_INODE) + b"I"))
        blobs = []
        for ino in pending_inodes:
            blobs += [v for k, v in kv.scan(b"A" + kvmeta.le64(ino) + b"C") if len(k) == 14]
        chunk_stats(blobs, res)
    elif u.scheme in ("redis", "rediss"):
        conn, pre = redis_volume(url)
        h = conn.cmd("HGETALL", pre + "delSlices") or []
        vals = h[1::2]
        res["delayed_entries"] = len(vals)
        res["delayed_slices"] = sum(len(v) // 12 for v in vals)
        res["delayed_ids"] = delayed_ids(vals)
        res["trash_root_node"] = conn.cmd("EXISTS", pre + "i%d" % TRASH_INODE)
        blobs = []
        for ino in pending_inodes:
            cur = b"0"
            while True:
                cur, keys = conn.cmd("SCAN", cur, "MATCH", pre + "c%d_*" % ino, "COUNT", "1000")
                for k in keys:
                    blobs.append(b"".join(conn.cmd("LRANGE", k, "0", "-1") or []))
                if cur == b"0":
                    break
        chunk_stats(blobs, res)
    else:
        sys.exit("dumpcount: unsupported META-URL scheme %s" % u.scheme)
    return res


def main(a):
    if not a:
        sys.exit(__doc__)
    with open(a[0]) as f:
        d = json.load(f)
    st = {"files": 0, "dirs": 0, "trash_dirs": 0, "chunks": 0, "records": 0, "slice_records": 0,
          "hist": {}, "ids": set(), "seen": set(), "seen_dirs": set()}
    walk(d.get("FSTree") or {}, st, True)
    walk(d.get("Trash") or {}, st, False)
    if d.get("Trash"):
        # the dump always shows the trash root; the database has that inode
        # only once something was put in the trash (see trash_root_node)
        st["trash_dirs"] -= 1
    s = d.get("Setting") or {}
    out = {
        "name": s.get("Name"), "uuid": s.get("UUID"), "storage": s.get("Storage"),
        "bucket": s.get("Bucket"), "block_size": (s.get("BlockSize") or 0) * 1024,
        "compression": s.get("Compression") or "none", "trash_days": s.get("TrashDays", 0),
        "files": st["files"], "dirs": st["dirs"], "trash_dirs": st["trash_dirs"],
        "chunks": st["chunks"], "live_slices": len(st["ids"]), "records": st["records"],
        "slice_records": st["slice_records"],
        "pending_files": len(d.get("DelFiles") or []), "hist": st["hist"],
    }
    if len(a) > 1:
        db = from_db(a[1], [x["inode"] for x in d.get("DelFiles") or []])
        allids = st["ids"] | db.pop("pending_ids") | db.pop("delayed_ids")
        db["slices"] = len(allids)
        out.update(db)
    print(json.dumps(out, sort_keys=True))


if __name__ == "__main__":
    main(sys.argv[1:])
