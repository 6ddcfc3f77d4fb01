#!/usr/bin/env bash
# jfsops gc on every engine of JO_ENGINES (default: PostgreSQL, MariaDB and etcd;
# any of redis sqlite3 postgres mysql etcd): a dry run changes nothing, 4 parallel
# workers reclaim everything pending, workers SIGKILLed and restarted leave
# nothing lost; juicefs fsck/gc referee, every file intact. JO_GC_VARIANTS
# (default "parallel killed") picks the variants.
. "$(dirname "$0")/lib/init.sh" engines gc
gc_on() { # ENGINE
	case " ${JO_GC_VARIANTS:-parallel killed} " in *" parallel "*)
		engine_new "$1" "gcp-$1"
		gc_run_parallel "$JO_META" "$JO_BUCKET" "gcp-$1"
		;;
	esac
	case " ${JO_GC_VARIANTS:-parallel killed} " in *" killed "*)
		engine_new "$1" "gck-$1"
		JO_GC_FILES=${JO_GC_KILL_FILES:-600} gc_run_killed "$JO_META" "$JO_BUCKET" "gck-$1"
		;;
	esac
}
engine_each engines_gc gc_on
