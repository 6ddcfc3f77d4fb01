#!/usr/bin/env python3
"""Tiny SigV4 S3 client for the jfsops test bed (stdlib only).

usage: s3util.py list   ENDPOINT AK SK BUCKET [PREFIX]   -> "key size etag" lines
       s3util.py digest ENDPOINT AK SK BUCKET            -> sha256 of the listing
       s3util.py get    ENDPOINT AK SK BUCKET KEY        -> object bytes on stdout
       s3util.py delete ENDPOINT AK SK BUCKET KEY
       s3util.py put    ENDPOINT AK SK BUCKET KEY FILE
       s3util.py mpput  ENDPOINT AK SK BUCKET KEY FILE PARTSIZE
                        (multipart upload, one part per PARTSIZE bytes)
       s3util.py md5s   ENDPOINT AK SK BUCKET [PREFIX]   -> "key md5-of-content size" lines
                                                           (every object read whole)
Exit 1 with a message on any HTTP error.
"""
import datetime
import hashlib
import hmac
import sys
import urllib.error
import urllib.parse
import urllib.request
import xml.etree.ElementTree as ET

REGION = "us-east-1"
EMPTY = hashlib.sha256(b"").hexdigest()


def _quote(s, safe="-_.~"):
    return urllib.parse.quote(s, safe=safe)


def signed_headers(host, ak, sk, method, bucket, key="", query=None, body=b""):
    """(encoded path, encoded query, headers) of a SigV4-signed request (host: "HOST:PORT")."""
    path = "/" + bucket + ("/" + key if key else "")
    cpath = _quote(path, safe="/-_.~")
    q = sorted((query or {}).items())
    cquery = "&".join(_quote(k) + "=" + _quote(v) for k, v in q)
    now = datetime.datetime.now(datetime.timezone.utc)
    amzdate = now.strftime("%Y%m%dT%H%M%SZ")
    day = now.strftime("%Y%m%d")
    phash = hashlib.sha256(body).hexdigest()
    headers = {"host": host, "x-amz-content-sha256": phash, "x-amz-date": amzdate}
    signed = ";".join(sorted(headers))
    creq = "\n".join([method, cpath, cquery,
                      "".join(k + ":" + headers[k] + "\n" for k in sorted(headers)),
                      signed, phash])
    scope = day + "/" + REGION + "/s3/aws4_request"
    sts = "\n".join(["AWS4-HMAC-SHA256", amzdate, scope,
                     hashlib.sha256(creq.encode()).hexdigest()])
    k = ("AWS4" + sk).encode()
    for part in (day, REGION, "s3", "aws4_request"):
        k = hmac.new(k, part.encode(), hashlib.sha256).digest()
    sig = hmac.new(k, sts.encode(), hashlib.sha256).hexdigest()
    hdrs = dict(headers)
    del hdrs["host"]
    hdrs["Authorization"] = ("AWS4-HMAC-SHA256 Credential=%s/%s, SignedHeaders=%s, Signature=%s"
                             % (ak, scope, signed, sig))
    return cpath, cquery, hdrs


def request(ep, ak, sk, method, bucket, key="", query=None, body=b"", want_headers=False):
    path = "/" + bucket + ("/" + key if key else "")
    cpath, cquery, hdrs = signed_headers(urllib.parse.urlsplit(ep).netloc, ak, sk, method,
                                         bucket, key, query, body)
    url = ep.rstrip("/") + cpath + ("?" + cquery if cquery else "")
    req = urllib.request.Request(url, data=body if method in ("PUT", "POST") else None,
                                 headers=hdrs, method=method)
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            data = r.read()
            if want_headers:
                return data, r.headers
            return data
    except urllib.error.HTTPError as e:
        sys.exit("s3util: %s %s: HTTP %d %s" % (method, path, e.code, e.read()[:300]))


def list_keys(ep, ak, sk, bucket, prefix=""):
    token = None
    while True:
        q = {"list-type": "2", "max-keys": "1000"}
        if prefix:
            q["prefix"] = prefix
        if token:
            q["continuation-token"] = token
        root = ET.fromstring(request(ep, ak, sk, "GET", bucket, query=q))
        ns = root.tag[:root.tag.index("}") + 1] if root.tag.startswith("{") else ""
        for c in root.findall(ns + "Contents"):
            yield (c.findtext(ns + "Key"), int(c.findtext(ns + "Size") or 0),
                   (c.findtext(ns + "ETag") or "").strip('"'))
        if (root.findtext(ns + "IsTruncated") or "false").lower() != "true":
            break
        token = root.findtext(ns + "NextContinuationToken")
        if not token:
            break


def multipart_put(ep, ak, sk, bucket, key, path, part_size):
    """CreateMultipartUpload, one UploadPart per part_size bytes, Complete."""
    root = ET.fromstring(request(ep, ak, sk, "POST", bucket, key, query={"uploads": ""}))
    ns = root.tag[:root.tag.index("}") + 1] if root.tag.startswith("{") else ""
    upload = root.findtext(ns + "UploadId")
    if not upload:
        sys.exit("s3util: CreateMultipartUpload of %s: no UploadId" % key)
    done = []
    with open(path, "rb") as f:
        while True:
            data = f.read(part_size)
            if not data and done:
                break
            n = len(done) + 1
            _, hdrs = request(ep, ak, sk, "PUT", bucket, key,
                              query={"partNumber": str(n), "uploadId": upload}, body=data,
                              want_headers=True)
            done.append((n, hdrs.get("ETag", "")))
            if len(data) < part_size:
                break
    body = "<CompleteMultipartUpload>" + "".join(
        "<Part><PartNumber>%d</PartNumber><ETag>%s</ETag></Part>" % (n, e) for n, e in done) + \
        "</CompleteMultipartUpload>"
    out = request(ep, ak, sk, "POST", bucket, key, query={"uploadId": upload}, body=body.encode())
    if b"Error" in out and b"CompleteMultipartUploadResult" not in out:
        sys.exit("s3util: CompleteMultipartUpload of %s: %s" % (key, out[:300]))
    return len(done)


def main(a):
    if len(a) < 5:
        sys.exit(__doc__)
    cmd, ep, ak, sk, bucket = a[:5]
    if cmd == "list":
        for k, s, e in list_keys(ep, ak, sk, bucket, a[5] if len(a) > 5 else ""):
            print(k, s, e)
    elif cmd == "digest":
        h = hashlib.sha256()
        n = 0
        for k, s, e in sorted(list_keys(ep, ak, sk, bucket)):
            h.update(("%s %d %s\n" % (k, s, e)).encode())
            n += 1
        print(h.hexdigest(), n)
    elif cmd == "md5s":
        for k, s, e in list_keys(ep, ak, sk, bucket, a[5] if len(a) > 5 else ""):
            data = request(ep, ak, sk, "GET", bucket, k)
            print(k, hashlib.md5(data).hexdigest(), len(data))
    elif cmd == "get":
        sys.stdout.buffer.write(request(ep, ak, sk, "GET", bucket, a[5]))
    elif cmd == "delete":
        request(ep, ak, sk, "DELETE", bucket, a[5])
    elif cmd == "put":
        with open(a[6], "rb") as f:
            request(ep, ak, sk, "PUT", bucket, a[5], body=f.read())
    elif cmd == "mpput":
        print(multipart_put(ep, ak, sk, bucket, a[5], a[6], int(a[7])))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:])
