#!/usr/bin/env bash
# libFuzzer targets of the input parsers under ASan/UBSan, each for a
# bounded time (FUZZ_SECONDS, default 20; FUZZ_SECONDS=600 for a long run):
# S3 XML replies (all parsers, and a ListBucketResult round trip), the
# config file, META-URLs, sync filter rules, warmup range lines and the
# values a volume stores (format record, attrs, slice records, block keys
# and bodies, trash names) and a cluster leak check's reference runs
# (read from a place other hosts write to). Each
# target checks invariants beyond "no crash" (see tests/fuzz/fuzz_*.c) and
# starts from its seed corpus in tests/fuzz/corpus/<target>/ (real server
# replies, real configs, every META-URL form, regression inputs of fixed
# bugs). Fails on any crash, leak, hang (10 s per input), UB report or
# broken invariant; the failing input is kept in the printed directory.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
FUZZ_TARGETS=${FUZZ_TARGETS:-"s3xml s3list_rt config meta_url sync_filter warmup_ranges jfs_values leak_run"} \
	exec bash "$here/../fuzz/run.sh"
