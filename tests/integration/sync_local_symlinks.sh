#!/usr/bin/env bash
# run_all: asan
# `jfsops sync` between local directories never leaves its roots, and never
# takes a missing side for an empty one:
#  - DST holds a symlink to a directory outside DST: `--delete-dst` deletes
#    DST's extra file but nothing outside, and leaves the link; one warning
#    line per skipped link, a counter in the text and JSON summaries;
#  - SRC holds a symlinked file and a link to /: neither is copied;
#  - a copy whose DST path is a symlink (to a file outside, or a directory
#    on the way) fails (exit 4) instead of writing through or replacing it;
#  - SRC (or DST) /proc/self: the listing does not wander into
#    /proc/self/root (or cwd, fd/N, ...);
#  - SRC given through a symlink is followed (the root is the user's);
#  - a missing SRC is exit 8 with one line; an empty SRC is a valid empty
#    listing (and --delete-dst refuses to delete); a dry run to a DST that
#    does not exist yet plans every copy and creates nothing;
#  - -v does not call the state file a warning.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib/services.sh"
jo_setup
[ -x "$JO_BIN" ] || jo_die "jfsops binary $JO_BIN not found (set JFSOPS_BIN or build first)"
FAILS=0
PASSES=0
ok() { echo "ok   - $*"; PASSES=$((PASSES + 1)); }
bad() { echo "FAIL - $*"; FAILS=$((FAILS + 1)); }
J() { "$JO_BIN" "$@"; }
jv() { python3 -c 'import json,sys; print(json.loads(open(sys.argv[1]).read().splitlines()[-1])[sys.argv[2]])' "$1" "$2"; }
tree_digest() { (cd "$1" && find . -printf '%p %s %y %l\n' | sort && find . -type f -print0 | sort -z | xargs -0 -r cat) | sha256sum; }

S=$JO_T/src D=$JO_T/dst O=$JO_T/outside
mkdir -p "$S/sub" "$D" "$O/deep"
echo one >"$S/a"
echo two >"$S/sub/b"
echo victim >"$O/v1"
echo victim2 >"$O/deep/v2"
echo extra >"$D/extra"
ln -s "$O" "$D/escape"            # the issue's repro: a link to a directory outside DST
ln -s "$O/v1" "$S/lfile"          # a symlinked file in SRC
ln -s / "$S/root"                 # a link to /
outside_before=$(tree_digest "$O")

# ---- 1. --delete-dst with a link to outside in DST
rc=0
J sync --no-state --json --delete-dst "$S" "$D" >"$JO_T/out.json" 2>"$JO_T/err" || rc=$?
cat "$JO_T/err"
[ $rc = 0 ] && ok "sync --delete-dst exits 0" || bad "sync --delete-dst: exit $rc"
[ "$(tree_digest "$O")" = "$outside_before" ] && ok "nothing outside DST changed" || bad "something outside DST changed"
[ -L "$D/escape" ] && [ "$(readlink "$D/escape")" = "$O" ] && ok "the link in DST is left alone" || bad "the link in DST was changed"
[ ! -e "$D/extra" ] && ok "DST's extra file was deleted" || bad "DST's extra file is still there"
[ "$(cat "$D/a")" = one ] && [ "$(cat "$D/sub/b")" = two ] && ok "SRC's files were copied" || bad "SRC's files are missing in DST"
[ ! -e "$D/lfile" ] && [ ! -e "$D/root" ] && ok "SRC's symlinks were not copied" || bad "a symlink of SRC was copied"
[ "$(jv "$JO_T/out.json" links_skipped_src)" = 2 ] && [ "$(jv "$JO_T/out.json" links_skipped_dst)" = 1 ] &&
	ok "JSON summary counts 2 + 1 skipped links" || bad "JSON summary: $(cat "$JO_T/out.json")"
[ "$(grep -c 'skipped symlink' "$JO_T/err")" = 3 ] && ok "one warning line per skipped link" ||
	bad "warnings: $(grep -c 'skipped symlink' "$JO_T/err") lines, want 3"
grep -q 'symlinks skipped 2 src / 1 dst' "$JO_T/err" && ok "the text summary counts the links" || bad "text summary lacks the link counter"
# a rerun: still nothing outside, nothing to do
rc=0
J sync --no-state --json --delete-dst "$S" "$D" >"$JO_T/out.json" 2>/dev/null || rc=$?
[ $rc = 0 ] && [ "$(jv "$JO_T/out.json" copied)" = 0 ] && [ "$(jv "$JO_T/out.json" deleted)" = 0 ] &&
	ok "a rerun has nothing to do" || bad "rerun: exit $rc, $(cat "$JO_T/out.json")"

