#!/usr/bin/env bash
# libFuzzer targets of lanceparse (protobuf decoder, manifest, data-file
# footers and range computation), each run for a bounded time
# (FUZZ_SECONDS, default 30). Fails on any crash, leak or UB report.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
exec bash "$here/../fuzz/run.sh"
