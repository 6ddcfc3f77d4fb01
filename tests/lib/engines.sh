# shellcheck shell=bash
# tests/lib/engines.sh: the metadata engines of the test bed, started on
# loopback and stopped again by jo_cleanup (services.sh), and the one place
# that knows how to name a fresh volume's META-URL on each of them, so that
# a scenario is one script run on every engine:
#
#   . "$here/../lib/services.sh"; . "$here/../lib/engines.sh"
#   jo_setup
#   for e in $(engine_list); do
#       engine_start "$e"                  # idempotent: starts its server once
#       engine_meta "$e" vol1; meta=$JO_META  # a META-URL with an empty database
#       ...
#   done
#
# Engines: redis, sqlite3, postgres (PostgreSQL 15 from Debian), mysql
# (MariaDB 10.11 from Debian), etcd (etcd 3.4 from Debian's etcd-server; not
# in the default list until the tkv family opens etcd:// volumes), and Redis
# as production runs it: redis-tls (rediss:// with a CA made by jo_certs,
# +6), redis-sentinel (a master +7, a replica +8 and 3 sentinels +17..+19,
# passwords on all), redis-cluster (3 masters +14..+16, bus +10014..+10016;
# the db number is juicefs's {DB} key prefix).
# engine_list prints $JO_ENGINES, default "redis sqlite3 postgres mysql".
# Ports: postgres JO_PORT_BASE+24, mariadb +25, etcd +26 (peer +27), redis
# +0 (when engine_start starts it). Passwords: postgres user "postgres" /
# "pgpass" over TCP (scram), mysql user "jfs" / "jfspass"; etcd has no auth
# (start_etcd --auth starts one that has).
# A server that does not start, or a database that cannot be created, makes
# the script die loudly; nothing is skipped.
#
# Lane servers: under tests/run_all.sh (JO_LANE_DIR set, the lane's own
# directory), PostgreSQL and MariaDB, whose cold start (initdb or
# mariadb-install-db, certificates) costs the most, belong to the lane, not
# to the script: the first script of the lane that needs one starts it, on
# lane ports +124 / +125 (no script uses those), later scripts of the lane
# reuse it, and run_all stops it at the end (jo_lane_stop). A lane runs one
# script at a time and each gets a clean server: engine_start drops every
# database an earlier script left there, and jo_cleanup drops the script's
# own. A lane server that does not answer is replaced by a new one.
# etcd (about a second to start) and Redis are still the script's own.

JO_ENGINE_STARTED=" "
JO_PG_PASS=pgpass
JO_MY_PASS=jfspass
JO_ENGINE_DIRS=()   # scratch dirs owned by the servers' users

engine_list() {
	echo "${JO_ENGINES:-redis sqlite3 postgres mysql}"
}

# jo_as USER CMD...: run CMD as USER when we are root, else as ourselves.
jo_as() {
	local user=$1
	shift
	if [ "$(id -u)" = 0 ]; then
		runuser -u "$user" -- "$@"
	else
		"$@"
	fi
}

# jo_service_dir VAR USER NAME: a scratch directory the service user can own
# (JO_T is private to us, so servers running as their own user live beside it),
# its path in VAR. It is removed at cleanup, so it must be made in this shell,
# never in a $(...) subshell (whose JO_ENGINE_DIRS would be lost).
# A lane server's (JO_LANE_SERVER set by the caller) lives in JO_LANE_DIR and
# outlives the script.
jo_service_dir() {
	local jo_sd_dir
	if [ -n "${JO_LANE_SERVER:-}" ]; then
		jo_sd_dir=$(mktemp -d "$JO_LANE_DIR/jo-$3.XXXXXX") || jo_die "mktemp failed"
	else
		jo_sd_dir=$(mktemp -d "${TMPDIR:-/tmp}/jo-$3.XXXXXX") || jo_die "mktemp failed"
		JO_ENGINE_DIRS+=("$jo_sd_dir")
	fi
	if [ "$(id -u)" = 0 ]; then
		chown "$2" "$jo_sd_dir"
	fi
	printf -v "$1" '%s' "$jo_sd_dir"
}

jo_stop_engines() {
	local d
	# a lane's servers are left running (for the lane's next script), clean
	[ -z "${JO_LANE_CLEAN:-}" ] || jo_lane_clean
	if [ -n "${JO_PG_OWN:-}" ] && [ -f "$JO_PG_DATA/postmaster.pid" ]; then
		jo_as postgres "$JO_PG_BIN/pg_ctl" -D "$JO_PG_DATA" -m immediate -w stop >/dev/null 2>&1
	fi
	local pid
	# the server's own pid, from its pidfile (runuser does not pass signals on)
	[ -z "${JO_MY_PIDFILE:-}" ] || [ ! -s "$JO_MY_PIDFILE" ] || JO_MY_PID=$(cat "$JO_MY_PIDFILE")
	for pid in ${JO_MY_PID:-} ${JO_MY_RUNNER:-}; do
		kill -TERM "$pid" 2>/dev/null
		for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
		kill -KILL "$pid" 2>/dev/null
	done
	if [ -z "${JO_KEEP:-}" ]; then
		for d in "${JO_ENGINE_DIRS[@]}"; do rm -rf "$d"; done
	fi
}
JO_CLEANUP_HOOKS+=(jo_stop_engines)