# ---- 2. a DST path that is a symlink: the copy fails, nothing is written through it
D2=$JO_T/dst2
mkdir -p "$D2"
ln -s "$O/v1" "$D2/a"             # a file SRC has
ln -s "$O/deep" "$D2/sub"         # a directory on the way to sub/b
rc=0
J sync --no-state --json "$S" "$D2" >"$JO_T/out2.json" 2>"$JO_T/err2" || rc=$?
[ $rc = 4 ] && ok "copies onto symlinks fail (exit 4)" || bad "copies onto symlinks: exit $rc"
[ "$(jv "$JO_T/out2.json" failed)" = 2 ] && ok "two copies failed" || bad "failed: $(jv "$JO_T/out2.json" failed)"
grep -q 'symlink' "$JO_T/err2" && ok "the failure says why (symlink)" || bad "no clear failure line: $(cat "$JO_T/err2")"
[ "$(tree_digest "$O")" = "$outside_before" ] && ok "nothing was written outside DST" || bad "a copy wrote outside DST"
[ -L "$D2/a" ] && [ -L "$D2/sub" ] && ok "the links are still links" || bad "a link was replaced"

# ---- 3. /proc/self as SRC or DST
rc=0
timeout 120 "$JO_BIN" sync --no-state --dry-run --json "/proc/self" "$JO_T/procdst" \
	>"$JO_T/proc.out" 2>"$JO_T/proc.err" || rc=$?
[ $rc = 0 ] && ok "sync --dry-run /proc/self exits 0" || bad "sync /proc/self: exit $rc: $(tail -n 2 "$JO_T/proc.err")"
n=$(grep -c '"action"' "$JO_T/proc.out" || true)
listed=$(jv "$JO_T/proc.out" listed_src)
if grep -qE '"key":"(root|cwd|exe)/|/(root|cwd)/' "$JO_T/proc.out"; then
	bad "the /proc/self listing went through root/cwd: $(grep -E '"key":"(root|cwd)/' "$JO_T/proc.out" | head -n 2)"
elif [ "$listed" -ge 50000 ] || [ "$listed" -lt 10 ]; then
	bad "the /proc/self listing has $listed entries"
else
	ok "SRC /proc/self lists $listed entries, none through its links ($n plan lines)"
fi
grep -q 'skipped symlink "root"' "$JO_T/proc.err" && ok "/proc/self/root is reported as a skipped link" ||
	bad "/proc/self/root is not reported"
rc=0
timeout 120 "$JO_BIN" sync --no-state --dry-run --json --delete-dst "$S" "/proc/self" \
	>"$JO_T/proc2.out" 2>"$JO_T/proc2.err" || rc=$?
if grep -qE '"key":"(root|cwd|exe)/|/(root|cwd)/' "$JO_T/proc2.out"; then
	bad "DST /proc/self: the plan goes through root/cwd"
elif [ "$(jv "$JO_T/proc2.out" listed_dst)" -ge 50000 ]; then
	bad "DST /proc/self lists $(jv "$JO_T/proc2.out" listed_dst) entries"
elif [ $rc != 0 ]; then
	bad "DST /proc/self dry run: exit $rc: $(tail -n 2 "$JO_T/proc2.err")"
else
	ok "DST /proc/self: the dry run stays out of root/ and cwd/"
fi

# ---- 4. SRC given through a symlink: the root is the user's, followed once
ln -s "$S" "$JO_T/srclink"
rc=0
J sync --no-state --json "$JO_T/srclink" "$JO_T/dst3" >"$JO_T/out3.json" 2>/dev/null || rc=$?
[ $rc = 0 ] && [ "$(cat "$JO_T/dst3/sub/b")" = two ] && ok "a SRC given through a symlink is synced" ||
	bad "SRC through a symlink: exit $rc"

# ---- 5. missing and empty sides
rc=0
J sync --no-state "$JO_T/nonexistent" "$JO_T/dst4" >"$JO_T/out5" 2>"$JO_T/err5" || rc=$?
[ $rc = 8 ] && ok "a missing SRC exits 8" || bad "missing SRC: exit $rc"
[ "$(wc -l <"$JO_T/err5")" = 1 ] && grep -q 'does not exist' "$JO_T/err5" &&
	ok "one clear line: $(cat "$JO_T/err5")" || bad "missing SRC: stderr: $(cat "$JO_T/err5")"
[ ! -s "$JO_T/out5" ] || bad "missing SRC: something on stdout"
[ ! -e "$JO_T/dst4" ] && ok "a missing SRC creates no DST" || bad "a missing SRC left a new DST directory behind"
rc=0
J sync --no-state --json --delete-dst "$JO_T/nonexistent" "$D" >"$JO_T/out5.json" 2>/dev/null || rc=$?
[ $rc = 8 ] && [ -e "$D/a" ] &&
	ok "a missing SRC with --delete-dst deletes nothing (exit 8)" || bad "missing SRC --delete-dst: exit $rc"
