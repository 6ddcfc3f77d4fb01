#!/usr/bin/env bash
# The engine scenarios on a 3-master Redis Cluster (the volume in the one
# slot of its {DB} hash tag), each on a
# volume formatted by the real juicefs: byte-exact cat of fragmented files
# (engines_cat.sh), gc with SIGKILLed workers (engines_gc.sh, its killed
# variant) and leakcheck's planted leaks (engines_leakcheck.sh), unchanged,
# with JO_ENGINES=redis-cluster.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
export JO_ENGINES=redis-cluster JO_GC_VARIANTS=${JO_GC_VARIANTS:-killed}
bash "$here/engines_cat.sh"
bash "$here/engines_gc.sh"
bash "$here/engines_leakcheck.sh"
echo "redis_cluster: ok"
