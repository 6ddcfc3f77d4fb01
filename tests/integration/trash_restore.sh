#!/usr/bin/env bash
# jfsops trash restore --apply on each engine of JO_ENGINES (default: SQLite,
# Redis, PostgreSQL, MariaDB and etcd): a volume with --trash-days 1 where
# trees were removed through a juicefs mount at two hours (the first aged by
# two hours): /p (a nested tree, one file hard-linked from /keep) at the old
# hour, /q/d/e/f4 at the old hour and its parents at the new one, a name
# (/s/same.txt) removed at both hours, /r at the new hour. Restores: a
# window and a path (--until 90m --path /p), a tree split over both hours
# (--path /q, by --plan and workers, one SIGKILLed mid-restore, after which
# the quota on / is exact without any repair: `juicefs quota check`), the
# twice-removed name (skip, then --conflict rename). After
# them, through a fresh mount, every restored file's sha256 and the tree
# equal the state before the removal, /r is still in the trash, juicefs
# fsck is clean (also --path / --recursive), `juicefs info -r` equals
# `info -r --strict` on the restored directories, the quotas on /s and /
# are consistent (juicefs quota check), juicefs gc finds nothing
# leaked or pending, the hard link still has two names, and a second run
# restores nothing. Then `trash purge --path /r --apply` removes /r from the
# trash (refused without a filter; a dry run changes nothing), and after
# `jfsops gc --delete` juicefs gc finds nothing leaked or pending and fsck is
# clean.
. "$(dirname "$0")/lib/init.sh" engines gc

