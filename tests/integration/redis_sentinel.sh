#!/usr/bin/env bash
# The engine scenarios on Redis Sentinel (1 master, 1 replica, 3 sentinels
# on loopback, passwords on all, SENTINEL_PASSWORD), each on a
# volume formatted by the real juicefs: byte-exact cat of fragmented files
# (engines_cat.sh), gc with SIGKILLed workers (engines_gc.sh, its killed
# variant) and leakcheck's planted leaks (engines_leakcheck.sh), unchanged,
# with JO_ENGINES=redis-sentinel.
exec bash "$(dirname "$0")/lib/engine_scenarios.sh" redis-sentinel redis_sentinel
