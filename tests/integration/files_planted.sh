#!/usr/bin/env bash
# files_planted.sh: root's jfsops beside another user (issue 26, items 4 and
# 8). In a sticky world-writable directory (like /tmp) user nobody plants
# symlinks to a victim file of root's (known content) at every name the old
# code wrote (F.tmp, Q.tmp, PATH.tmp.<pid>, FILE.tmp) and at the targets
# themselves, and a symlink, a FIFO or a file of its own at the files that
# are appended to or reopened (audit trails, the sync state and its -wal).
# Then root runs each output flag: leakcheck --out, --metrics-file (gc,
# leakcheck, sync), leakcheck --delete-from --quarantine --audit, gc and
# compact --audit, sync --state, warmup --follow --state. The victim never
# changes; each command either writes its real target (a symlink there is
# replaced by root's regular file, no temp file left) or refuses an appended
# file with one line that names it. Modes: the quarantine archive and the
# sync state 0600 under umask 022 and 000, reports and audits 0644 under 022
# (0666 under 000). A SQLite + file-storage volume and one juicefs mount.
# Every check runs (the failures are counted), so a run against an old
# binary lists each hole.
# Env: JFSOPS_BIN, JO_PORT_BASE (juicefs metrics BASE+30..50).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
export JO_PORT_BASE=${JO_PORT_BASE:-8600}
. "$here/../lib/services.sh"
jo_setup
B=$JO_BIN
umask 022
[ "$(id -u)" = 0 ] || jo_die "files_planted: run as root (it plants files as user nobody)"
command -v setpriv >/dev/null || jo_die "files_planted: setpriv (util-linux) is needed"
as_nobody() { setpriv --reuid=65534 --regid=65534 --clear-groups "$@"; }

chmod 0711 "$JO_T" # user nobody reaches the sticky directory below
D=$JO_T/pub
mkdir "$D"
chmod 1777 "$D"
VD=$JO_T/victim
mkdir "$VD"
V=$VD/file   # a victim with content
VE=$VD/empty # and an empty one (SQLite writes a database into an empty file)
reset_victims() {
	printf 'victim-data: root only\n' >"$V"
	: >"$VE"
	chmod 0644 "$V" "$VE"
}
reset_victims
vsum() { sha256sum "$V" "$VE" | awk '{ printf "%s ", $1 }'; }
V0=$(vsum)

fails=0
bad() {
	echo "FAIL: $*" >&2
	fails=$((fails + 1))
}
# plant TARGET NAME: user nobody makes the symlink NAME -> TARGET
plant() { as_nobody ln -s "$1" "$2" || jo_die "cannot plant '$2' as nobody"; }
# victim_ok WHAT: the victim files are as they were (restored after a failure)
victim_ok() {
	if [ "$(vsum)" != "$V0" ]; then
		bad "$1: the victim file was written through a planted symlink"
		reset_victims
	fi
}
# root_file WHAT PATH MODE: PATH is a regular file (not a link) of root's with MODE
root_file() {
	if [ -L "$2" ] || [ ! -f "$2" ]; then
		bad "$1: '$2' is not a regular file: $(ls -l "$2" 2>&1)"
	elif [ "$(stat -c '%u %a' "$2")" != "0 $3" ]; then
		bad "$1: '$2' has owner/mode $(stat -c '%u %a' "$2"), want 0 $3"
	fi
}
# no_temps WHAT: no temporary file left in the sticky directory
no_temps() {
	local left
	left=$(find "$D" -mindepth 1 -maxdepth 1 -name '.*' -printf '%f ')
	[ -z "$left" ] || bad "$1: temporary files left behind: $left"
}
# refused WHAT RC ERRFILE PATTERN: a failure exit, and the reason is one stderr
# line matching PATTERN (leakcheck adds its INCOMPLETE summary after it)
refused() {
	if [ "$2" = 0 ] || [ "$2" = 1 ] || [ "$2" -ge 124 ]; then
		bad "$1: exit $2, want a refusal: $(tail -n 2 "$3" | tr '\n' ' ')"
	elif [ "$(grep -c refusing "$3")" != 1 ] || ! grep -q -- "$4" "$3"; then
		bad "$1: want one line matching '$4' on stderr, got: $(tr '\n' '|' <"$3")"
	fi
}

META="sqlite3://$JO_T/meta.db"
jfs_format "$META" "$JO_T/bucket" plvol --trash-days 0
mkdir -p "$JO_T/src/a" "$JO_T/syncsrc" "$JO_T/syncdst"
for i in 1 2; do head -c $((i * 300000)) /dev/urandom >"$JO_T/src/a/f$i"; done
echo hello >"$JO_T/syncsrc/k"
jfs_sync_in "$JO_T/src" "$META"

