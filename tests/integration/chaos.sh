#!/usr/bin/env bash
# The crash campaign (tests/chaos/run.sh) with its small default count:
# CHAOS_N rounds (default 3) of each kind - gc workers, compaction workers,
# leakcheck --delete-from and sync SIGKILLed at random points, rerun, and
# checked by the referees. The seed is printed first; CHAOS_SEED replays it.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
exec bash "$here/../chaos/run.sh"