# jo_certs DIR [USER]: a test CA and a server certificate for 127.0.0.1 /
# localhost signed by it (DIR/ca.pem, DIR/server.pem, DIR/server.key, and a
# second, unrelated CA DIR/other-ca.pem for "wrong CA" cases); the key is
# owned by USER when given.
jo_certs() {
	local d=$1 user=${2:-}
	mkdir -p "$d"
	[ -s "$d/server.pem" ] && return 0
	(
		cd "$d" || exit 1
		openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.pem -days 2 \
			-subj "/CN=jfsops test CA" >/dev/null 2>&1 &&
		openssl req -x509 -newkey rsa:2048 -nodes -keyout other-ca.key -out other-ca.pem -days 2 \
			-subj "/CN=another CA" >/dev/null 2>&1 &&
		openssl req -newkey rsa:2048 -nodes -keyout server.key -out server.csr \
			-subj "/CN=127.0.0.1" >/dev/null 2>&1 &&
		printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\n' >san.ext &&
		openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial \
			-out server.pem -days 2 -extfile san.ext >/dev/null 2>&1
	) || jo_die "jo_certs: openssl failed"
	chmod 600 "$d/server.key"
	if [ -n "$user" ] && [ "$(id -u)" = 0 ]; then chown "$user" "$d" "$d/server.key" "$d/server.pem"; fi
}

# ---------------------------------------------------------------- PostgreSQL

# start_postgres PORT: a scratch cluster on 127.0.0.1:PORT, TLS on (clients
# choose with sslmode; JO_PG_CERTS holds ca.pem); sets JO_PG_PORT.
start_postgres() {
	local port=$1 d
	jo_need_free_port "$port"
	JO_PG_BIN=${JO_PG_BIN:-$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)}
	[ -x "$JO_PG_BIN/initdb" ] || jo_die "PostgreSQL server binaries not found (apt-get install postgresql)"
	jo_service_dir d postgres pg
	JO_PG_DATA=$d/data
	mkdir -p "$d/sock"
	echo "$JO_PG_PASS" >"$d/pw"
	if [ "$(id -u)" = 0 ]; then chown postgres "$d/sock" "$d/pw"; fi
	JO_PG_CERTS=$d/certs
	jo_certs "$JO_PG_CERTS" postgres
	jo_as postgres "$JO_PG_BIN/initdb" -D "$JO_PG_DATA" -U postgres -E UTF8 --pwfile="$d/pw" \
		--auth-local=trust --auth-host=scram-sha-256 >"$d/initdb.log" 2>&1 ||
		{ jo_tail "$d/initdb.log"; jo_die "initdb failed"; }
	jo_as postgres "$JO_PG_BIN/pg_ctl" -D "$JO_PG_DATA" -l "$d/log" -w -t 60 start \
		-o "-p $port -c listen_addresses=127.0.0.1 -k $d/sock -c fsync=off -c max_connections=200 \
		    -c ssl=on -c ssl_cert_file=$JO_PG_CERTS/server.pem -c ssl_key_file=$JO_PG_CERTS/server.key" \
		>"$d/pg_ctl.log" 2>&1 || { jo_tail "$d/log"; jo_die "PostgreSQL on port $port did not start"; }
	JO_PG_SOCK=$d/sock
	JO_PG_PORT=$port
	[ -n "${JO_LANE_SERVER:-}" ] || JO_PG_OWN=1
	export JO_PG_PORT JO_PG_SOCK JO_PG_CERTS
	PGPASSWORD=$JO_PG_PASS psql -h 127.0.0.1 -p "$port" -U postgres -Atc 'select 1' postgres >/dev/null ||
		jo_die "PostgreSQL on 127.0.0.1:$port does not take the test password"
}

# pg_sql DB SQL: run SQL as the superuser over the Unix socket.
pg_sql() {
	psql -h "$JO_PG_SOCK" -p "$JO_PG_PORT" -U postgres -v ON_ERROR_STOP=1 -Atqc "$2" "$1"
}

# ---------------------------------------------------------------- MariaDB

