#!/usr/bin/env bash
# meta_redis.sh: common/meta against a real Redis volume made by juicefs.
# Starts its own redis-server on 127.0.0.1:${META_REDIS_PORT:-JO_PORT_BASE+1}.
#   BUILD=/path/to/build tests/integration/meta_redis.sh
set -euo pipefail
T=$(mktemp -d /tmp/jo-meta-redis.XXXXXX)
PORT=${META_REDIS_PORT:-$((${JO_PORT_BASE:-7000} + 1))}
source "$(dirname "$0")/meta_lib.sh"
stop_redis() { [ -n "${KEEP:-}" ] && return 0; redis-cli -p "$PORT" -a pw --no-auth-warning shutdown nosave >/dev/null 2>&1 || true; }
trap 'meta_cleanup; stop_redis; [ -n "${KEEP:-}" ] || rm -rf "$T"' EXIT
redis-server --port "$PORT" --bind 127.0.0.1 --save '' --appendonly no --daemonize yes \
	--dir "$T" --pidfile "$T/redis.pid" --requirepass pw >/dev/null
for _ in $(seq 50); do redis-cli -p "$PORT" -a pw --no-auth-warning ping >/dev/null 2>&1 && break; sleep 0.1; done

build_driver
expect_err() { # URL CODE
	if "$T/meta_dump" "$1" >/dev/null 2>"$T/err"; then echo "FAIL: $1 opened"; exit 1; fi
	grep -q "$2" "$T/err" || { echo "FAIL: $1: want $2, got $(cat "$T/err")"; exit 1; }
	if grep -q 'wrongpw\|pw@' "$T/err"; then echo "FAIL: password leaked: $(cat "$T/err")"; exit 1; fi
}
expect_err "redis://:wrongpw@127.0.0.1:$PORT/1" EAUTH
expect_err "redis://127.0.0.1:$PORT/1" EAUTH            # NOAUTH
expect_err "redis://:pw@127.0.0.1:$PORT/1" ENOTJFS      # empty db
expect_err "redis://:pw@127.0.0.1:1/1" ECONNECT
expect_err "rediss://:pw@127.0.0.1:$PORT/1" 'ECONNECT.*TLS handshake'   # a plain port
expect_err "redis://:pw@127.0.0.1:1,127.0.0.1:2/1" ECONNECT              # cluster seeds, none up
expect_err "redis://:pw@mymaster,127.0.0.1:1/1" "ECONNECT.*mymaster"     # sentinel, none up

META="redis://:pw@127.0.0.1:$PORT/1"
run_scenario
echo "meta_redis: PASS"