# ---------------------------------------------------------------- leakcheck --out
F=$D/leaks.jsonl
plant "$V" "$F.tmp"
plant "$V" "$F"
rc=0
"$B" leakcheck "$META" --min-age 0s --out "$F" >"$JO_T/lc.out" 2>"$JO_T/lc.err" || rc=$?
[ $rc = 0 ] || [ $rc = 1 ] || bad "leakcheck --out: exit $rc: $(tail -n 2 "$JO_T/lc.err")"
victim_ok "leakcheck --out (F and F.tmp planted)"
root_file "leakcheck --out" "$F" 644
no_temps "leakcheck --out"

# --metrics-file: the old temp name was PATH.tmp.<pid>; the subshell's pid is
# the one jfsops has after exec, so the link waits at exactly that name
# mx CMD NAME ARGS...: run jfsops with --metrics-file $D/NAME.prom planted
mx() {
	local what=$1 m=$D/$2.prom rc=0
	shift 2
	plant "$V" "$m"
	(
		plant "$V" "$m.tmp.$BASHPID"
		exec "$B" "$@" --metrics-file "$m"
	) >"$JO_T/mx.out" 2>"$JO_T/mx.err" || rc=$?
	[ $rc = 0 ] || [ $rc = 1 ] || bad "$what --metrics-file: exit $rc: $(tail -n 2 "$JO_T/mx.err")"
	victim_ok "$what --metrics-file (PATH and PATH.tmp.<pid> planted)"
	root_file "$what --metrics-file" "$m" 644
	grep -q '^# TYPE jfsops_' "$m" 2>/dev/null || bad "$what --metrics-file: no metrics in '$m'"
	no_temps "$what --metrics-file"
}
mx leakcheck lc leakcheck "$META" --min-age 0s --out "$JO_T/l2.jsonl"
mx gc gc gc "$META"
mx sync sync sync -q --no-state "$JO_T/syncsrc" "$JO_T/syncdst"

# ---------------------------------------------------------------- leakcheck --delete-from
# one candidate above the slice counter: re-checked and kept (nothing is
# deleted), but the quarantine archive and the audit line are written
CANDS=$JO_T/cands.jsonl
echo '{"type":"leaked","key":"plvol/chunks/999/999999/999999999_0_4096","size":4096,"mtime":1}' >"$CANDS"
del() { "$B" leakcheck "$META" --delete-from "$CANDS" --min-age 0s "$@"; }

plant "$V" "$D/audit-link.jsonl"
rc=0
del --audit "$D/audit-link.jsonl" --quarantine "$D/qa.tar.zst" >/dev/null 2>"$JO_T/d1.err" || rc=$?
refused "--delete-from --audit SYMLINK" $rc "$JO_T/d1.err" "refusing.*audit-link.jsonl.*symbolic link"
victim_ok "--delete-from --audit SYMLINK"
[ ! -e "$D/qa.tar.zst" ] || bad "--delete-from --audit SYMLINK: the quarantine was written all the same"

as_nobody sh -c "echo theirs >'$D/audit-nobody.jsonl'"
rc=0
del --audit "$D/audit-nobody.jsonl" >/dev/null 2>"$JO_T/d2.err" || rc=$?
refused "--delete-from --audit (nobody's file)" $rc "$JO_T/d2.err" "belongs to uid 65534"
[ "$(cat "$D/audit-nobody.jsonl")" = theirs ] || bad "--delete-from appended to nobody's audit file"

as_nobody mkfifo -m 0666 "$D/audit.fifo"
rc=0
timeout 60 "$B" leakcheck "$META" --delete-from "$CANDS" --min-age 0s --audit "$D/audit.fifo" \
	>/dev/null 2>"$JO_T/d3.err" || rc=$?
refused "--delete-from --audit FIFO" $rc "$JO_T/d3.err" "audit.fifo.*FIFO"

for um in 022 000; do
	Q=$D/q$um.tar.zst A=$D/audit$um.jsonl
	plant "$V" "$Q.tmp"
	rc=0
	(umask $um && del --quarantine "$Q" --audit "$A") >/dev/null 2>"$JO_T/d4.err" || rc=$?
	[ $rc = 0 ] || bad "--delete-from --quarantine (umask $um): exit $rc: $(tail -n 2 "$JO_T/d4.err")"
	victim_ok "--delete-from --quarantine (Q.tmp planted, umask $um)"
	root_file "quarantine archive (umask $um)" "$Q" 600
	root_file "--delete-from audit (umask $um)" "$A" "$([ $um = 022 ] && echo 644 || echo 666)"
	grep -q '"result":"kept' "$A" 2>/dev/null || bad "--delete-from (umask $um): no audit line in '$A'"
	no_temps "--delete-from --quarantine (umask $um)"
done

# ---------------------------------------------------------------- gc / compact --audit
plant "$V" "$D/gc-audit.jsonl"
rc=0
"$B" gc "$META" --audit "$D/gc-audit.jsonl" >/dev/null 2>"$JO_T/g1.err" || rc=$?
refused "gc --audit SYMLINK" $rc "$JO_T/g1.err" "gc-audit.jsonl.*symbolic link"
victim_ok "gc --audit SYMLINK"
rc=0
"$B" gc "$META" --audit "$D/gc-audit-ok.jsonl" >/dev/null 2>"$JO_T/g2.err" || rc=$?
[ $rc = 0 ] || bad "gc --audit FILE: exit $rc: $(tail -n 2 "$JO_T/g2.err")"
root_file "gc --audit" "$D/gc-audit-ok.jsonl" 644

