#!/bin/bash
# term_escape.sh: names from outside reach the terminal escaped, as `ls -b`
# shows them (issue 26, item 9): an object key or a file name with ESC
# sequences, a newline, a BEL, a backslash or invalid UTF-8 in it.
#
# 1. sync between local directories: the --dry-run plan lines on stdout and
#    the -v log lines on stderr show "\033[2J", "\n", "\\"; no raw control
#    byte, one line per key.
# 2. leakcheck on a SQLite volume on file storage: an object under chunks/
#    with such a name (valid UTF-8) is reported (foreign) on stdout escaped,
#    one line; its --json line holds the exact key (jansson escapes).
# 3. errors that quote outside text: `cat` of such a path, a range line
#    naming no file of the volume given to warmup.
# Each output is checked by check_clean: no byte below 0x20 but the line
# ends and tabs, no DEL, no invalid UTF-8. No services.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=../lib/services.sh
. "$HERE/../lib/services.sh"
jo_setup
PY=$JO_VENV/bin/python
# the evil name: ESC [2J (clear screen), a newline, a BEL, a backslash, an
# invalid UTF-8 byte, and a title-setting OSC sequence
EVIL=$(printf 'ev\033[2Jil\nline\a\\x\377\033]0;owned\007.bin')
WANT='ev\033[2Jil\nline\a\\x\377\033]0;owned\a.bin'
# the same without the invalid byte, for leakcheck: jansson refuses invalid
# UTF-8, and --json of a listing with such a key fails (left for another fix)
EVIL8=$(printf 'ev\033[2Jil\nline\a\\x\033]0;owned\007.bin')
WANT8='ev\033[2Jil\nline\a\\x\033]0;owned\a.bin'

# check_clean FILE WHAT: FILE has no raw control byte and is valid UTF-8
check_clean() {
	"$PY" - "$1" "$2" <<'EOF' || jo_die "$2: raw control bytes or invalid UTF-8 in the output: $(od -c "$1" | head -20)"
import sys
data = open(sys.argv[1], "rb").read()
bad = [b for b in data if (b < 0x20 and b not in (0x0a, 0x09)) or b == 0x7f]
try:
    data.decode("utf-8")
except UnicodeDecodeError as e:
    print("invalid UTF-8: %s" % e, file=sys.stderr)
    sys.exit(1)
sys.exit(1 if bad else 0)
EOF
}

# ---------------------------------------------------------------- 1. sync
mkdir -p "$JO_T/src" "$JO_T/dst"
printf 'payload' >"$JO_T/src/$EVIL"
echo plain >"$JO_T/src/plain.txt"
rc=0
"$JO_BIN" sync "$JO_T/src/" "$JO_T/dst/" --dry-run --no-state >"$JO_T/plan.out" 2>"$JO_T/plan.err" || rc=$?
[ $rc = 0 ] || jo_die "sync --dry-run: exit $rc: $(cat "$JO_T/plan.err")"
check_clean "$JO_T/plan.out" "sync --dry-run stdout"
grep -qF "$WANT" "$JO_T/plan.out" || jo_die "sync plan: no escaped key: $(cat "$JO_T/plan.out")"
[ "$(grep -c . "$JO_T/plan.out")" = 2 ] || jo_die "sync plan: not one line per key: $(cat "$JO_T/plan.out")"
rc=0
"$JO_BIN" sync "$JO_T/src/" "$JO_T/dst/" -v --no-state >"$JO_T/v.out" 2>"$JO_T/v.err" || rc=$?
[ $rc = 0 ] || jo_die "sync -v: exit $rc: $(cat "$JO_T/v.err")"
check_clean "$JO_T/v.err" "sync -v stderr"
grep -qF "copied \"$WANT\"" "$JO_T/v.err" || jo_die "sync -v: no escaped key: $(cat "$JO_T/v.err")"
cmp -s "$JO_T/src/$EVIL" "$JO_T/dst/$EVIL" || jo_die "sync did not copy the file under its own name"
jo_log "sync: $(grep -F "$WANT" "$JO_T/plan.out")"

# ---------------------------------------------------------------- 2. leakcheck
META=sqlite3://$JO_T/meta.db
jfs_format "$META" "$JO_T/objs" escvol --trash-days 0
mkdir -p "$JO_T/in"
head -c 100000 /dev/urandom >"$JO_T/in/f.bin"
jfs_sync_in "$JO_T/in" "$META"
d=$(find "$JO_T/objs/escvol/chunks" -type f -name '*_0_*' | head -1)
[ -n "$d" ] || jo_die "no block object under $JO_T/objs/escvol/chunks"
printf 'x' >"$(dirname "$d")/$EVIL8"
rc=0
"$JO_BIN" leakcheck "$META" --min-age 0s >"$JO_T/lk.out" 2>"$JO_T/lk.err" || rc=$?
[ $rc = 0 ] || [ $rc = 1 ] || jo_die "leakcheck: exit $rc: $(cat "$JO_T/lk.err")"
check_clean "$JO_T/lk.out" "leakcheck stdout"
check_clean "$JO_T/lk.err" "leakcheck stderr"
grep -F "$WANT8" "$JO_T/lk.out" | grep -q '^foreign' || jo_die "leakcheck: no escaped foreign key: $(cat "$JO_T/lk.out")"
[ "$(grep -c . "$JO_T/lk.out")" = 1 ] || jo_die "leakcheck: not one line: $(cat "$JO_T/lk.out")"
"$JO_BIN" leakcheck "$META" --min-age 0s --json >"$JO_T/lk.json" 2>"$JO_T/lkj.err" || true
"$PY" - "$JO_T/lk.json" "$EVIL8" <<'EOF' || jo_die "leakcheck --json: the key is not exact: $(cat "$JO_T/lk.json" "$JO_T/lkj.err")"
import json, sys
keys = [json.loads(l).get("key", "") for l in open(sys.argv[1])]
sys.exit(0 if any(k.endswith("/" + sys.argv[2]) for k in keys) else 1)
EOF
jo_log "leakcheck: $(cat "$JO_T/lk.out")"

# ---------------------------------------------------------------- 3. errors
rc=0
"$JO_BIN" cat "$META" "/$EVIL" >/dev/null 2>"$JO_T/cat.err" || rc=$?
[ $rc = 8 ] || jo_die "cat of a missing evil path: exit $rc: $(cat "$JO_T/cat.err")"
check_clean "$JO_T/cat.err" "cat's error"
grep -qF "$WANT" "$JO_T/cat.err" || jo_die "cat's error does not name the path escaped: $(cat "$JO_T/cat.err")"
rc=0
printf 'f.bin 0 12\033[2J\a\n' | "$JO_BIN" warmup "$META" --dry-run >/dev/null 2>"$JO_T/wu.err" || rc=$?
[ $rc = 8 ] || jo_die "warmup of a line naming no file: exit $rc: $(cat "$JO_T/wu.err")"
check_clean "$JO_T/wu.err" "warmup's error"
grep -qF '12\033[2J\a' "$JO_T/wu.err" || jo_die "warmup's error does not quote the line escaped: $(cat "$JO_T/wu.err")"
[ "$(grep -c . "$JO_T/wu.err")" = 1 ] || jo_die "warmup's error is not one line: $(cat "$JO_T/wu.err")"
jo_log "errors: $(cat "$JO_T/cat.err") / $(cat "$JO_T/wu.err")"
echo "ok term_escape"
