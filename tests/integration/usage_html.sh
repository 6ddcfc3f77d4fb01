#!/usr/bin/env bash
# jfsops usage --html: the page opened in headless Chromium (Debian's
# chromium). A SQLite volume made through a real mount, names with HTML
# metacharacters and UTF-8, two reports (--since for growth). Checks on the
# DOM Chromium builds: one tree row per directory of the --json report with
# the same bytes/files/dirs, age bars whose segments add up to the bytes, the
# totals, the growth column, the access-time note, no script and no external
# reference; and the screenshot is not blank. The page is written under a
# temporary name and renamed: a symlink planted at its path is replaced, its
# target untouched, and the mode is 0666 less the umask.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib/services.sh"
jo_setup
CHROMIUM=${CHROMIUM:-chromium}
command -v "$CHROMIUM" >/dev/null || jo_die "$CHROMIUM is missing: run bash tests/install.sh"
CHECK="python3 $here/usage_check.py"
meta="sqlite3://$JO_T/h.db"
mnt=$JO_T/mnt
jfs_format "$meta" "$JO_T/bucket" usage-html --trash-days 1
jfs_mount "$meta" "$mnt"
mkdir -p "$mnt/a <b>&\"'/x" "$mnt/é/ü" "$mnt/c"
head -c 300000 /dev/urandom >"$mnt/a <b>&\"'/x/f"
head -c 5000 /dev/urandom >"$mnt/é/ü/g"
touch -m -d '400 days ago' "$mnt/é/ü/g"
head -c 70000 /dev/urandom >"$mnt/c/h"
sync
"$JO_BIN" usage "$meta" --json >"$JO_T/r1.json" || jo_die "usage --json failed"
head -c 1000000 /dev/urandom >"$mnt/c/more"
sync

page=$JO_T/out/usage.html
mkdir -p "$JO_T/out"
echo "victim" >"$JO_T/victim"
ln -s "$JO_T/victim" "$page"
(umask 027 && "$JO_BIN" usage "$meta" --since "$JO_T/r1.json" --html "$page" --json >"$JO_T/r2.json") ||
	jo_die "usage --html failed"
[ "$(cat "$JO_T/victim")" = victim ] || jo_die "the symlink's target was written"
[ -f "$page" ] && [ ! -L "$page" ] || jo_die "the page is not a regular file at its path"
[ "$(stat -c %a "$page")" = 640 ] || jo_die "page mode $(stat -c %a "$page"), want 640 (umask 027)"
[ "$(ls -A "$JO_T/out" | wc -l)" = 1 ] || jo_die "temp files left beside the page: $(ls -A "$JO_T/out")"

chrome() {
	"$CHROMIUM" --headless --no-sandbox --disable-gpu --disable-background-networking \
		--disable-component-update --disable-sync --no-first-run \
		--user-data-dir="$(mktemp -d "$JO_T/chrome.XXXXXX")" "$@" 2>>"$JO_T/chrome.log"
}
chrome --dump-dom "file://$page" >"$JO_T/dom.html" || { jo_tail "$JO_T/chrome.log"; jo_die "chromium --dump-dom failed"; }
chrome --window-size=1400,900 --screenshot="$JO_T/shot.png" "file://$page" >/dev/null ||
	{ jo_tail "$JO_T/chrome.log"; jo_die "chromium --screenshot failed"; }
$CHECK html "$JO_T/dom.html" "$JO_T/r2.json" "$JO_T/shot.png" || jo_die "the page Chromium rendered is wrong"
grep -q 'id="atime-note"' "$JO_T/dom.html" || jo_die "no access-time note"
grep -q '<th>Growth</th>' "$JO_T/dom.html" || jo_die "no growth column"
grep -q 'data-path="/c">.*data-growth="1000000"' "$JO_T/dom.html" || jo_die "no growth of 1000000 bytes for /c"
grep -q 'a &lt;b&gt;&amp;' "$JO_T/dom.html" || jo_die "the HTML name is not escaped as text"
grep -q '/é/ü' "$JO_T/dom.html" || jo_die "UTF-8 path missing"
echo "usage_html: ok"
