#!/usr/bin/env bash
# The engine scenarios on a 3-master Redis Cluster (the volume in the one
# slot of its {DB} hash tag), each on a
# volume formatted by the real juicefs: byte-exact cat of fragmented files
# (engines_cat.sh), gc with SIGKILLed workers (engines_gc.sh, its killed
# variant) and leakcheck's planted leaks (engines_leakcheck.sh), unchanged,
# and trash restore with its SIGKILLed worker (trash_restore.sh),
# with JO_ENGINES=redis-cluster.
JO_SCENARIOS="engines_cat engines_gc engines_leakcheck trash_restore" \
	exec bash "$(dirname "$0")/lib/engine_scenarios.sh" redis-cluster redis_cluster
