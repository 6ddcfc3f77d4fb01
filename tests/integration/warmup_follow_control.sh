#!/bin/bash
# warmup_follow_control.sh: the control channel of `jfsops warmup --follow`
# obeys its owner only (issue 26, item 5). root runs the pipeline against a
# real mount (SQLite volume on file storage, juicefs mount); user nobody
# (setpriv, uid 65534) tries to steer it. $JO_T/pub is a sticky, world-
# writable directory of root's, as /tmp is.
#
# 1. --control refused, exit 2, one line naming why: a FIFO of nobody's,
#    world-writable (in pub); a FIFO of root's that others may write; a
#    symbolic link to root's own good FIFO; a directory others can write
#    without the sticky bit; a directory of nobody's.
# 2. Under umask 000 the socket is mode 0600, root's: nobody cannot connect;
#    made 0666 by hand, nobody's connection is refused by SO_PEERCRED (an
#    error reply, a line on the pipeline's stderr) and its 'done' has no
#    effect: the batch is not done, nothing is evicted.
# 3. The client side: root's --done/--status refuse a socket another user
#    listens on (that listener receives nothing) and a symbolic link.
# 4. The owner's own control still works: a root FIFO (mode 0644) takes
#    'done' lines; root's --status and --done on the socket; the pipeline
#    ends with exit 0 after the last batch is done.
#
# Env: JFSOPS_BIN, JO_PORT_BASE (juicefs metrics BASE+30..50).
. "$(dirname "$0")/lib/init.sh"
[ "$(id -u)" = 0 ] || jo_die "warmup_follow_control.sh runs as root (it acts as user nobody too)"
command -v setpriv >/dev/null || jo_die "setpriv (util-linux) is missing"
AS_NOBODY=(setpriv --reuid=65534 --regid=65534 --clear-groups)
PY=$JO_VENV/bin/python

# wait_b1 OUT PID WHAT ERR: wait (up to 10 s) for the follow pipeline PID
# to print batch b1 into OUT; it must not end before (WHAT names it, ERR
# holds its stderr).
wait_b1() {
	local i
	for i in $(seq 1 200); do
		grep -q '"type":"batch","batch":"b1"' "$1" && return 0
		kill -0 "$2" 2>/dev/null || jo_die "$3 ended: $(cat "$4")"
		sleep 0.05
	done
}

META=sqlite3://$JO_T/meta.db
jfs_format "$META" "$JO_T/objs" ctlvol --trash-days 0 --block-size 256K
MP=$JO_T/mnt
jfs_mount "$META" "$MP" --free-space-ratio 0
head -c 600000 /dev/urandom >"$MP/f.bin"
sync
# nobody may pass through $JO_T into pub, and nowhere else
chmod 711 "$JO_T"
PUB=$JO_T/pub
mkdir -m 1777 "$PUB"
"${AS_NOBODY[@]}" test -x "$JO_BIN" || jo_die "user nobody cannot run $JO_BIN"

# the batch stream: two batches of one block each (a regular file: the
# pipeline ends once the consumer passed b1)
printf 'f.bin 0 1000\n# batch b0\nf.bin 300000 1000\n# batch b1\n' >"$JO_T/stream"
FOLLOW=("$JO_BIN" warmup "$META" --mount "$MP" --follow --evict-done --ranges "$JO_T/stream")

# refused WHAT CONTROL REGEX: the pipeline refuses --control CONTROL at once
# (exit 2, one line matching REGEX), and nothing is warmed
refused() {
	local what=$1 ctl=$2 re=$3 rc=0
	timeout 30 "${FOLLOW[@]}" --control "$ctl" >"$JO_T/ref.out" 2>"$JO_T/ref.err" || rc=$?
	[ $rc = 2 ] || jo_die "$what: exit $rc, want 2 (refused): $(cat "$JO_T/ref.err")"
	[ "$(wc -l <"$JO_T/ref.err")" = 1 ] || jo_die "$what: not one line: $(cat "$JO_T/ref.err")"
	grep -qE "$re" "$JO_T/ref.err" || jo_die "$what: '$(cat "$JO_T/ref.err")' does not match /$re/"
	! grep -q '"type":"admit"' "$JO_T/ref.out" || jo_die "$what: the pipeline ran"
	jo_log "refused, $what: $(cat "$JO_T/ref.err")"
}

