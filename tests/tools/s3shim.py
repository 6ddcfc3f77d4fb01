#!/usr/bin/env python3
"""s3shim.py: an HTTP fault shim in front of a real S3 server (test bed only).

A TCP proxy (Toxiproxy) can cut, stall, slow or reset a connection, but it
cannot answer like S3 does. This shim forwards every request to the upstream
S3 server unchanged (Host header included, so SigV4 signatures still verify)
and, by rules, answers chosen requests itself instead:

    503 SlowDown / 500 InternalError (any status and S3 error code) replies,
    a TCP reset or a silent close instead of a reply, a reply whose body is
    cut in the middle, or a delay,

on a chosen fraction of the requests, on every Nth, on the Nth only, after
the first N, up to a limit, and only on chosen request kinds (list, get,
head, put, put_part, copy, delete, delete_multi, mpu_create, mpu_complete,
mpu_abort, list_parts, create_bucket, head_bucket, list_buckets), methods,
LIST continuation pages, or key/prefix prefixes.

Usage:
    s3shim.py --listen PORT --upstream http://127.0.0.1:UPORT [--rules JSON]
              [--seed N] [--log FILE]

Control API (never forwarded; "__shim" is not a valid bucket name):
    GET    /__shim/stats   {"requests": n, "forwarded": n, "faults": n,
                            "kinds": {kind: n}, "faults_by_kind": {...},
                            "rules": [{"matched": n, "faulted": n}, ...]}
    PUT    /__shim/rules   body: a JSON list of rules (replaces them, counters reset)
    DELETE /__shim/rules   no rules: forward everything

A rule (every field optional):
    {"kinds": ["list"], "methods": ["GET"], "continued": true,
     "key_prefix": "vol/chunks/", "list_prefix": "vol/chunks/0/",
     "fraction": 0.3, "every": 3, "nth": 2, "after": 0, "limit": 10,
     "action": "error" | "reset" | "close" | "truncate" | "delay",
     "status": 503, "code": "SlowDown", "message": "...", "delay_ms": 500}
"continued" matches LIST requests that carry a continuation-token or marker
(pages after the first). Matching requests are counted per rule; a rule
faults when its count selectors (nth, every, after, fraction, limit) say so.
The first rule that faults a request wins. Without a selector every matching
request is faulted.

Aliases: keys the upstream server cannot store. SeaweedFS refuses "." and
".." segments and folds "a//b" and "/a" into "a/b" and "a" (a key is a
filer path); AWS keeps every key as given. The shim can show such keys
anyway, each backed by an ordinary upstream object:

    PUT /__shim/aliases  {"bucket": "b", "access_key": "AK", "secret_key": "SK",
                          "keys": {"SHOWN KEY": "UPSTREAM KEY", ...}}
                         (replaces the aliases; {} for none)

A listing of the bucket shows each upstream key under its shown name
(url-encoded when the request asked for encoding-type=url; the order and
the prefix are upstream's: list the whole bucket from its start, with no
start-after, and expect no byte order);
a GET or HEAD of a shown key is sent upstream for its upstream key, signed
again with the given credentials (Range and If-* headers go along). Other
requests on shown keys are refused (501 NotImplemented): a test that writes
or deletes them is not what this is for.

Standard library only. Bodies are buffered (test-sized objects).
"""
import argparse
import http.client
import http.server
import json
import random
import socket
import struct
import sys
import threading
import time
import urllib.parse
import xml.sax.saxutils

sys.path.insert(0, __import__("os").path.dirname(__import__("os").path.abspath(__file__)))
import s3util  # noqa: E402  (the SigV4 signer of the test bed)

HOP = {"connection", "keep-alive", "proxy-connection", "proxy-authenticate",
       "proxy-authorization", "te", "trailer", "transfer-encoding", "upgrade"}

KINDS = ("list", "get", "head", "put", "put_part", "copy", "delete", "delete_multi",
         "mpu_create", "mpu_complete", "mpu_abort", "list_parts", "create_bucket",
         "head_bucket", "delete_bucket", "list_buckets", "bucket_other")


