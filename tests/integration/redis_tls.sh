#!/usr/bin/env bash
# The engine scenarios on Redis over TLS (rediss://, Debian's redis-server
# --tls-port, a CA made with openssl), each on a
# volume formatted by the real juicefs: byte-exact cat of fragmented files
# (engines_cat.sh), gc with SIGKILLed workers (engines_gc.sh, its killed
# variant) and leakcheck's planted leaks (engines_leakcheck.sh), unchanged,
# with JO_ENGINES=redis-tls.
exec bash "$(dirname "$0")/lib/engine_scenarios.sh" redis-tls redis_tls