# restore OUT ARGS...: `trash restore META --json --apply ARGS` into OUT
restore() {
	local out=$1
	shift
	"$JO_BIN" trash restore "$meta" --json --apply --audit "$JO_T/audit-$e.jsonl" "$@" \
		>"$out" 2>"$out.err" || { cat "$out.err" >&2; jo_die "$e: trash restore $* failed"; }
}
# summary FILE KEY: a field of the summary line
summary() { python3 -c 'import json,sys; print(json.loads(open(sys.argv[1]).read().splitlines()[-1])[sys.argv[2]])' "$1" "$2"; }
# state DIR...: path, type, size, sha256 of everything under each DIR
state() {
	local d
	for d in "$@"; do
		(cd "$mp" && find "$d" -printf '%p %y %s\n' | sort)
		(cd "$mp" && find "$d" -type f -print0 | sort -z | xargs -0 -r sha256sum)
	done
}
# quota_exact DIR: `juicefs quota check --strict` (no --repair) finds DIR's quota consistent
quota_exact() {
	"$JUICEFS" quota check --no-agent "$meta" --path "$1" --strict >"$JO_T/qcheck-$e.log" 2>&1 &&
		grep -q "is consistent" "$JO_T/qcheck-$e.log" ||
		{ cat "$JO_T/qcheck-$e.log" >&2; jo_die "$e: the quota of $1 is not consistent${2:+ $2}"; }
}
# trash_tasks: the tasks and records of namespace "trash" as the engine holds
# them (and, on Sentinel, each data node's replication offsets)
trash_tasks() {
	local k id p
	case $meta in
	redis://*)
		k=$(gc_redis_key "$meta" jfsops:trash:)
		echo "queue (task, lease expiry on the server's clock in ms; server time: $(gc_redis_cli "$meta" TIME | paste -sd.)):"
		gc_redis_cli "$meta" ZRANGE "${k}queue" 0 -1 WITHSCORES | paste - -
		for id in $(gc_redis_cli "$meta" ZRANGE "${k}queue" 0 -1); do
			echo "task $id (kind owner expire attempts created): $(gc_redis_cli "$meta" HMGET "${k}task:$id" kind owner expire attempts created | paste -sd' ')"
			gc_redis_cli "$meta" HGET "${k}task:$id" items | head -n 5
		done
		echo "items held by a task: $(gc_redis_cli "$meta" HLEN "${k}items")"
		gc_redis_cli "$meta" HGETALL "${k}items" | paste - - | head -n 20
		echo "records: $(gc_redis_cli "$meta" HKEYS "${k}rec" | paste -sd' ')"
		[ "$(gc_redis_mode "$meta")" != sentinel ] || for p in $JO_RS_PORTS; do
			echo "data node $p: $(jo_rs_cli "$p" info replication | tr -d '\r' |
				grep -E '^(role|master_link_status|slave0|master_repl_offset|slave_repl_offset)' | paste -sd' ')"
		done
		;;
	sqlite3://* | postgres://* | mysql://*)
		for k in task item rec; do
			echo "jfsops_trash_$k:"
			"$JO_VENV/bin/python" "$JO_REPO/tests/tools/sqlmeta.py" sql "$meta" \
				"SELECT * FROM jfsops_trash_$k" 2>&1 | cut -c1-300 | head -n 20
		done
		;;
	etcd://*)
		"$JO_VENV/bin/python" "$JO_REPO/tests/tools/kvmeta.py" keys "$meta" jfsops/trash/ 2>&1 |
			cut -c1-300 | head -n 40
		;;
	esac
}
# restore_postmortem WHY: what the workers of /q said and left (their
# summaries, stderr, what they did with each entry still listed, the audit
# lines not "ok", the task table) on stderr, then jo_die WHY
restore_postmortem() {
	local w f
	set +e # all of it, whatever fails: the script dies at the end
	{
		echo "---- post-mortem of the /q workers ($e) ----"
		# wk: the SIGKILLed one (its output cut where it was killed)
		for w in wk w1 w2 w3; do
			f=$JO_T/$w-$e.json
			[ "$w" != wk ] || f=$JO_T/wk-$e.txt
			[ -f "$f" ] || continue
			echo "worker $w: $(grep -c '"type":"restore"' "$f") entry lines," \
				"$(grep -c '"action":"skip"' "$f") skipped; summary:"
			grep -v '"type":"restore"' "$f" | tail -n 2
			grep '"action":"skip"' "$f" | head -n 10
			[ ! -s "$f.err" ] || { echo "worker $w stderr:"; tail -n 20 "$f.err"; }
		done
		echo "audit lines of /q: $(grep -c '"key":"/q' "$JO_T/audit-$e.jsonl" || true); not ok:"
		grep '"key":"/q' "$JO_T/audit-$e.jsonl" | grep -v '"result":"ok"' | head -n 10
		if [ -f "$JO_T/lsq-$e.json" ]; then
			echo "still in the trash, and what each worker printed for its inode:"
			python3 - "$JO_T/lsq-$e.json" "$JO_T/wk-$e.txt" "$JO_T/w1-$e.json" \
				"$JO_T/w2-$e.json" "$JO_T/w3-$e.json" <<-'EOP'
				import json, os, sys
				def lines(p):
				    for l in open(p) if os.path.exists(p) else ():
				        try:
				            yield json.loads(l)
				        except ValueError:
				            pass  # the killed worker's last line may be cut
				left = [x for x in lines(sys.argv[1]) if x.get("type") == "entry"]
				for x in left[:20]:
				    print(" ", json.dumps(x))
				    for p in sys.argv[2:]:
				        for y in lines(p):
				            if y.get("inode") == x["inode"]:
				                print("    %s: %s" % (os.path.basename(p), json.dumps(y)))
			EOP
		fi
		echo "task table:"
		trash_tasks
		echo "----"
	} >&2 2>&1
	jo_die "$1"
}
fsck_clean() {
	"$JUICEFS" fsck --no-agent "$meta" "$@" >"$JO_T/fsck-$e.log" 2>&1 ||
		{ tail -n 20 "$JO_T/fsck-$e.log" >&2; jo_die "$e: juicefs fsck $* failed"; }
	! grep -Eq "should be|missing|broken|can be repaired" "$JO_T/fsck-$e.log" ||
		{ grep -E "should be|missing|broken|can be repaired" "$JO_T/fsck-$e.log" >&2; jo_die "$e: juicefs fsck $* reports problems"; }
}

