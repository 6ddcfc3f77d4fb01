#!/usr/bin/env bash
# The engine scenarios on Redis over TLS (rediss://, Debian's redis-server
# --tls-port, a CA made with openssl), each on a
# volume formatted by the real juicefs: byte-exact cat of fragmented files
# (engines_cat.sh), gc with SIGKILLed workers (engines_gc.sh, its killed
# variant) and leakcheck's planted leaks (engines_leakcheck.sh), unchanged,
# with JO_ENGINES=redis-tls.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
export JO_ENGINES=redis-tls JO_GC_VARIANTS=${JO_GC_VARIANTS:-killed}
bash "$here/engines_cat.sh"
bash "$here/engines_gc.sh"
bash "$here/engines_leakcheck.sh"
echo "redis_tls: ok"