# start_mariadb PORT: a scratch instance on 127.0.0.1:PORT with user jfs, TLS
# on (JO_MY_CERTS holds ca.pem); sets JO_MY_PORT.
start_mariadb() {
	local port=$1 d i
	jo_need_free_port "$port"
	command -v mariadbd >/dev/null || jo_die "mariadbd not found (apt-get install mariadb-server)"
	jo_service_dir d mysql maria
	mkdir -p "$d/run"
	if [ "$(id -u)" = 0 ]; then chown mysql "$d/run"; fi
	JO_MY_CERTS=$d/certs
	jo_certs "$JO_MY_CERTS" mysql
	jo_as mysql mariadb-install-db --no-defaults --datadir="$d/data" \
		--auth-root-authentication-method=socket --skip-test-db >"$d/install.log" 2>&1 ||
		{ jo_tail "$d/install.log"; jo_die "mariadb-install-db failed"; }
	local run=()
	[ "$(id -u)" != 0 ] || run=(runuser -u mysql --)
	# a lane server is in a session of its own: a script stopped as a whole
	# (its process group) does not take it along
	[ -z "${JO_LANE_SERVER:-}" ] || run=(setsid -w "${run[@]}")
	"${run[@]}" mariadbd --no-defaults --datadir="$d/data" --socket="$d/run/s.sock" \
		--port="$port" --bind-address=127.0.0.1 --pid-file="$d/run/pid" \
		--log-error="$d/err.log" --innodb-flush-log-at-trx-commit=0 --skip-log-bin \
		--innodb-buffer-pool-size=64M --max-connections=300 --ssl-ca="$JO_MY_CERTS/ca.pem" \
		--ssl-cert="$JO_MY_CERTS/server.pem" --ssl-key="$JO_MY_CERTS/server.key" >/dev/null 2>&1 &
	JO_MY_RUNNER=$!   # runuser, which does not pass signals on: the server's own pid is in its pidfile
	JO_MY_PIDFILE=$d/run/pid
	JO_MY_SOCK=$d/run/s.sock
	for i in $(seq 1 300); do
		kill -0 "$JO_MY_RUNNER" 2>/dev/null || { jo_tail "$d/err.log"; jo_die "mariadbd exited during start-up"; }
		[ -s "$d/run/pid" ] && JO_MY_PID=$(cat "$d/run/pid")
		[ -S "$JO_MY_SOCK" ] && mariadb -S "$JO_MY_SOCK" -u root -e 'select 1' >/dev/null 2>&1 && break
		sleep 0.1
	done
	[ "$i" -lt 300 ] || { jo_tail "$d/err.log"; jo_die "MariaDB on port $port did not answer within 30 s"; }
	my_sql "" "CREATE USER 'jfs'@'127.0.0.1' IDENTIFIED BY '$JO_MY_PASS';
		CREATE USER 'jfs'@'localhost' IDENTIFIED BY '$JO_MY_PASS';
		GRANT ALL ON *.* TO 'jfs'@'127.0.0.1'; GRANT ALL ON *.* TO 'jfs'@'localhost'" ||
		jo_die "cannot create the MariaDB test user"
	JO_MY_PORT=$port
	export JO_MY_PORT JO_MY_SOCK JO_MY_CERTS
}

# my_sql DB SQL: run SQL as root over the socket.
my_sql() {
	if [ -n "$1" ]; then
		mariadb -S "$JO_MY_SOCK" -u root -N -B -e "$2" "$1"
	else
		mariadb -S "$JO_MY_SOCK" -u root -N -B -e "$2"
	fi
}

# ---------------------------------------------------------------- Redis: TLS, Sentinel, Cluster

JO_RS_PASS=redispw       # the data nodes of the Sentinel set (requirepass/masterauth)
JO_SENT_PASS=sentpw      # the sentinels themselves (SENTINEL_PASSWORD)
JO_RS_MASTER=jfsmaster   # the name the sentinels monitor

# jo_redis_cli_tls PORT ARGS...: redis-cli to the TLS server.
jo_redis_cli_tls() {
	local port=$1
	shift
	redis-cli --tls --cacert "$JO_RTLS_CERTS/ca.pem" -h 127.0.0.1 -p "$port" "$@"
}

# start_redis_tls PORT: Debian's redis-server on TLS only (--port 0
# --tls-port PORT), certificates by jo_certs (JO_RTLS_CERTS); client
# certificates are optional and verified against the same CA when given.
start_redis_tls() {
	local port=$1 d i
	jo_need_free_port "$port"
	d=$JO_T/redis-tls-$port
	mkdir -p "$d"
	JO_RTLS_CERTS=$JO_T/redis-tls-certs
	jo_certs "$JO_RTLS_CERTS"
	redis-server --port 0 --tls-port "$port" --bind 127.0.0.1 --save '' --appendonly no \
		--daemonize yes --dir "$d" --logfile "$d/redis.log" --pidfile "$d/redis.pid" \
		--tls-cert-file "$JO_RTLS_CERTS/server.pem" --tls-key-file "$JO_RTLS_CERTS/server.key" \
		--tls-ca-cert-file "$JO_RTLS_CERTS/ca.pem" --tls-auth-clients optional >/dev/null ||
		{ jo_tail "$d/redis.log"; jo_die "TLS redis-server on port $port did not start"; }
	JO_REDIS_PIDS+=("$d/redis.pid")
	for i in $(seq 1 100); do
		[ "$(jo_redis_cli_tls "$port" ping 2>/dev/null)" = PONG ] && break
		sleep 0.1
	done
	[ "$i" -lt 100 ] || { jo_tail "$d/redis.log"; jo_die "TLS redis on 127.0.0.1:$port did not answer"; }
	JO_RTLS_PORT=$port
	export JO_RTLS_PORT JO_RTLS_CERTS
}