# ---------------------------------------------------------------- 1. refused channels
"${AS_NOBODY[@]}" mkfifo -m 666 "$PUB/ctl-a"
[ "$(stat -c %U:%a "$PUB/ctl-a")" = nobody:666 ] || jo_die "nobody's FIFO: $(stat -c %U:%a "$PUB/ctl-a")"
refused "a world-writable FIFO of nobody's" "$PUB/ctl-a" "belongs to uid 65534"
mkfifo -m 622 "$JO_T/ctl-w"
chmod 622 "$JO_T/ctl-w"
refused "a FIFO of root's that others can write" "$JO_T/ctl-w" "writable by others"
mkfifo -m 600 "$JO_T/ctl-ok"
ln -s "$JO_T/ctl-ok" "$PUB/ctl-link"
refused "a symbolic link to root's FIFO" "$PUB/ctl-link" "symbolic link"
mkdir -m 777 "$JO_T/open"
chmod 777 "$JO_T/open"
refused "a directory others can write, not sticky" "$JO_T/open/ctl.sock" "writable by others.*no sticky"
[ ! -e "$JO_T/open/ctl.sock" ] || jo_die "a socket was made in the open directory"
mkdir "$JO_T/nob"
chown nobody "$JO_T/nob"
refused "a directory of nobody's" "$JO_T/nob/ctl.sock" "belongs to uid 65534"
[ ! -e "$JO_T/nob/ctl.sock" ] || jo_die "a socket was made in nobody's directory"

# ---------------------------------------------------------------- 2. socket, umask 000
SOCK=$PUB/ctl.sock
: >"$JO_T/out2.jsonl"
(
	umask 000
	exec "${FOLLOW[@]}" --control "$SOCK"
) >"$JO_T/out2.jsonl" 2>"$JO_T/err2" &
FP=$!
wait_b1 "$JO_T/out2.jsonl" $FP "the pipeline" "$JO_T/err2"
grep -q '"type":"batch","batch":"b0"' "$JO_T/out2.jsonl" || jo_die "b0 never ready: $(cat "$JO_T/out2.jsonl")"
[ -S "$SOCK" ] || jo_die "no socket at $SOCK"
mode=$(stat -c '%U %a' "$SOCK")
[ "$mode" = "root 600" ] || jo_die "the control socket is '$mode' under umask 000, want 'root 600'"
jo_log "socket under umask 000: $mode"
st() { "$JO_BIN" warmup --control "$SOCK" --status "$1" 2>&1 || true; }
st b0 | grep -q '"state":"ready"' || jo_die "b0 not ready: $(st b0)"
# nobody, through the file system: no permission
rc=0
"${AS_NOBODY[@]}" "$JO_BIN" warmup --control "$SOCK" --done b0 >"$JO_T/nb.out" 2>"$JO_T/nb.err" || rc=$?
[ $rc != 0 ] || jo_die "nobody's --done b0 succeeded: $(cat "$JO_T/nb.out")"
grep -q 'Permission denied' "$JO_T/nb.err" || jo_die "nobody's --done: $(cat "$JO_T/nb.err")"
st b0 | grep -q '"state":"ready"' || jo_die "after nobody's --done, b0 is: $(st b0)"
# nobody, through a socket made world-writable by hand: SO_PEERCRED
chmod 666 "$SOCK"
rc=0
"${AS_NOBODY[@]}" "$JO_BIN" warmup --control "$SOCK" --done b0 >"$JO_T/nb.out" 2>"$JO_T/nb.err" || rc=$?
[ $rc != 0 ] || jo_die "nobody's --done b0 on a 0666 socket succeeded: $(cat "$JO_T/nb.out")"
grep -q 'permission denied' "$JO_T/nb.out" || jo_die "nobody got no refusal: $(cat "$JO_T/nb.out" "$JO_T/nb.err")"
# a raw client that sends and closes at once (no reply read)
"${AS_NOBODY[@]}" "$PY" -c '
import socket, sys
s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])
try:
    s.sendall(b"done b1\ndone b0\n")  # the pipeline may have closed already
except OSError:
    pass
s.close()
' "$SOCK" || jo_die "nobody could not connect to the 0666 socket"
sleep 0.5
grep -q 'refused a control connection from uid 65534' "$JO_T/err2" ||
	jo_die "no refusal logged: $(cat "$JO_T/err2")"
st b0 | grep -q '"state":"ready"' || jo_die "after nobody's connections, b0 is: $(st b0)"
! grep -q '"type":"done"' "$JO_T/out2.jsonl" || jo_die "a batch was marked done: $(grep done "$JO_T/out2.jsonl")"
! grep -q '"type":"evict"' "$JO_T/out2.jsonl" || jo_die "something was evicted"
kill -0 $FP 2>/dev/null || jo_die "the pipeline ended after nobody's messages: $(cat "$JO_T/err2")"
chmod 600 "$SOCK"
jo_log "nobody's connections: no permission at 0600; refused by SO_PEERCRED at 0666; nothing done"