for e in ${JO_ENGINES:-sqlite3 redis postgres mysql etcd}; do
	mp=$JO_T/mnt-$e
	engine_volume "$e" "trap$e" "$mp" --no-bgjob # the mount must not empty the trash
	mkdir -p "$mp/p/a/b" "$mp/p/a/c" "$mp/p/empty" "$mp/q/d/e" "$mp/keep" "$mp/s" "$mp/r"
	jo_random_files "$mp" p/a/b/f1:70000 p/a/b/f2:300
	: >"$mp/p/a/c/zero"
	head -c 5000 /dev/urandom >"$mp/p/top"
	ln -s a/b/f1 "$mp/p/link"
	ln "$mp/p/a/b/f1" "$mp/keep/hl"
	jo_random_files "$mp" q/d/e/f4:9000 q/d/g:100
	# two names of one inode removed in the same hour: two trash entries,
	# two tasks' items (they were one, and workers left a name behind)
	ln "$mp/q/d/g" "$mp/q/d/g2"
	mkdir "$mp/q/d/many"
	for i in $(seq 300); do echo "$i" >"$mp/q/d/many/$i"; done
	echo one >"$mp/s/same.txt"
	head -c 123 /dev/urandom >"$mp/r/f5"
	state p q >"$JO_T/before-$e"
	# the quota is set while no client runs: a mount loads quotas when it
	# starts, and one it does not know of yet is not charged by its removals
	jfs_umount "$mp"
	for d in /s /; do
		"$JUICEFS" quota set --no-agent "$meta" --path $d --inodes 1000 >"$JO_T/quota-$e.log" 2>&1 ||
			{ cat "$JO_T/quota-$e.log" >&2; jo_die "$e: juicefs quota set $d failed"; }
	done
	jfs_mount "$meta" "$mp" --no-bgjob
	rm -rf "$mp/p"
	rm "$mp/q/d/e/f4" "$mp/s/same.txt"
	jfs_umount "$mp"
	gc_age_trash "$meta" 7200
	jfs_mount "$meta" "$mp" --no-bgjob
	echo two >"$mp/s/same.txt"
	rm -rf "$mp/q" "$mp/r" "$mp/s/same.txt"
	jfs_umount "$mp"
	"$JO_BIN" trash ls "$meta" --json >"$JO_T/ls0-$e.json" || jo_die "$e: trash ls failed"
	[ "$(summary "$JO_T/ls0-$e.json" hours)" = 2 ] || jo_die "$e: expected two hour directories"

	# a window and a path: the old hour's /p only
	restore "$JO_T/r1-$e.json" --until 90m --path /p
	[ "$(summary "$JO_T/r1-$e.json" restored)" = 10 ] || { cat "$JO_T/r1-$e.json" >&2; jo_die "$e: /p: expected 10 restored"; }
	# a tree split over two hours (the child at the old one, its parents at
	# the new), by workers: a plan, one worker SIGKILLed once it restored
	# something (in the middle of its work), two more at once, while its
	# lease (2 s) still holds the task it had: they wait for it to run out
	# and redo that task (they ended with it still leased, and a last worker
	# found no task while entries were left); a last one finds nothing left
	restore "$JO_T/r2-$e.json" --path /q --plan
	[ "$(summary "$JO_T/r2-$e.json" planned)" = 307 ] || { tail -n 1 "$JO_T/r2-$e.json" >&2; jo_die "$e: /q: expected 307 planned"; }
	# the worker's every write (to its engine, its audit file) held 5 ms by
	# strace: a batch of 100 restores takes a few milliseconds on Redis, and
	# without it the whole task was done before the kill (seen in a
	# clean-clone run); the kill goes to the worker itself
	strace -f -o /dev/null -e trace=write,sendto,sendmsg \
		-e inject=write,sendto,sendmsg:delay_enter=5000 -- \
		"$JO_BIN" trash restore "$meta" --worker --apply --lease 2s --json \
		--audit "$JO_T/audit-$e.jsonl" >"$JO_T/wk-$e.txt" 2>"$JO_T/wk-$e.txt.err" &
	spid=$!
	for i in $(seq 1000); do
		grep -q '"key":"/q' "$JO_T/audit-$e.jsonl" 2>/dev/null && break
		sleep 0.01
	done
	kpid=$(pgrep -P "$spid" -x "$(basename "$JO_BIN" | cut -c1-15)" | head -n 1 || true)
	[ -n "$kpid" ] || jo_die "$e: the worker ended before its first audit line was seen"
	kill -9 "$kpid" 2>/dev/null || true
	wait "$spid" 2>/dev/null || true
	"$JO_BIN" trash ls "$meta" --json --path /q >"$JO_T/lsk-$e.json" || jo_die "$e: trash ls failed"
	left=$(summary "$JO_T/lsk-$e.json" entries)
	[ "$left" -gt 0 ] && [ "$left" -lt 307 ] || jo_die "$e: the SIGKILL did not land mid-restore ($left of 307 left)"
	jo_log "$e: worker SIGKILLed with $left of 307 entries left"
	for w in 1 2; do
		restore "$JO_T/w$w-$e.json" --worker --lease 2s &
		eval "wpid$w=\$!"
	done
	wait "$wpid1" || restore_postmortem "$e: worker 1 failed"
	wait "$wpid2" || restore_postmortem "$e: worker 2 failed"
	restore "$JO_T/w3-$e.json" --worker
	[ "$(summary "$JO_T/w3-$e.json" tasks)/$(summary "$JO_T/w3-$e.json" restored)" = 0/0 ] ||
		restore_postmortem "$e: tasks were left after the workers"
	"$JO_BIN" trash ls "$meta" --json --path /q >"$JO_T/lsq-$e.json" || jo_die "$e: trash ls failed"
	[ "$(summary "$JO_T/lsq-$e.json" entries)" = 0 ] ||
		restore_postmortem "$e: the workers left $(summary "$JO_T/lsq-$e.json" entries) /q entries in the trash"
	# every batch charged the root's quota in its own transaction: the SIGKILLed
	# worker's last commit left it exact, with nothing to repair
	quota_exact / "after the SIGKILLed worker"
	# the name removed twice: the older goes back, the newer conflicts
	restore "$JO_T/r3-$e.json" --path /s/same.txt
	[ "$(summary "$JO_T/r3-$e.json" restored)/$(summary "$JO_T/r3-$e.json" conflicts)" = 1/1 ] ||
		{ cat "$JO_T/r3-$e.json" >&2; jo_die "$e: /s/same.txt: expected 1 restored, 1 conflict"; }
	restore "$JO_T/r4-$e.json" --path /s/same.txt --conflict rename
	[ "$(summary "$JO_T/r4-$e.json" renamed)" = 1 ] || { cat "$JO_T/r4-$e.json" >&2; jo_die "$e: --conflict rename"; }
	# idempotent: nothing left to do
	restore "$JO_T/r5-$e.json" --path /p
	restore "$JO_T/r6-$e.json" --path /q
	[ "$(summary "$JO_T/r5-$e.json" restored)$(summary "$JO_T/r6-$e.json" restored)" = 00 ] ||
		jo_die "$e: a second run restored something"
	# /r (the new hour) is untouched
	"$JO_BIN" trash ls "$meta" --json --path /r >"$JO_T/ls1-$e.json" || jo_die "$e: trash ls failed"
	[ "$(summary "$JO_T/ls1-$e.json" entries)" = 2 ] || jo_die "$e: /r left the trash"
	[ "$(summary "$JO_T/ls1-$e.json" entries_scanned)" = 2 ] || jo_die "$e: the trash holds more than /r"
	# one audit line per entry (the killed worker may have written some of /q's)
	lines=$(grep -cv '"key":"/q' "$JO_T/audit-$e.jsonl" || true)
	[ "$lines" = 13 ] || jo_die "$e: $lines audit lines outside /q, expected 13 (one per entry)"
	lines=$(grep -c '"key":"/q' "$JO_T/audit-$e.jsonl" || true)
	[ "$lines" -ge 307 ] || jo_die "$e: $lines audit lines for /q, expected 307 or more"

	# before any client reads a directory's statistics (info -r records a
	# missing one): every restored directory has them
	fsck_clean --path / --recursive
	jfs_mount "$meta" "$mp" --no-bgjob
	state p q >"$JO_T/after-$e"
	diff "$JO_T/before-$e" "$JO_T/after-$e" >&2 || jo_die "$e: the restored tree differs"
	[ "$(stat -c %h "$mp/keep/hl")" = 2 ] || jo_die "$e: the hard link lost a name"
	cmp -s "$mp/keep/hl" "$mp/p/a/b/f1" || jo_die "$e: the hard link differs"
	[ "$(cat "$mp/s/same.txt")" = one ] || jo_die "$e: /s/same.txt is not the older one"
	[ "$(cat "$mp/s/same.txt".restored-*)" = two ] || jo_die "$e: the renamed one is not the newer"
	for d in p p/a p/a/b p/empty q q/d q/d/e s /; do
		"$JUICEFS" info -r "$mp/$d" 2>/dev/null | grep -v -e '^ *inode' -e '^ *path' >"$JO_T/info-$e"
		"$JUICEFS" info -r --strict "$mp/$d" 2>/dev/null | grep -v -e '^ *inode' -e '^ *path' >"$JO_T/infos-$e"
		diff "$JO_T/info-$e" "$JO_T/infos-$e" >&2 || jo_die "$e: info -r differs from --strict on /$d"
	done
	jfs_umount "$mp"
	fsck_clean
	fsck_clean --path / --recursive --sync-dir-stat
	# the quota on /s counts the two names restored into it, / everything
	quota_exact /s
	quota_exact /
	gc_juicefs_gc "$meta" "$JO_T/gc-$e.log"
	[ "$(gc_count "$JO_T/gc-$e.log" leaked)" = 0 ] || jo_die "$e: juicefs gc finds leaked objects"

	# purge: refused without a filter; a dry run changes nothing; --apply
	# empties the trash of /r and hands f5's data to gc
	rc=0; "$JO_BIN" trash purge "$meta" --apply >/dev/null 2>&1 || rc=$?
	[ "$rc" = 2 ] || jo_die "$e: trash purge --apply without a filter: exit $rc, expected 2"
	rc=0; "$JO_BIN" trash purge "$meta" --all --path /r >/dev/null 2>&1 || rc=$?
	[ "$rc" = 2 ] || jo_die "$e: trash purge --all with a filter: exit $rc, expected 2"
	"$JO_BIN" trash purge "$meta" --all --json >"$JO_T/pall-$e.json" || jo_die "$e: trash purge --all (dry) failed"
	[ "$(summary "$JO_T/pall-$e.json" would_purge)" = 2 ] || jo_die "$e: trash purge --all (dry): expected 2"
	"$JO_BIN" trash purge "$meta" --path /r --json >"$JO_T/p0-$e.json" || jo_die "$e: trash purge (dry) failed"
	[ "$(summary "$JO_T/p0-$e.json" would_purge)/$(summary "$JO_T/p0-$e.json" bytes_freed)" = 2/123 ] ||
		{ cat "$JO_T/p0-$e.json" >&2; jo_die "$e: trash purge dry run"; }
	"$JO_BIN" trash ls "$meta" --json >"$JO_T/ls2-$e.json" || jo_die "$e: trash ls failed"
	[ "$(summary "$JO_T/ls2-$e.json" entries)" = 2 ] || jo_die "$e: a dry purge changed the trash"
	"$JO_BIN" trash purge "$meta" --path /r --apply --json --audit "$JO_T/paudit-$e.jsonl" \
		>"$JO_T/p1-$e.json" || jo_die "$e: trash purge --apply failed"
	[ "$(summary "$JO_T/p1-$e.json" purged)/$(summary "$JO_T/p1-$e.json" bytes_freed)" = 2/123 ] ||
		{ cat "$JO_T/p1-$e.json" >&2; jo_die "$e: trash purge --apply"; }
	[ "$(wc -l <"$JO_T/paudit-$e.jsonl")" = 2 ] || jo_die "$e: purge: expected 2 audit lines"
	"$JO_BIN" trash ls "$meta" --json >"$JO_T/ls3-$e.json" || jo_die "$e: trash ls failed"
	[ "$(summary "$JO_T/ls3-$e.json" entries)" = 0 ] || jo_die "$e: purged entries are still in the trash"
	"$JO_BIN" gc "$meta" --delete --json >"$JO_T/jgc-$e.json" 2>"$JO_T/jgc-$e.err" ||
		{ cat "$JO_T/jgc-$e.err" >&2; jo_die "$e: jfsops gc --delete failed"; }
	gc_juicefs_gc "$meta" "$JO_T/gc2-$e.log"
	[ "$(gc_count "$JO_T/gc2-$e.log" leaked)" = 0 ] || jo_die "$e: after purge: juicefs gc finds leaked objects"
	[ "$(gc_count "$JO_T/gc2-$e.log" pending)" = 0 ] || jo_die "$e: after purge: juicefs gc finds pending objects"
	grep -q "0 delfiles" "$JO_T/gc2-$e.log" || jo_die "$e: after purge + gc: delfiles are left"
	fsck_clean
	fsck_clean --path / --recursive --sync-dir-stat
	jo_log "$e: trash restore --apply ok"
done
echo "trash_restore: ok"
