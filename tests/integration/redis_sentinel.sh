#!/usr/bin/env bash
# The engine scenarios on Redis Sentinel (1 master, 1 replica, 3 sentinels
# on loopback, passwords on all, SENTINEL_PASSWORD), each on a
# volume formatted by the real juicefs: byte-exact cat of fragmented files
# (engines_cat.sh), gc with SIGKILLed workers (engines_gc.sh, its killed
# variant) and leakcheck's planted leaks (engines_leakcheck.sh), unchanged,
# and trash restore with its SIGKILLed worker (trash_restore.sh),
# with JO_ENGINES=redis-sentinel.
JO_SCENARIOS="engines_cat engines_gc engines_leakcheck trash_restore" \
	exec bash "$(dirname "$0")/lib/engine_scenarios.sh" redis-sentinel redis_sentinel