plant "$V" "$D/compact-audit.jsonl"
rc=0
"$B" compact "$META" --apply -q --audit "$D/compact-audit.jsonl" >/dev/null 2>"$JO_T/c1.err" || rc=$?
refused "compact --audit SYMLINK" $rc "$JO_T/c1.err" "compact-audit.jsonl.*symbolic link"
victim_ok "compact --audit SYMLINK"

# ---------------------------------------------------------------- sync --state
plant "$VE" "$D/state.db"
rc=0
"$B" sync -q --state "$D/state.db" "$JO_T/syncsrc" "$JO_T/syncdst" >/dev/null 2>"$JO_T/s1.err" || rc=$?
refused "sync --state SYMLINK" $rc "$JO_T/s1.err" "state.db.*symbolic link"
victim_ok "sync --state SYMLINK (to an empty file)"

plant "$V" "$D/state2.db-wal"
rc=0
"$B" sync -q --state "$D/state2.db" "$JO_T/syncsrc" "$JO_T/syncdst" >/dev/null 2>"$JO_T/s2.err" || rc=$?
refused "sync --state (STATE-wal planted)" $rc "$JO_T/s2.err" "state2.db-wal.*symbolic link"
victim_ok "sync --state (STATE-wal planted)"
[ ! -e "$D/state2.db" ] || bad "sync --state (STATE-wal planted): the refusal left a state file"

as_nobody sh -c ": >'$D/state3.db'"
rc=0
"$B" sync -q --state "$D/state3.db" "$JO_T/syncsrc" "$JO_T/syncdst" >/dev/null 2>"$JO_T/s3.err" || rc=$?
refused "sync --state (nobody's file)" $rc "$JO_T/s3.err" "belongs to uid 65534"
[ ! -s "$D/state3.db" ] || bad "sync --state wrote into nobody's file"

for um in 022 000; do
	rc=0
	(umask $um && "$B" sync -q --state "$D/ok$um.db" "$JO_T/syncsrc" "$JO_T/syncdst") \
		>/dev/null 2>"$JO_T/s4.err" || rc=$?
	[ $rc = 0 ] || bad "sync --state (umask $um): exit $rc: $(tail -n 2 "$JO_T/s4.err")"
	root_file "sync state (umask $um)" "$D/ok$um.db" 600
done

# ---------------------------------------------------------------- warmup --follow --state
MP=$JO_T/mnt
jfs_mount "$META" "$MP"
printf 'a/f1 0 4096\n# batch b0\n' >"$JO_T/stream"
follow() {
	"$B" warmup "$META" --mount "$MP" --follow --control "$JO_T/ctl.sock" --ranges "$JO_T/stream" \
		--state "$1"
}
W=$D/follow.json
plant "$V" "$W.tmp"
follow "$W" >"$JO_T/w.out" 2>"$JO_T/w.err" &
FP=$!
for i in $(seq 1 200); do [ -S "$JO_T/ctl.sock" ] && break; sleep 0.05; done
[ -S "$JO_T/ctl.sock" ] || bad "warmup --follow: no control socket: $(tail -n 2 "$JO_T/w.err")"
for i in $(seq 1 200); do
	"$B" warmup --control "$JO_T/ctl.sock" --status b0 >/dev/null 2>&1 && break
	sleep 0.05
done
"$B" warmup --control "$JO_T/ctl.sock" --done b0 >/dev/null 2>&1 || bad "warmup --done b0 failed"
for i in $(seq 1 600); do kill -0 $FP 2>/dev/null || break; sleep 0.1; done
kill -0 $FP 2>/dev/null && { kill -TERM $FP; bad "warmup --follow did not end after the last batch"; }
rc=0
wait $FP || rc=$?
[ $rc = 0 ] || bad "warmup --follow --state: exit $rc: $(tail -n 2 "$JO_T/w.err")"
victim_ok "warmup --follow --state (FILE.tmp planted)"
root_file "warmup --follow --state" "$W" 644
grep -q '"done":"b0"' "$W" 2>/dev/null || bad "warmup --follow: the state file does not say b0: $(cat "$W" 2>&1)"
no_temps "warmup --follow --state"
# the state is read back and rewritten: a symlink there is refused at once
plant "$V" "$D/follow2.json"
rc=0
timeout 60 bash -c "$(declare -f follow); B='$B' META='$META' MP='$MP' JO_T='$JO_T' follow '$D/follow2.json'" \
	>/dev/null 2>"$JO_T/w2.err" || rc=$?
refused "warmup --follow --state SYMLINK" $rc "$JO_T/w2.err" "follow2.json.*symbolic link"
victim_ok "warmup --follow --state SYMLINK"
jfs_umount "$MP"

if [ "$fails" -gt 0 ]; then
	jo_die "files_planted: $fails check(s) failed"
fi
echo "files_planted: ok"