# jo_rs_cli PORT ARGS...: redis-cli to a data node of the Sentinel set;
# jo_sent_cli PORT ARGS...: to a sentinel.
jo_rs_cli() {
	local port=$1
	shift
	redis-cli -h 127.0.0.1 -p "$port" -a "$JO_RS_PASS" --no-auth-warning "$@"
}
jo_sent_cli() {
	local port=$1
	shift
	redis-cli -h 127.0.0.1 -p "$port" -a "$JO_SENT_PASS" --no-auth-warning "$@"
}

# start_redis_sentinel MASTER REPLICA S1 S2 S3: a master, its replica and 3
# sentinels (quorum 2) on loopback, all with passwords; waits until the
# replica is in sync and every sentinel knows the replica and the other two.
# Exports SENTINEL_PASSWORD (juicefs and jfsops read it) and JO_RS_PORTS.
start_redis_sentinel() {
	local mp=$1 rp=$2 keep=${JO_REDIS_PORT:-} s d i ok
	shift 2
	start_redis "$mp" --requirepass "$JO_RS_PASS" --masterauth "$JO_RS_PASS"
	start_redis "$rp" --requirepass "$JO_RS_PASS" --masterauth "$JO_RS_PASS" --replicaof 127.0.0.1 "$mp"
	JO_REDIS_PORT=$keep
	for i in $(seq 1 200); do
		jo_rs_cli "$rp" info replication 2>/dev/null | grep -q 'master_link_status:up' && break
		sleep 0.1
	done
	[ "$i" -lt 200 ] || jo_die "the Sentinel set's replica on $rp never synced with $mp"
	for s in "$@"; do
		jo_need_free_port "$s"
		d=$JO_T/sentinel-$s
		mkdir -p "$d"
		cat >"$d/sentinel.conf" <<-EOC
			port $s
			bind 127.0.0.1
			daemonize yes
			dir $d
			logfile $d/sentinel.log
			pidfile $d/sentinel.pid
			requirepass $JO_SENT_PASS
			sentinel sentinel-pass $JO_SENT_PASS
			sentinel monitor $JO_RS_MASTER 127.0.0.1 $mp 2
			sentinel auth-pass $JO_RS_MASTER $JO_RS_PASS
			sentinel down-after-milliseconds $JO_RS_MASTER 3000
			sentinel failover-timeout $JO_RS_MASTER 10000
			sentinel parallel-syncs $JO_RS_MASTER 1
		EOC
		redis-server "$d/sentinel.conf" --sentinel >/dev/null ||
			{ jo_tail "$d/sentinel.log"; jo_die "sentinel on port $s did not start"; }
		JO_REDIS_PIDS+=("$d/sentinel.pid")
	done
	for i in $(seq 1 300); do
		ok=1
		for s in "$@"; do
			jo_sent_cli "$s" sentinel master "$JO_RS_MASTER" 2>/dev/null |
				tr -d '\r' | awk 'p=="num-slaves"{r=$0} p=="num-other-sentinels"{o=$0} {p=$0}
					END{exit !(r==1 && o==2)}' || ok=0
		done
		[ "$ok" = 1 ] && break
		sleep 0.1
	done
	[ "$i" -lt 300 ] || { jo_tail "$JO_T/sentinel-$1/sentinel.log"; jo_die "the sentinels did not find the replica and each other within 30 s"; }
	JO_RS_PORTS="$mp $rp"
	JO_SENT_PORTS="$*"
	SENTINEL_PASSWORD=$JO_SENT_PASS
	export SENTINEL_PASSWORD JO_RS_PORTS JO_SENT_PORTS
}

# jo_rs_master: the port the sentinels name as master now.
jo_rs_master() {
	local s
	for s in $JO_SENT_PORTS; do
		jo_sent_cli "$s" sentinel get-master-addr-by-name "$JO_RS_MASTER" 2>/dev/null | sed -n 2p && return 0
	done
	return 1
}

