#!/usr/bin/env bash
# jfsops gc on every engine of JO_ENGINES (default: PostgreSQL, MariaDB and etcd;
# any of redis sqlite3 postgres mysql etcd): a dry run changes nothing, 4 parallel
# workers reclaim everything pending, workers SIGKILLed and restarted leave
# nothing lost; juicefs fsck/gc referee, every file intact. JO_GC_VARIANTS
# (default "parallel killed") picks the variants.
. "$(dirname "$0")/lib/init.sh" engines gc
JO_ENGINES=${JO_ENGINES:-postgres mysql etcd}
for e in $(engine_list); do
	engine_start "$e"
	case " ${JO_GC_VARIANTS:-parallel killed} " in *" parallel "*)
		engine_meta "$e" "gcp_$e"
		engine_store "$e" "gcp-$e"
		gc_run_parallel "$JO_META" "$JO_BUCKET" "gcp-$e"
		;;
	esac
	case " ${JO_GC_VARIANTS:-parallel killed} " in *" killed "*)
		engine_meta "$e" "gck_$e"
		engine_store "$e" "gck-$e"
		JO_GC_FILES=${JO_GC_KILL_FILES:-600} gc_run_killed "$JO_META" "$JO_BUCKET" "gck-$e"
		;;
	esac
	echo "engines_gc: $e ok" >&2
done
echo "engines_gc: ok"