def classify(method, path, query, headers):
    """(kind, key, list_prefix, continued) of a path-style S3 request."""
    parts = path.lstrip("/").split("/", 1)
    bucket = parts[0]
    key = urllib.parse.unquote(parts[1]) if len(parts) > 1 and parts[1] else ""
    q = urllib.parse.parse_qs(query, keep_blank_values=True)
    if not bucket:
        return "list_buckets", "", "", False
    if not key:
        if method == "GET":
            if any(k in q for k in ("location", "versioning", "acl", "policy", "uploads",
                                    "lifecycle", "cors", "tagging")):
                return "bucket_other", "", "", False
            cont = "continuation-token" in q or "marker" in q
            return "list", "", q.get("prefix", [""])[0], cont
        if method == "POST" and "delete" in q:
            return "delete_multi", "", "", False
        if method == "PUT":
            return "create_bucket", "", "", False
        if method == "HEAD":
            return "head_bucket", "", "", False
        if method == "DELETE":
            return "delete_bucket", "", "", False
        return "bucket_other", "", "", False
    if method == "GET":
        return ("list_parts" if "uploadId" in q else "get"), key, "", False
    if method == "HEAD":
        return "head", key, "", False
    if method == "PUT":
        if "partNumber" in q and "uploadId" in q:
            return "put_part", key, "", False
        if headers.get("x-amz-copy-source"):
            return "copy", key, "", False
        return "put", key, "", False
    if method == "POST":
        if "uploads" in q:
            return "mpu_create", key, "", False
        if "uploadId" in q:
            return "mpu_complete", key, "", False
    if method == "DELETE":
        return ("mpu_abort" if "uploadId" in q else "delete"), key, "", False
    return "bucket_other", key, "", False


class Rule:
    FIELDS = {"kinds", "methods", "continued", "key_prefix", "list_prefix", "fraction",
              "every", "nth", "after", "limit", "action", "status", "code", "message",
              "delay_ms"}

    def __init__(self, d):
        bad = set(d) - self.FIELDS
        if bad:
            raise ValueError("unknown rule field(s): %s" % ", ".join(sorted(bad)))
        self.d = d
        for k in d.get("kinds", []):
            if k not in KINDS:
                raise ValueError("unknown request kind %r" % k)
        self.action = d.get("action", "error")
        if self.action not in ("error", "reset", "close", "truncate", "delay"):
            raise ValueError("unknown action %r" % self.action)
        self.matched = 0
        self.faulted = 0

    def matches(self, method, kind, key, list_prefix, continued):
        d = self.d
        if "kinds" in d and kind not in d["kinds"]:
            return False
        if "methods" in d and method not in d["methods"]:
            return False
        if "continued" in d and (kind != "list" or bool(d["continued"]) != continued):
            return False
        if "key_prefix" in d and not key.startswith(d["key_prefix"]):
            return False
        if "list_prefix" in d and (kind != "list" or not list_prefix.startswith(d["list_prefix"])):
            return False
        return True

    def decide(self, rng):
        """Count one matching request; True when it is to be faulted."""
        d = self.d
        self.matched += 1
        n = self.matched - d.get("after", 0)
        if n <= 0:
            return False
        if "limit" in d and self.faulted >= d["limit"]:
            return False
        if "nth" in d and n != d["nth"]:
            return False
        if "every" in d and n % d["every"] != 0:
            return False
        if "fraction" in d and rng.random() >= d["fraction"]:
            return False
        self.faulted += 1
        return True


class State:
    def __init__(self, upstream, seed, log):
        u = urllib.parse.urlsplit(upstream)
        if u.scheme != "http" or not u.hostname:
            raise ValueError("upstream must be http://HOST:PORT")
        self.up_host = u.hostname
        self.up_port = u.port or 80
        self.rng = random.Random(seed)
        self.lock = threading.Lock()
        self.rules = []
        self.aliases = {}  # {"bucket", "access_key", "secret_key", "keys": {shown: upstream}}
        self.log = open(log, "a", buffering=1) if log else None
        self.reset_stats()

    def reset_stats(self):
        self.requests = 0
        self.forwarded = 0
        self.faults = 0
        self.kinds = {}
        self.faults_by_kind = {}

    def set_rules(self, rules):
        parsed = [Rule(r) for r in rules]
        with self.lock:
            self.rules = parsed

    def pick(self, method, kind, key, list_prefix, continued):
        with self.lock:
            self.requests += 1
            self.kinds[kind] = self.kinds.get(kind, 0) + 1
            for r in self.rules:
                if r.matches(method, kind, key, list_prefix, continued) and r.decide(self.rng):
                    if r.action != "delay":
                        self.faults += 1
                        self.faults_by_kind[kind] = self.faults_by_kind.get(kind, 0) + 1
                    return r
        return None

    def stats(self):
        with self.lock:
            return {"requests": self.requests, "forwarded": self.forwarded,
                    "faults": self.faults, "kinds": dict(self.kinds),
                    "faults_by_kind": dict(self.faults_by_kind),
                    "rules": [{"rule": r.d, "matched": r.matched, "faulted": r.faulted}
                              for r in self.rules]}

    def note(self, line):
        if self.log:
            with self.lock:
                self.log.write("%.3f %s\n" % (time.time(), line))