# start_redis_cluster P1 P2 P3: a Redis Cluster of 3 masters (no replicas;
# cluster bus on P+10000), slots spread by redis-cli --cluster create.
start_redis_cluster() {
	local keep=${JO_REDIS_PORT:-} p i ok addrs=()
	for p in "$@"; do
		jo_need_free_port $((p + 10000))
		start_redis "$p" --cluster-enabled yes --cluster-config-file nodes.conf \
			--cluster-node-timeout 5000
		addrs+=("127.0.0.1:$p")
	done
	JO_REDIS_PORT=$keep
	redis-cli --cluster create "${addrs[@]}" --cluster-replicas 0 --cluster-yes >"$JO_T/cluster-create.log" 2>&1 ||
		{ jo_tail "$JO_T/cluster-create.log"; jo_die "redis-cli --cluster create failed"; }
	for i in $(seq 1 300); do
		ok=1
		for p in "$@"; do
			redis-cli -h 127.0.0.1 -p "$p" cluster info 2>/dev/null | grep -q 'cluster_state:ok' || ok=0
		done
		[ "$ok" = 1 ] && break
		sleep 0.1
	done
	[ "$i" -lt 300 ] || jo_die "the Redis Cluster on $* did not reach cluster_state:ok"
	JO_RC_PORTS="$*"
	export JO_RC_PORTS
}

# ---------------------------------------------------------------- etcd

JO_ETCD_PIDS=()
declare -gA JO_ETCD_CTL=() # client port -> etcdctl flags that reach it

jo_stop_etcd() {
	local pid
	for pid in "${JO_ETCD_PIDS[@]}"; do
		kill -CONT "$pid" 2>/dev/null # a test may have stopped it
		kill -TERM "$pid" 2>/dev/null
	done
	for pid in "${JO_ETCD_PIDS[@]}"; do
		for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
		kill -KILL "$pid" 2>/dev/null
		wait "$pid" 2>/dev/null
	done
	JO_ETCD_PIDS=()
}
JO_CLEANUP_HOOKS+=(jo_stop_etcd)

# jo_etcdctl PORT ARGS...: ETCDCTL_API=3 etcdctl against the etcd started on
# PORT (its scheme, CA, client certificate and root user).
jo_etcdctl() {
	local port=$1
	shift
	[ -n "${JO_ETCD_CTL[$port]:-}" ] || jo_die "jo_etcdctl: no etcd started on port $port"
	# shellcheck disable=SC2086 # the flags are words without blanks
	ETCDCTL_API=3 etcdctl ${JO_ETCD_CTL[$port]} "$@"
}

# start_etcd PORT [--tls] [--client-certs] [--auth ROOTPASS] [--token-ttl S]:
# one loopback etcd 3.4 node, data under $JO_T, client port PORT, peer
# PORT+1; stopped by pid at cleanup. --tls serves https with the jo_certs
# certificate (JO_ETCD_CERTS holds ca.pem, other-ca.pem, server.pem/.key);
# --client-certs also requires a client certificate signed by that CA (the
# server's own pair will do); --auth ROOTPASS adds user root with that
# password and turns authentication on; --token-ttl sets how long an auth
# token lives unused (etcd's default: 300 s). Sets JO_ETCD_PORT and
# JO_ETCD_PID. Dies loudly when it does not answer within 30 s.
start_etcd() {
	local port=$1 peer=$(($1 + 1)) tls= ccert= auth= ttl= scheme=http d pid i ctl
	local extra=()
	shift
	while [ $# -gt 0 ]; do
		case $1 in
		--tls) tls=1 ;;
		--client-certs) tls=1 ccert=1 ;;
		--auth) auth=$2; shift ;;
		--token-ttl) ttl=$2; shift ;;
		*) jo_die "start_etcd: unknown option '$1'" ;;
		esac
		shift
	done
	[ -n "${JO_T:-}" ] || jo_die "start_etcd: call jo_setup first"
	command -v etcd >/dev/null || jo_die "etcd not found (apt-get install etcd-server)"
	command -v etcdctl >/dev/null || jo_die "etcdctl not found (apt-get install etcd-client)"
	jo_need_free_port "$port" "$peer"
	d=$JO_T/etcd-$port
	mkdir -p "$d"
	ctl="--endpoints=$scheme://127.0.0.1:$port --dial-timeout=5s --command-timeout=30s"
	if [ -n "$tls" ]; then
		JO_ETCD_CERTS=$JO_T/etcd-certs
		jo_certs "$JO_ETCD_CERTS"
		scheme=https
		extra+=(--cert-file "$JO_ETCD_CERTS/server.pem" --key-file "$JO_ETCD_CERTS/server.key")
		ctl="--endpoints=https://127.0.0.1:$port --dial-timeout=5s --command-timeout=30s"
		ctl+=" --cacert=$JO_ETCD_CERTS/ca.pem"
		if [ -n "$ccert" ]; then
			extra+=(--client-cert-auth --trusted-ca-file "$JO_ETCD_CERTS/ca.pem")
			ctl+=" --cert=$JO_ETCD_CERTS/server.pem --key=$JO_ETCD_CERTS/server.key"
		fi
	fi
	[ -z "$ttl" ] || extra+=(--auth-token-ttl "$ttl")
	etcd --name "jo$port" --data-dir "$d/data" \
		--listen-client-urls "$scheme://127.0.0.1:$port" \
		--advertise-client-urls "$scheme://127.0.0.1:$port" \
		--listen-peer-urls "http://127.0.0.1:$peer" \
		--initial-advertise-peer-urls "http://127.0.0.1:$peer" \
		--initial-cluster "jo$port=http://127.0.0.1:$peer" --initial-cluster-state new \
		"${extra[@]}" >"$d/log" 2>&1 &
	pid=$!
	JO_ETCD_PIDS+=("$pid")
	JO_ETCD_CTL[$port]=$ctl
	for i in $(seq 1 300); do
		kill -0 "$pid" 2>/dev/null || { jo_tail "$d/log"; jo_die "etcd on port $port exited during start-up"; }
		jo_etcdctl "$port" endpoint health >/dev/null 2>&1 && break
		sleep 0.1
	done
	[ "$i" -lt 300 ] || { jo_tail "$d/log"; jo_die "etcd on 127.0.0.1:$port did not answer within 30 s"; }
	if [ -n "$auth" ]; then
		jo_etcdctl "$port" user add "root:$auth" >/dev/null &&
			jo_etcdctl "$port" user grant-role root root >/dev/null &&
			jo_etcdctl "$port" auth enable >/dev/null ||
			{ jo_tail "$d/log"; jo_die "cannot turn authentication on in etcd on port $port"; }
		JO_ETCD_CTL[$port]="$ctl --user=root:$auth"
		jo_etcdctl "$port" get --keys-only --limit 1 probe >/dev/null ||
			jo_die "etcd on port $port does not take its root password"
	fi
	JO_ETCD_PORT=$port
	JO_ETCD_PID=$pid
	export JO_ETCD_PORT JO_ETCD_CERTS
}

