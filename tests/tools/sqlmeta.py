#!/usr/bin/env python3
"""sqlmeta.py: the test bed's direct access to a JuiceFS volume's SQL
metadata (sqlite3://, postgres://, mysql:// META-URLs as juicefs spells
them), for the few states a test must build or read that no client command
gives: aging delayed slices and trash hour directories, counting trash
entries, a digest of every table for "nothing was written" checks.

    sqlmeta.py age-delslices META SECONDS
    sqlmeta.py age-trash META SECONDS
    sqlmeta.py trash-entries META
    sqlmeta.py digest META
    sqlmeta.py gc-items META KIND   jfsops gc task items of KIND (f s d c t)
                                    recorded (0 when no task table exists)
    sqlmeta.py sql META "SQL with ? params" [PARAM...]   (prints rows, tab-separated)

Needs psycopg2 and PyMySQL for the server engines (tests/install.sh puts them
in the venv)."""
import datetime as dt
import hashlib
import re
import sys
import urllib.parse

TRASH = 0x7FFFFFFF10000000


class DB:
    def __init__(self, meta, readonly=False):
        scheme, rest = meta.split("://", 1)
        self.kind = scheme
        q = {}
        if "?" in rest:
            rest, qs = rest.split("?", 1)
            q = dict(urllib.parse.parse_qsl(qs))
        p = q.get("table_prefix")
        self.pfx = "jfs_%s_" % p if p else "jfs_"
        if scheme == "sqlite3":
            import sqlite3
            path = urllib.parse.unquote(rest)
            if readonly:  # never checkpoints a client's WAL into the file
                self.conn = sqlite3.connect("file:%s?mode=ro" % path, uri=True, timeout=30)
            else:
                self.conn = sqlite3.connect(path, timeout=30)
            self.conn.text_factory = bytes
            self.ph = "?"
        elif scheme == "postgres":
            import psycopg2
            u = urllib.parse.urlsplit("postgres://" + rest)
            args = dict(dbname=u.path.lstrip("/"), user=urllib.parse.unquote(u.username or ""),
                        password=urllib.parse.unquote(u.password or ""), host=u.hostname or q.get("host"),
                        port=u.port or q.get("port") or 5432)
            for k in ("sslmode",):
                if k in q:
                    args[k] = q[k]
            self.conn = psycopg2.connect(**args)
            if "search_path" in q:
                self.conn.cursor().execute("SET search_path TO " + q["search_path"])
            self.ph = "%s"
        elif scheme == "mysql":
            import pymysql
            m = re.match(r"^(?P<user>[^:@]*)(:(?P<pw>.*))?@(?P<addr>[a-z]*\((?P<inner>[^)]*)\))?/(?P<db>[^?]*)$", rest)
            if not m:
                raise SystemExit("sqlmeta: cannot parse %s" % meta)
            args = dict(user=m.group("user"), password=m.group("pw") or "", database=m.group("db"),
                        client_flag=2)  # CLIENT_FOUND_ROWS
            addr = m.group("addr") or ""
            inner = m.group("inner") or "127.0.0.1:3306"
            if addr.startswith("unix("):
                args["unix_socket"] = inner
            else:
                host, _, port = inner.rpartition(":")
                args["host"], args["port"] = host or "127.0.0.1", int(port or 3306)
            self.conn = pymysql.connect(**args)
            self.ph = "%s"
        else:
            raise SystemExit("sqlmeta: not a SQL META-URL: %s" % meta)

    def q(self, sql, params=()):
        """Run SQL whose '@' is the table prefix and '?' the parameters."""
        sql = sql.replace("@", self.pfx).replace("?", self.ph)
        cur = self.conn.cursor()
        cur.execute(sql, params)
        return cur

    def commit(self):
        self.conn.commit()


def as_bytes(v):
    return bytes(v) if not isinstance(v, str) else v.encode()


def age_delslices(db, secs):
    db.q("UPDATE @delslices SET deleted = deleted - ?", (secs,))
    db.commit()


def age_trash(db, secs):
    for (name,) in db.q("SELECT name FROM @edge WHERE parent=?", (TRASH,)).fetchall():
        old = as_bytes(name)
        t = dt.datetime.strptime(old.decode(), "%Y-%m-%d-%H") - dt.timedelta(seconds=secs)
        db.q("UPDATE @edge SET name=? WHERE parent=? AND name=?",
             (t.strftime("%Y-%m-%d-%H").encode(), TRASH, old))
    db.commit()


def trash_entries(db):
    return db.q("SELECT COUNT(*) FROM @edge WHERE parent IN (SELECT inode FROM @edge WHERE parent=?)",
                (TRASH,)).fetchone()[0]


def tables(db):
    if db.kind == "sqlite3":
        rows = db.q("SELECT name FROM sqlite_master WHERE type='table'").fetchall()
    elif db.kind == "postgres":
        rows = db.q("SELECT tablename FROM pg_tables WHERE schemaname = current_schema()").fetchall()
    else:
        rows = db.q("SELECT table_name FROM information_schema.tables WHERE table_schema = DATABASE()").fetchall()
    return sorted(r[0] for r in rows)


def digest(db):
    """Every table of the volume (and ours), rows in a stable order."""
    h = hashlib.sha256()
    for t in tables(db):
        h.update(t.encode() + b"\0")
        rows = db.conn.cursor()
        rows.execute("SELECT * FROM %s" % t)
        out = sorted(repr(tuple(as_bytes(c) if isinstance(c, (bytes, bytearray, memoryview)) else c
                                for c in r)) for r in rows.fetchall())
        for r in out:
            h.update(r.encode() + b"\n")
    return h.hexdigest()


def gc_items(db, kind):
    """jfsops's item table is jfsops_[X_]gc_item beside jfs_[X_]*."""
    t = "jfsops_%sgc_item" % db.pfx[len("jfs_"):]
    if t not in [n.decode() if isinstance(n, bytes) else n for n in tables(db)]:
        return 0
    return db.q("SELECT COUNT(*) FROM %s WHERE item LIKE ?" % t, (kind + ":%",)).fetchone()[0]


def sql(db, args):
    cur = db.q(args[0], tuple(args[1:]))
    if cur.description:
        for r in cur.fetchall():
            print("\t".join(as_bytes(c).decode(errors="replace") if isinstance(c, (bytes, memoryview))
                            else str(c) for c in r))
    db.commit()


# command -> (what it does given the database and the arguments after it, print its result, read-only)
COMMANDS = {
    "age-delslices": (lambda db, a: age_delslices(db, int(a[0])), False, False),
    "age-trash": (lambda db, a: age_trash(db, int(a[0])), False, False),
    "trash-entries": (lambda db, a: trash_entries(db), True, True),
    "digest": (lambda db, a: digest(db), True, True),
    "gc-items": (lambda db, a: gc_items(db, a[0]), True, True),
    "sql": (sql, False, False),
}


def main():
    if len(sys.argv) < 3:
        raise SystemExit(__doc__)
    cmd, meta = sys.argv[1], sys.argv[2]
    if cmd not in COMMANDS:
        raise SystemExit(__doc__)
    run, show, readonly = COMMANDS[cmd]
    db = DB(meta, readonly=readonly)
    out = run(db, sys.argv[3:])
    if show:
        print(out)


if __name__ == "__main__":
    main()
