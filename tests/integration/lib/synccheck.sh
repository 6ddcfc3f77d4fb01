# shellcheck shell=bash
# tests/integration/lib/synccheck.sh: what the sync scripts (sync_cluster,
# sync_s3, sync_slowdown) share. Source after tests/lib/services.sh
# (lib/init.sh: synccheck).
#
# Tallied checks: ok and bad print one line each, bad counts into FAILS;
# check_eq GOT WANT WHAT is ok when GOT equals WANT, else bad.
FAILS=0
ok() { echo "ok   - $*"; }
bad() { echo "FAIL - $*"; FAILS=$((FAILS + 1)); }
check_eq() { if [ "$1" = "$2" ]; then ok "$3 ($1)"; else bad "$3: got '$1', want '$2'"; fi; }

# sync_rclone_remotes [SW_ENDPOINT] RS_ENDPOINT: rclone remotes made by the
# environment alone (no config file): SW, SeaweedFS at SW_ENDPOINT (keys
# swak/swsk, listing v2), when given, and RS, rclone serve s3 at RS_ENDPOINT
# (keys rcak/rcsk). rc runs rclone on them, quietly, with one retry.
sync_rclone_remotes() {
	export RCLONE_CONFIG=/dev/null
	if [ $# -gt 1 ]; then
		export RCLONE_CONFIG_SW_TYPE=s3 RCLONE_CONFIG_SW_PROVIDER=Other RCLONE_CONFIG_SW_ACCESS_KEY_ID=swak \
			RCLONE_CONFIG_SW_SECRET_ACCESS_KEY=swsk RCLONE_CONFIG_SW_ENDPOINT=$1 \
			RCLONE_CONFIG_SW_FORCE_PATH_STYLE=true RCLONE_CONFIG_SW_LIST_VERSION=2
		shift
	fi
	export RCLONE_CONFIG_RS_TYPE=s3 RCLONE_CONFIG_RS_PROVIDER=Rclone RCLONE_CONFIG_RS_ACCESS_KEY_ID=rcak \
		RCLONE_CONFIG_RS_SECRET_ACCESS_KEY=rcsk RCLONE_CONFIG_RS_ENDPOINT=$1 \
		RCLONE_CONFIG_RS_FORCE_PATH_STYLE=true
}
rc() { "$RCLONE" --retries 1 -q "$@"; }
