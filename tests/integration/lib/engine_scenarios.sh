#!/usr/bin/env bash
# tests/integration/lib/engine_scenarios.sh ENGINE NAME: the engine scenarios
# on ENGINE alone (JO_ENGINES=ENGINE), unchanged: engines_cat.sh,
# engines_gc.sh (its killed variant unless JO_GC_VARIANTS says otherwise) and
# engines_leakcheck.sh, one after the other (JO_SCENARIOS: another list of
# scripts); "NAME: ok" at the end. Run by redis_cluster.sh,
# redis_sentinel.sh and redis_tls.sh.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
export JO_ENGINES=$1 JO_GC_VARIANTS=${JO_GC_VARIANTS:-killed}
for s in ${JO_SCENARIOS:-engines_cat engines_gc engines_leakcheck}; do
	bash "$here/$s.sh"
done
echo "$2: ok"
