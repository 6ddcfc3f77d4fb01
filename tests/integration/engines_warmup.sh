#!/usr/bin/env bash
# jfsops warmup on every engine of JO_ENGINES (default: PostgreSQL, MariaDB
# and etcd): the warmup scenario of warmup_redis_s3.sh (dry-run blocks equal
# an independent oracle over `juicefs dump`, exact warmup through a mount:
# object GETs equal the blocks, the cache holds exactly them, a remount reads
# the ranges with no GET), with the volume's metadata on each engine.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
JO_ENGINES=${JO_ENGINES:-postgres mysql etcd}
base=${JO_PORT_BASE:-9640}
for e in $JO_ENGINES; do
	echo "== warmup on $e" >&2
	JO_WARMUP_ENGINE=$e JO_PORT_BASE=$base JO_WARMUP_REDIS_PORT=$base \
		JO_WARMUP_SEAWEED_BASE=$((base + 10)) bash "$here/warmup_redis_s3.sh" ||
		{ echo "engines_warmup: $e failed" >&2; exit 1; }
done
echo "engines_warmup: ok"