# ---------------------------------------------------------------- lane servers

# jo_lane_env FILE VAR...: save the variables as assignments FILE can be
# sourced with (in a function too: no declare).
jo_lane_env() {
	local f=$1 v
	shift
	for v in "$@"; do printf '%s=%q\n' "$v" "${!v}"; done >"$f.tmp" && mv "$f.tmp" "$f"
}

# jo_lane_claim ENGINE: the first engine_start of ENGINE in this script
# empties the lane's server (an earlier script's databases, connections),
# and has the script's own dropped when it exits.
jo_lane_claim() {
	local e=$1 owner=$JO_LANE_DIR/$1.owner
	if [ "$(cat "$owner" 2>/dev/null)" != "$JO_T" ]; then
		"jo_lane_clean_$e" || jo_die "cannot empty the lane's $e server"
		echo "$JO_T" >"$owner"
		jo_log "$e: the lane's server (emptied for this script)"
	fi
	case " ${JO_LANE_CLEAN:-} " in *" $e "*) ;; *) JO_LANE_CLEAN="${JO_LANE_CLEAN:-} $e" ;; esac
}

# jo_lane_clean: at cleanup, drop the databases this script made.
jo_lane_clean() {
	local e
	for e in $JO_LANE_CLEAN; do
		"jo_lane_clean_$e" || echo "warning: could not empty the lane's $e server" >&2
	done
	JO_LANE_CLEAN=
}

