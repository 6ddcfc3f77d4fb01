#!/usr/bin/env bash
# jfsops compact on every engine of JO_ENGINES (default: PostgreSQL,
# MariaDB and etcd), trash off and on: chunks of 90+ records rewritten as one slice
# beside an open reader and a live writer, workers killed mid-way, then the
# whole cycle through jfsops gc and leakcheck; fsck clean, sha256s unchanged.
. "$(dirname "$0")/lib/init.sh" engines compact
JO_ENGINES=${JO_ENGINES:-postgres mysql etcd}
for e in $(engine_list); do
	engine_start "$e"
	engine_meta "$e" "cp0_$e"
	engine_store "$e" "cp0-$e"
	compact_run_variant "$JO_META" "$JO_BUCKET" "cp0-$e" 0 --compress zstd
	engine_meta "$e" "cp1_$e"
	engine_store "$e" "cp1-$e"
	compact_run_variant "$JO_META" "$JO_BUCKET" "cp1-$e" 1 --compress lz4 --block-size 1M
	echo "engines_compact: $e ok" >&2
done
echo "engines_compact: ok"
