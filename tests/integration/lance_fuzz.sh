#!/usr/bin/env bash
# libFuzzer targets of lanceparse (protobuf decoder, manifest, data-file
# footers and range computation), each run for a bounded time
# (FUZZ_SECONDS, default 20). Fails on any crash, leak or UB report.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
FUZZ_TARGETS=${FUZZ_TARGETS:-"lance_pb lance_manifest lance_datafile"} exec bash "$here/../fuzz/run.sh"
