#!/bin/bash
# tests/integration/sync_slowdown.sh: `jfsops sync` into a destination that
# answers 503 SlowDown to a share of its writes (a fault-injecting proxy in
# front of rclone serve s3). With retries the run completes and the copy is
# complete; without retries it fails with exit 4 and says how many objects
# failed; it never reports success with objects missing.
#
#   bash tests/integration/sync_slowdown.sh
# Env: JFSOPS_BIN, SYNC_RS_PORT (JO_PORT_BASE+4), SYNC_PROXY_PORT (JO_PORT_BASE+5),
# SYNC_N (200).
. "$(dirname "$0")/lib/init.sh" synccheck
J=${JFSOPS_BIN:-$JO_REPO/build/jfsops}
[ -x "$J" ] || jo_die "$J not built"
RSP=${SYNC_RS_PORT:-$((JO_PORT_BASE + 4))}
PXP=${SYNC_PROXY_PORT:-$((JO_PORT_BASE + 5))}
N=${SYNC_N:-200}

start_rclone_s3 "$RSP" rcak rcsk
jo_need_free_port "$PXP"
cat >"$JO_T/proxy.py" <<'EOF'
# Forward every request to the upstream S3 server unchanged (Host included,
# so SigV4 still verifies); answer 503 SlowDown to a share of PUT/POSTs.
import http.client, http.server, random, sys, threading
up_port, port, share = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
lock = threading.Lock()
stats = {"slowdown": 0, "forwarded": 0}
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def log_message(self, *a):
        pass
    def handle_any(self):
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n) if n else None
        if self.command in ("PUT", "POST") and random.random() < share:
            with lock:
                stats["slowdown"] += 1
            msg = b'<?xml version="1.0" encoding="UTF-8"?><Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>'
            self.send_response(503)
            self.send_header("Content-Type", "application/xml")
            self.send_header("Content-Length", str(len(msg)))
            self.end_headers()
            self.wfile.write(msg)
            return
        c = http.client.HTTPConnection("127.0.0.1", up_port, timeout=60)
        hdrs = {k: v for k, v in self.headers.items()}
        c.request(self.command, self.path, body=body, headers=hdrs)
        r = c.getresponse()
        data = r.read()
        with lock:
            stats["forwarded"] += 1
        self.send_response(r.status, r.reason)
        for k, v in r.getheaders():
            if k.lower() not in ("transfer-encoding", "content-length", "connection"):
                self.send_header(k, v)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)
        c.close()
    do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = handle_any
s = http.server.ThreadingHTTPServer(("127.0.0.1", port), H)
s.daemon_threads = True
print("proxy ready", flush=True)
try:
    s.serve_forever()
finally:
    sys.stderr.write("slowdown %d forwarded %d\n" % (stats["slowdown"], stats["forwarded"]))
EOF
python3 "$JO_T/proxy.py" "$RSP" "$PXP" 0.3 >"$JO_T/proxy.out" 2>&1 &
JO_KILL_PIDS+=($!)
for _ in $(seq 1 50); do grep -q ready "$JO_T/proxy.out" 2>/dev/null && break; sleep 0.1; done

sync_rclone_remotes "$JO_RS3_ENDPOINT"
"$RCLONE" -q mkdir RS:dst
D=$JO_T/data
mkdir -p "$D"
for i in $(seq 1 "$N"); do head -c $((RANDOM + 1)) /dev/urandom >"$D/f$i"; done
export JFSOPS_DST_ACCESS_KEY=rcak JFSOPS_DST_SECRET_KEY=rcsk
PX="endpoint=http://127.0.0.1:$PXP&path_style=1"

# With retries (default 5): completes, nothing missing.
set +e
"$J" sync -q --json --no-state "$D" "s3://dst/a?$PX" >"$JO_T/out.json" 2>"$JO_T/err.txt"
r=$?
set -e
check_eq "$r" 0 "with retries the run succeeds"
check_eq "$(jq -r .copied "$JO_T/out.json")" "$N" "every object copied"
if "$RCLONE" -q check "$D" RS:dst/a 2>/dev/null; then ok "rclone check: nothing missing"; else bad "objects missing after a successful run"; fi

# Without retries: some objects fail, exit 4, counts add up, no false success.
set +e
"$J" sync -q --json --no-state --retries 0 "$D" "s3://dst/b?$PX" >"$JO_T/out.json" 2>"$JO_T/err.txt"
r=$?
set -e
failed=$(jq -r .failed "$JO_T/out.json")
copied=$(jq -r .copied "$JO_T/out.json")
check_eq "$r" 4 "without retries the run reports partial failure"
if [ "$failed" -gt 0 ]; then ok "failures counted ($failed)"; else bad "no failure counted"; fi
check_eq "$((failed + copied))" "$N" "copied + failed = all objects"
grep -q SlowDown "$JO_T/err.txt" && ok "the error names SlowDown" || bad "error message lacks the S3 code"
have=$("$RCLONE" lsf RS:dst/b | wc -l)
check_eq "$have" "$copied" "exactly the reported copies exist"
# A rerun with retries finishes the job.
"$J" sync -q --json --no-state "$D" "s3://dst/b?$PX" >"$JO_T/out.json"
check_eq "$(jq -r .copied "$JO_T/out.json")" "$failed" "rerun copies exactly the failed ones"
if "$RCLONE" -q check "$D" RS:dst/b 2>/dev/null; then ok "rclone check after rerun"; else bad "rclone check after rerun"; fi

if [ "$FAILS" -gt 0 ]; then
	echo "$FAILS check(s) failed"
	exit 1
fi
echo "all slowdown checks passed"
