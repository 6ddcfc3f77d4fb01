#!/usr/bin/env bash
# jfsops compact on every engine of JO_ENGINES (default: PostgreSQL,
# MariaDB and etcd), trash off and on: chunks of 90+ records rewritten as one slice
# beside an open reader and a live writer, workers killed mid-way, then the
# whole cycle through jfsops gc and leakcheck; fsck clean, sha256s unchanged.
. "$(dirname "$0")/lib/init.sh" engines compact
compact_on() { # ENGINE
	engine_new "$1" "cp0-$1"
	compact_run_variant "$JO_META" "$JO_BUCKET" "cp0-$1" 0 --compress zstd
	engine_new "$1" "cp1-$1"
	compact_run_variant "$JO_META" "$JO_BUCKET" "cp1-$1" 1 --compress lz4 --block-size 1M
}
engine_each engines_compact compact_on