mkdir -p "$JO_T/empty"
rc=0
J sync --no-state --json --delete-dst "$JO_T/empty" "$D" >"$JO_T/out6.json" 2>/dev/null || rc=$?
[ "$(jv "$JO_T/out6.json" listed_src)" = 0 ] && [ "$(jv "$JO_T/out6.json" deleted)" = 0 ] && [ -e "$D/a" ] &&
	[ "$(jv "$JO_T/out6.json" delete_refused)" = True ] &&
	ok "an empty SRC is an empty listing, and deletes nothing (exit $rc)" || bad "empty SRC: exit $rc, $(cat "$JO_T/out6.json")"
rc=0
J sync --no-state --dry-run "$S" "$JO_T/not-yet" >"$JO_T/out7" 2>"$JO_T/err7" || rc=$?
[ $rc = 0 ] && [ "$(grep -c '^copy ' "$JO_T/out7")" = 2 ] && [ ! -e "$JO_T/not-yet" ] &&
	ok "a dry run to a DST not created yet plans 2 copies, creates nothing" || bad "dry run to a new DST: exit $rc, $(cat "$JO_T/out7" "$JO_T/err7")"

# ---- 6. -v: the state file is information, not a warning
rc=0
J sync -v --state "$JO_T/state.db" "$S" "$JO_T/dst5" >/dev/null 2>"$JO_T/err8" || rc=$?
grep -q "state file $JO_T/state.db" "$JO_T/err8" || bad "-v does not name the state file"
if grep 'state file' "$JO_T/err8" | grep -qi warning; then
	bad "-v calls the state file a warning: $(grep 'state file' "$JO_T/err8")"
else
	ok "-v names the state file without a warning"
fi

# ---- 7. an unreadable SRC directory is a permission error (exit 3), not
# rejected credentials (6); run as another user, root reads anything
P=$JO_T/perm
mkdir -p "$P/src/locked" "$P/dst"
echo x >"$P/src/locked/f"
chmod 0755 "$JO_T" "$P" "$P/src"
chmod 0700 "$P/src/locked"
chown 65534:65534 "$P/dst"
for from in "$P/src/locked" "$P/src"; do
	rc=0
	setpriv --reuid=65534 --regid=65534 --clear-groups "$JO_BIN" sync --no-state \
		"$from" "$P/dst" >"$JO_T/out9" 2>"$JO_T/err9" || rc=$?
	if [ $rc = 3 ] && grep -q 'Permission denied' "$JO_T/err9"; then
		ok "an unreadable SRC ($from) is a permission error: exit 3, $(head -n 1 "$JO_T/err9")"
	else
		bad "an unreadable SRC ($from): exit $rc (want 3, 'Permission denied'): $(cat "$JO_T/err9")"
	fi
done

# ---- 8. the progress line's ETA counts the bytes of copies still in flight
# (a small file done first made it hours: its bytes over all the time), and a
# local-only summary names no object-store requests
E=$JO_T/eta
mkdir -p "$E/src"
head -c 1000 /dev/urandom >"$E/src/a-small"
head -c $((40 << 20)) /dev/urandom >"$E/src/b-big"
head -c $((40 << 20)) /dev/urandom >"$E/src/c-big"
rc=0
script -qfec "$(printf '%q ' "$JO_BIN" sync --no-state --bwlimit 20M --transfers 4 "$E/src" "$E/dst")" \
	/dev/null >"$E/tty.log" 2>&1 </dev/null || rc=$?
etas=$(tr '\r' '\n' <"$E/tty.log" | grep -o 'eta [0-9]*s' | grep -o '[0-9]*' || true)
max=$(printf '%s\n' $etas | sort -n | tail -n 1)
if [ $rc = 0 ] && [ -n "$etas" ] && [ "$max" -le 30 ]; then
	ok "the ETA counts bytes in flight: at most ${max}s for a job of about 4s ($(echo $etas | wc -w) progress lines)"
else
	bad "progress ETA: exit $rc, etas '$(echo $etas)' (a 4s job): $(tr '\r' '\n' <"$E/tty.log" | tail -n 3)"
fi
if grep -q 'jfsops sync: listed' "$E/tty.log" && ! grep 'jfsops sync: listed' "$E/tty.log" | grep -q 'requests'; then
	ok "a local-only summary names no object-store requests"
else
	bad "local-only summary: $(grep 'jfsops sync: listed' "$E/tty.log")"
fi

echo "$(basename "$0"): $PASSES passed, $FAILS failed"
[ "$FAILS" = 0 ]