# ---------------------------------------------------------------- 3. the client side
"${AS_NOBODY[@]}" "$PY" -c '
import os, socket, sys, time
s = socket.socket(socket.AF_UNIX); s.bind(sys.argv[1]); s.listen(4); s.settimeout(8)
out = open(sys.argv[2], "wb")
try:
    while True:
        c, _ = s.accept(); c.settimeout(2)
        try:
            out.write(c.recv(4096)); out.flush()
            c.sendall(b"{\"type\":\"status\",\"state\":\"ready\",\"ready\":true,\"ok\":true}\n")
        except OSError:
            pass
        c.close()
except socket.timeout:
    pass
' "$PUB/evil.sock" "$PUB/evil.got" &
EV=$!
for i in $(seq 1 100); do [ -S "$PUB/evil.sock" ] && break; sleep 0.05; done
[ -S "$PUB/evil.sock" ] || jo_die "nobody's listener did not start"
for verb in done status; do
	rc=0
	"$JO_BIN" warmup --control "$PUB/evil.sock" --$verb b0 >"$JO_T/ev.out" 2>"$JO_T/ev.err" || rc=$?
	[ $rc = 2 ] || jo_die "root's --$verb to nobody's socket: exit $rc, want 2: $(cat "$JO_T/ev.out" "$JO_T/ev.err")"
	grep -q 'uid 65534' "$JO_T/ev.err" || jo_die "root's --$verb to nobody's socket: $(cat "$JO_T/ev.err")"
done
"${AS_NOBODY[@]}" ln -s "$SOCK" "$PUB/link.sock"
rc=0
"$JO_BIN" warmup --control "$PUB/link.sock" --status b0 >"$JO_T/ev.out" 2>"$JO_T/ev.err" || rc=$?
[ $rc = 2 ] && grep -q 'symbolic link' "$JO_T/ev.err" ||
	jo_die "root's --status through nobody's link: exit $rc: $(cat "$JO_T/ev.out" "$JO_T/ev.err")"
kill $EV 2>/dev/null || true
wait $EV 2>/dev/null || true
[ ! -s "$PUB/evil.got" ] || jo_die "nobody's listener received: $(cat "$PUB/evil.got")"
jo_log "client: refused nobody's listener (it received nothing) and a symbolic link"

# ---------------------------------------------------------------- 4. the owner
"$JO_BIN" warmup --control "$SOCK" --status b0 >"$JO_T/st.out" || jo_die "root's --status b0 failed: $(cat "$JO_T/st.out")"
grep -q '"ready":true' "$JO_T/st.out" || jo_die "root's --status b0: $(cat "$JO_T/st.out")"
"$JO_BIN" warmup --control "$SOCK" --done b0 >"$JO_T/d.out" || jo_die "root's --done b0 failed: $(cat "$JO_T/d.out")"
grep -q '"ok":true' "$JO_T/d.out" || jo_die "root's --done b0: $(cat "$JO_T/d.out")"
st b0 | grep -q '"state":"done"' || jo_die "b0 not done after root's --done: $(st b0)"
# b1 is done once it is ready (marked done earlier it never counts as ready)
for _ in $(seq 1 100); do
	"$JO_BIN" warmup --control "$SOCK" --status b1 2>/dev/null | grep -q '"ready":true' && break
	sleep 0.1
done
"$JO_BIN" warmup --control "$SOCK" --done b1 >/dev/null || jo_die "root's --done b1 failed"
rc=0
wait $FP || rc=$?
[ $rc = 0 ] || jo_die "the pipeline: exit $rc, want 0: $(cat "$JO_T/err2")"
[ ! -e "$SOCK" ] || jo_die "the control socket was left behind"
grep -q '"type":"summary",.*"batches":2,"ready":2,.*"failed":0' "$JO_T/out2.jsonl" || jo_die "summary: $(tail -1 "$JO_T/out2.jsonl")"
# a root FIFO made with the usual umask (0644: others may read, not write)
mkfifo "$JO_T/ctl4"
: >"$JO_T/out4.jsonl"
"${FOLLOW[@]}" --control "$JO_T/ctl4" >"$JO_T/out4.jsonl" 2>"$JO_T/err4" &
FP=$!
wait_b1 "$JO_T/out4.jsonl" $FP "the FIFO pipeline" "$JO_T/err4"
"$JO_BIN" warmup --control "$JO_T/ctl4" --done b0 || jo_die "--done b0 through root's FIFO failed"
echo "done b1" >"$JO_T/ctl4"
rc=0
timeout 30 tail --pid=$FP -f /dev/null || true
wait $FP || rc=$?
[ $rc = 0 ] || jo_die "the FIFO pipeline: exit $rc, want 0: $(cat "$JO_T/err4")"
grep -q '"type":"done","batch":"b1"' "$JO_T/out4.jsonl" || jo_die "FIFO: $(cat "$JO_T/out4.jsonl")"
jo_log "the owner's --status/--done on the socket and 'done' lines on a 0644 FIFO work"
jfs_umount "$MP"
echo "ok warmup_follow_control"