jo_lane_clean_postgres() {
	local db
	for db in $(pg_sql postgres "SELECT datname FROM pg_database
		WHERE datname NOT IN ('postgres', 'template0', 'template1')"); do
		pg_sql postgres "DROP DATABASE \"$db\" WITH (FORCE)" >/dev/null || return 1
	done
}

jo_lane_clean_mysql() {
	local id db
	# sessions of the test user (a killed client's may still hold locks)
	for id in $(my_sql "" "SELECT id FROM information_schema.processlist WHERE user = 'jfs'"); do
		my_sql "" "KILL $id" 2>/dev/null
	done
	for db in $(my_sql "" "SHOW DATABASES" | grep -vxE 'information_schema|mysql|performance_schema|sys'); do
		my_sql "" "SET SESSION lock_wait_timeout = 30; DROP DATABASE \`$db\`" || return 1
	done
}

# jo_lane_postgres: the lane's PostgreSQL (JO_PORT_BASE+124), started when
# the lane has none that answers; emptied for this script.
jo_lane_postgres() {
	local f=$JO_LANE_DIR/postgres.env
	if [ -f "$f" ]; then
		. "$f"
		if PGPASSWORD=$JO_PG_PASS psql -h 127.0.0.1 -p "$JO_PG_PORT" -U postgres -Atc 'select 1' \
			postgres >/dev/null 2>&1; then
			export JO_PG_PORT JO_PG_SOCK JO_PG_CERTS
			jo_lane_claim postgres
			return 0
		fi
		jo_log "the lane's PostgreSQL on port $JO_PG_PORT does not answer: starting another"
		jo_as postgres "$JO_PG_BIN/pg_ctl" -D "$JO_PG_DATA" -m immediate -w stop >/dev/null 2>&1
		rm -f "$f"
	fi
	JO_LANE_SERVER=1 start_postgres $((JO_PORT_BASE + 124))
	jo_lane_env "$f" JO_PG_BIN JO_PG_DATA JO_PG_SOCK JO_PG_PORT JO_PG_CERTS
	jo_lane_claim postgres
}

# jo_lane_mariadb: the lane's MariaDB (JO_PORT_BASE+125), likewise.
jo_lane_mariadb() {
	local f=$JO_LANE_DIR/mysql.env
	if [ -f "$f" ]; then
		. "$f"
		if mariadb -S "$JO_MY_SOCK" -u root -e 'select 1' >/dev/null 2>&1; then
			export JO_MY_PORT JO_MY_SOCK JO_MY_CERTS
			jo_lane_claim mysql
			return 0
		fi
		jo_log "the lane's MariaDB on port $JO_MY_PORT does not answer: starting another"
		jo_lane_stop_mariadb "$JO_MY_LANE_PIDFILE"
		rm -f "$f"
	fi
	JO_LANE_SERVER=1 start_mariadb $((JO_PORT_BASE + 125))
	JO_MY_LANE_PIDFILE=$JO_MY_PIDFILE
	# not this script's to stop
	JO_MY_RUNNER= JO_MY_PID= JO_MY_PIDFILE=
	jo_lane_env "$f" JO_MY_LANE_PIDFILE JO_MY_SOCK JO_MY_PORT JO_MY_CERTS
	jo_lane_claim mysql
}

jo_lane_stop_mariadb() {
	local pid
	pid=$(cat "$1" 2>/dev/null) || return 0
	[ -n "$pid" ] || return 0
	kill -TERM "$pid" 2>/dev/null || return 0
	for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.1; done
	kill -KILL "$pid" 2>/dev/null
}

# jo_lane_stop DIR: stop the servers of lane directory DIR (tests/run_all.sh,
# when every script of the lane is done).
jo_lane_stop() {
	local d=$1
	if [ -f "$d/postgres.env" ]; then
		(
			. "$d/postgres.env"
			jo_as postgres "$JO_PG_BIN/pg_ctl" -D "$JO_PG_DATA" -m immediate -w stop >/dev/null 2>&1
		)
	fi
	if [ -f "$d/mysql.env" ]; then
		(
			. "$d/mysql.env"
			jo_lane_stop_mariadb "$JO_MY_LANE_PIDFILE"
		)
	fi
	rm -f "$d"/*.env "$d"/*.owner
}

# ---------------------------------------------------------------- per engine

# engine_start ENGINE: start its server unless this script already did.
engine_start() {
	local e=$1
	case $JO_ENGINE_STARTED in *" $e "*) return 0 ;; esac
	case $e in
	redis) start_redis "${JO_ENGINE_REDIS_PORT:-$((JO_PORT_BASE + 0))}" ;;
	redis-tls) start_redis_tls $((JO_PORT_BASE + 6)) ;;
	redis-sentinel)
		start_redis_sentinel $((JO_PORT_BASE + 7)) $((JO_PORT_BASE + 8)) \
			$((JO_PORT_BASE + 17)) $((JO_PORT_BASE + 18)) $((JO_PORT_BASE + 19))
		;;
	redis-cluster) start_redis_cluster $((JO_PORT_BASE + 14)) $((JO_PORT_BASE + 15)) $((JO_PORT_BASE + 16)) ;;
	sqlite3) ;;
	postgres)
		if [ -n "${JO_LANE_DIR:-}" ]; then jo_lane_postgres; else start_postgres $((JO_PORT_BASE + 24)); fi
		;;
	mysql)
		if [ -n "${JO_LANE_DIR:-}" ]; then jo_lane_mariadb; else start_mariadb $((JO_PORT_BASE + 25)); fi
		;;
	etcd)
		start_etcd $((JO_PORT_BASE + 26))
		JO_ETCD_ENGINE_PORT=$JO_ETCD_PORT
		;;
	*) jo_die "engine_start: unknown engine '$e'" ;;
	esac
	JO_ENGINE_STARTED="$JO_ENGINE_STARTED$e "
	JO_NEXT_DB=${JO_NEXT_DB:-1}
}

# engine_meta ENGINE NAME: JO_META := the META-URL of a new, empty database
# for volume NAME (a Redis db number, a SQLite file, a PostgreSQL or MariaDB
# database, an etcd key prefix "/NAME"). Not in $(...): it counts Redis
# databases in this shell.
engine_meta() {
	local e=$1 name=$2 db
	db=$(echo "$name" | tr -c 'a-z0-9\n' '_')
	case $e in
	redis)
		[ "${JO_NEXT_DB:-1}" -lt 16 ] || jo_die "engine_meta: out of Redis databases"
		JO_META="redis://127.0.0.1:$JO_REDIS_PORT/${JO_NEXT_DB:-1}"
		JO_NEXT_DB=$((${JO_NEXT_DB:-1} + 1))
		;;
	redis-tls | redis-sentinel | redis-cluster)
		[ "${JO_NEXT_DB:-1}" -lt 16 ] || jo_die "engine_meta: out of Redis databases"
		case $e in
		redis-tls) JO_META="rediss://127.0.0.1:$JO_RTLS_PORT/${JO_NEXT_DB:-1}?tls-ca-cert-file=$JO_RTLS_CERTS/ca.pem" ;;
		redis-sentinel)
			JO_META="redis://:$JO_RS_PASS@$JO_RS_MASTER$(printf ',127.0.0.1:%s' $JO_SENT_PORTS)/${JO_NEXT_DB:-1}"
			;;
		redis-cluster) JO_META="redis://$(echo $JO_RC_PORTS | sed 's/^/127.0.0.1:/; s/ /,127.0.0.1:/g')/${JO_NEXT_DB:-1}" ;;
		esac
		JO_NEXT_DB=$((${JO_NEXT_DB:-1} + 1))
		;;
	sqlite3) JO_META="sqlite3://$JO_T/$db.db" ;;
	postgres)
		pg_sql postgres "CREATE DATABASE $db" >/dev/null || jo_die "cannot create PostgreSQL database $db"
		JO_META="postgres://postgres:$JO_PG_PASS@127.0.0.1:$JO_PG_PORT/$db?sslmode=disable"
		;;
	mysql)
		my_sql "" "CREATE DATABASE $db" || jo_die "cannot create MariaDB database $db"
		JO_META="mysql://jfs:$JO_MY_PASS@(127.0.0.1:$JO_MY_PORT)/$db"
		;;
	etcd)
		case $name in *[!A-Za-z0-9._-]* | "") jo_die "engine_meta: bad etcd volume name '$name'" ;; esac
		[ -n "${JO_ETCD_ENGINE_PORT:-}" ] || jo_die "engine_meta etcd: engine_start etcd first"
		# the volume's keys are "/NAME" + 0xFD + ...: that prefix must be unused
		[ -z "$(jo_etcdctl "$JO_ETCD_ENGINE_PORT" get --prefix --keys-only --limit 1 \
			"$(printf '/%s\375' "$name")")" ] || jo_die "engine_meta: etcd prefix /$name is in use"
		JO_META="etcd://127.0.0.1:$JO_ETCD_ENGINE_PORT/$name"
		;;
	*) jo_die "engine_meta: unknown engine '$e'" ;;
	esac
}

# engine_new ENGINE NAME: the metadata (engine_meta) and the object store
# (engine_store) of a new volume NAME on ENGINE: JO_META, JO_BUCKET, JO_STORE.
engine_new() {
	engine_meta "$1" "$2"
	engine_store "$1" "$2"
}

# engine_each SCRIPT FN: for every engine of JO_ENGINES (default: PostgreSQL,
# MariaDB and etcd), start it and run FN ENGINE; "SCRIPT: ENGINE ok" on
# stderr after each and "SCRIPT: ok" at the end.
engine_each() {
	local script=$1 fn=$2 e
	for e in ${JO_ENGINES:-postgres mysql etcd}; do
		engine_start "$e"
		"$fn" "$e"
		echo "$script: $e ok" >&2
	done
	echo "$script: ok"
}

# engine_volume ENGINE NAME MP [MOUNT FLAGS...]: start ENGINE, make the
# volume NAME on it (metadata by engine_meta NAME, objects in
# $JO_T/bucket-ENGINE, --trash-days 1) and mount it at MP with the flags.
# Sets meta to its META-URL.
engine_volume() {
	local e=$1 name=$2 mount=$3
	shift 3
	engine_start "$e"
	engine_meta "$e" "$name"
	meta=$JO_META
	jfs_format "$meta" "$JO_T/bucket-$e" "$name" --trash-days 1
	jfs_mount "$meta" "$mount" "$@"
}

# engine_store ENGINE NAME: where volume NAME keeps its objects: JO_BUCKET
# (for jfs_format) and JO_STORE (for the leakcheck helpers: file:DIR or
# s3:BUCKET). By engine, so every run covers both stores: sqlite3,
# postgres and etcd use file storage, redis and mysql SeaweedFS (started
# once, at JO_PORT_BASE+10); JO_STORAGE=file|s3 overrides.
engine_store() {
	local e=$1 name=$2 kind
	kind=${JO_STORAGE:-}
	if [ -z "$kind" ]; then
		case $e in redis* | mysql) kind=s3 ;; *) kind=file ;; esac # sqlite3, postgres, etcd
	fi
	if [ "$kind" = s3 ]; then
		[ -n "${JO_S3_ENDPOINT:-}" ] || start_seaweed $((JO_PORT_BASE + 10))
		s3_mkbucket "$name"
		JO_BUCKET=$JO_S3_ENDPOINT/$name
		JO_STORE=s3:$name
	else
		JO_BUCKET=$JO_T/bucket-$name
		JO_STORE=file:$JO_BUCKET
	fi
}