def error_body(code, message):
    return ('<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>%s</Code>'
            '<Message>%s</Message><RequestId>s3shim</RequestId></Error>' %
            (code, message)).encode()


def show_aliases(body, keys, url_encoded):
    """A listing's <Key>UPSTREAM</Key> as <Key>SHOWN</Key> for every alias."""
    back = {v: k for k, v in keys.items()}
    text = body.decode("utf-8")
    out, pos = [], 0
    while True:
        i = text.find("<Key>", pos)
        if i < 0:
            break
        j = text.find("</Key>", i)
        raw = text[i + 5:j]
        k = xml.sax.saxutils.unescape(raw, {"&quot;": '"', "&apos;": "'"})
        if url_encoded:
            k = urllib.parse.unquote(k)
        if k in back:
            shown = back[k]
            raw = (urllib.parse.quote(shown, safe="/") if url_encoded
                   else xml.sax.saxutils.escape(shown))
        out.append(text[pos:i + 5] + raw)
        pos = j
    out.append(text[pos:])
    return "".join(out).encode("utf-8")


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "s3shim"
    up = None  # upstream connection of this client connection

    def log_message(self, fmt, *args):
        pass

    def read_body(self):
        te = (self.headers.get("Transfer-Encoding") or "").lower()
        if "chunked" in te:
            out = []
            while True:
                line = self.rfile.readline()
                size = int(line.split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return b"".join(out)
                out.append(self.rfile.read(size))
                self.rfile.readline()
        n = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(n) if n else b""

    def reply(self, status, body, ctype="application/xml", extra=None):
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for k, v in (extra or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def drop(self, rst):
        """Close the client connection without a reply: a TCP reset (rst) or
        an orderly close."""
        self.close_connection = True
        try:
            if rst:
                self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                           struct.pack("ii", 1, 0))
            else:
                self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.connection.close()

    def control(self, st):
        body = self.read_body()
        if self.path == "/__shim/stats" and self.command == "GET":
            return self.reply(200, json.dumps(st.stats()).encode(), "application/json")
        if self.path == "/__shim/rules" and self.command == "PUT":
            try:
                rules = json.loads(body or b"[]")
                if not isinstance(rules, list):
                    raise ValueError("rules must be a JSON list")
                st.set_rules(rules)
                with st.lock:
                    st.reset_stats()
            except (ValueError, TypeError) as e:
                return self.reply(400, ("bad rules: %s\n" % e).encode(), "text/plain")
            st.note("rules %s" % json.dumps(rules))
            return self.reply(200, b"ok\n", "text/plain")
        if self.path == "/__shim/aliases" and self.command == "PUT":
            try:
                a = json.loads(body or b"{}")
                if not isinstance(a, dict) or (a and not (isinstance(a.get("keys"), dict) and
                                                          a.get("bucket"))):
                    raise ValueError("want {bucket, access_key, secret_key, keys: {shown: upstream}}")
                with st.lock:
                    st.aliases = a
            except (ValueError, TypeError) as e:
                return self.reply(400, ("bad aliases: %s\n" % e).encode(), "text/plain")
            st.note("aliases %s" % json.dumps(a))
            return self.reply(200, b"ok\n", "text/plain")
        if self.path == "/__shim/rules" and self.command == "DELETE":
            st.set_rules([])
            st.note("rules []")
            return self.reply(200, b"ok\n", "text/plain")
        return self.reply(404, b"unknown control request\n", "text/plain")

    def upstream(self, st, body, path=None, hdrs=None):
        for attempt in (0, 1):
            if self.up is None:
                self.up = http.client.HTTPConnection(st.up_host, st.up_port, timeout=120)
            if hdrs is None:
                hdrs = {k: v for k, v in self.headers.items() if k.lower() not in HOP}
            if body or self.command in ("PUT", "POST"):
                hdrs["Content-Length"] = str(len(body))
            try:
                self.up.request(self.command, path or self.path, body=body or None, headers=hdrs)
                r = self.up.getresponse()
                data = r.read()
                return r, data
            except (http.client.HTTPException, OSError):
                # a kept-alive upstream connection closed under us: once more
                self.up.close()
                self.up = None
                if attempt:
                    raise
        raise AssertionError("unreachable")

    def handle_any(self):
        st = self.server.state
        if self.path.startswith("/__shim/"):
            return self.control(st)
        body = self.read_body()
        u = urllib.parse.urlsplit(self.path)
        lower = {k.lower(): v for k, v in self.headers.items()}
        kind, key, lpfx, cont = classify(self.command, u.path, u.query, lower)
        rule = st.pick(self.command, kind, key, lpfx, cont)
        act = rule.action if rule else None
        if act == "delay":
            time.sleep(rule.d.get("delay_ms", 500) / 1000.0)
            act = None
        if act == "error":
            status = rule.d.get("status", 503)
            code = rule.d.get("code", "SlowDown" if status == 503 else "InternalError")
            msg = rule.d.get("message", "injected by s3shim")
            st.note("%s %s %s -> %d %s (fault)" % (kind, self.command, self.path, status, code))
            extra = {"Retry-After": "1"} if status == 503 else None
            return self.reply(status, error_body(code, msg), extra=extra)
        if act in ("reset", "close"):
            st.note("%s %s %s -> %s (fault)" % (kind, self.command, self.path, act))
            return self.drop(act == "reset")
        with st.lock:
            al = st.aliases
        bucket = u.path.lstrip("/").split("/", 1)[0]
        alias = al.get("keys", {}).get(key) if al and bucket == al.get("bucket") and key else None
        path = hdrs = None
        if alias is not None:
            if kind not in ("get", "head"):
                st.note("%s %s %s -> 501 (an alias)" % (kind, self.command, self.path))
                return self.reply(501, error_body("NotImplemented", "s3shim: an alias is read-only"))
            # the upstream key, signed anew; Range and If-* go along unsigned
            cpath, _, hdrs = s3util.signed_headers("%s:%d" % (st.up_host, st.up_port),
                                                   al.get("access_key", ""),
                                                   al.get("secret_key", ""), self.command,
                                                   bucket, alias)
            for k, v in self.headers.items():
                if k.lower() == "range" or k.lower().startswith("if-"):
                    hdrs[k] = v
            path = cpath
        try:
            r, data = self.upstream(st, body, path, hdrs)
        except (http.client.HTTPException, OSError) as e:
            st.note("%s %s %s -> upstream failed: %s" % (kind, self.command, self.path, e))
            return self.reply(502, error_body("BadGateway", "s3shim: upstream: %s" % e))
        with st.lock:
            st.forwarded += 1
        if kind == "list" and al and bucket == al.get("bucket") and r.status == 200:
            data = show_aliases(data, al.get("keys", {}), "encoding-type=url" in u.query)
        self.send_response(r.status, r.reason)
        for k, v in r.getheaders():
            if k.lower() in HOP or k.lower() == "content-length":
                continue
            self.send_header(k, v)
        if self.command == "HEAD":
            self.send_header("Content-Length", r.getheader("Content-Length") or "0")
        else:
            self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if act == "truncate" and self.command != "HEAD":
            cut = len(data) // 2
            self.wfile.write(data[:cut])
            st.note("%s %s %s -> %d, body cut at %d of %d (fault)" %
                    (kind, self.command, self.path, r.status, cut, len(data)))
            return self.drop(True)
        if self.command != "HEAD":
            self.wfile.write(data)
        st.note("%s %s %s -> %d" % (kind, self.command, self.path, r.status))

    do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = handle_any

    def handle_one_request(self):
        try:
            super().handle_one_request()
        except (OSError, ValueError):
            self.close_connection = True  # the client side is gone (or we dropped it)

    def finish(self):
        try:
            super().finish()
        except (OSError, ValueError):
            pass
        if self.up is not None:
            self.up.close()


class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def handle_error(self, request, client_address):
        # a client that went away mid-reply is not the shim's problem
        pass


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--listen", type=int, required=True, help="port on 127.0.0.1")
    ap.add_argument("--upstream", required=True, help="http://HOST:PORT of the real S3 server")
    ap.add_argument("--rules", default="[]", help="initial rules (JSON list)")
    ap.add_argument("--seed", type=int, default=12, help="seed of the fraction selector")
    ap.add_argument("--log", help="append one line per request to this file")
    a = ap.parse_args()
    st = State(a.upstream, a.seed, a.log)
    st.set_rules(json.loads(a.rules))
    srv = Server(("127.0.0.1", a.listen), Handler)
    srv.state = st
    print("s3shim ready on 127.0.0.1:%d -> %s" % (a.listen, a.upstream), flush=True)
    try:
        srv.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
