#!/usr/bin/env bash
# jfsops lance against pylance: datasets written by pylance (legacy, 2.0-2.3,
# both manifest naming schemes; appends, deletes, added columns; int, float,
# string, binary, blob, vector, struct, list), every version, several column
# selections. The ranges must cover every byte pylance's scan reads (observed
# with strace) and total at most 1.1x those bytes plus metadata.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../lib/services.sh"
jo_setup
command -v strace >/dev/null || jo_die "strace is missing: run bash tests/install.sh"
PY="$JO_VENV/bin/python"
"$PY" "$JO_REPO/tests/lance/make_datasets.py" "$JO_T/ds" > "$JO_T/datasets.jsonl" 2>"$JO_T/make.log" ||
	{ jo_tail "$JO_T/make.log"; jo_die "make_datasets.py failed"; }
[ "$(wc -l < "$JO_T/datasets.jsonl")" -ge 5 ] || jo_die "expected 5 datasets"
# Both naming schemes are present.
ls "$JO_T/ds/ds_2.1/_versions" | grep -qx '1.manifest' || jo_die "ds_2.1 should use V1 names"
ls "$JO_T/ds/ds_2.0/_versions" | grep -qx '18446744073709551614.manifest' || jo_die "ds_2.0 should use V2 names"
"$PY" "$JO_REPO/tests/lance/check_coverage.py" "$JO_BIN" "$JO_T/datasets.jsonl"
echo "lance_coverage: ok"
