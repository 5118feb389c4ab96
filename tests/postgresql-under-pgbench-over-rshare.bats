#!/usr/bin/env bats
# PostgreSQL on node A (the postmaster accepts each connection, then forks
# a backend that serves it) and pgbench on node B: initialise scale 1
# (100,000 rows sent with COPY), then 4 clients run the TPC-B-like script
# for 2 s.  First all on kernel TCP (the baseline), then server and client
# preloaded: every transaction succeeds and the hubs' stat shows every
# connection and at least the bytes moved on the one link between the
# nodes.  With only the server or only the client preloaded pgbench
# succeeds on kernel TCP and no link carries a connection.  The
# transaction rates are printed, never asserted.

load lib
load apps

PORT=5433
CLIENTS=4

setup() {
	rs_require
	local b
	PGBIN=
	for b in /usr/lib/postgresql/*/bin; do
		[[ -x $b/postgres && -x $b/initdb && -x $b/pgbench ]] && PGBIN=$b
	done
	[[ -n $PGBIN ]] || skip "PostgreSQL's postgres, initdb and pgbench not installed (Debian package postgresql)"
	id postgres >/dev/null 2>&1 || skip "no user postgres (Debian package postgresql makes it)"
	app_require setpriv:util-linux
	rs_setup
	rs_two_nodes
	PGDIR=$(app_dir pg postgres)
	# the server runs as postgres, which refuses to run as root
	as_pg "$PGBIN/initdb" -D "$PGDIR/data" -U postgres -A trust -E UTF8 --locale=C.UTF-8 \
		--no-sync >"$RS_TMP/initdb.log" 2>&1 || rs_fail "initdb: $(tail "$RS_TMP/initdb.log")"
	echo "host all all 10.199.0.0/24 trust" >>"$PGDIR/data/pg_hba.conf"
	PG_PID=
}

teardown() {
	pg_stop_now
	rs_teardown
}

# In the sanitizer pass (tests/san/san.bash) the ASan-built library is
# preloaded into postgres, which is not built with ASan: libasan then comes
# in as the library's dependency, and the constructor of libcap-ng (libpam
# -> libaudit -> libcap-ng) calls close() into the library before ASan is
# initialised, which crashes.  The client's side (pgbench) is unaffected.
server_preload_ok() {
	[[ ${RSHARE_SAN_PASS:-0} != 1 ]] ||
		skip "sanitizer pass: an ASan-built library cannot be preloaded into postgres (libcap-ng's constructor runs before ASan's)"
}

as_pg() {
	setpriv --reuid=postgres --regid=postgres --init-groups -- "$@"
}

# pg_start [--rshare]: the postmaster on node A, as postgres
pg_start() {
	rs_bg pg "$NS_A" "$@" setpriv --reuid=postgres --regid=postgres --init-groups -- \
		"$PGBIN/postgres" -D "$PGDIR/data" -c listen_addresses=$ADDR_A -c port=$PORT \
		-c unix_socket_directories="$PGDIR" -c max_connections=20 -c shared_buffers=16MB \
		-c fsync=off -c synchronous_commit=off -c full_page_writes=off -c logging_collector=off
	PG_PID=$RS_LASTPID
	app_wait_log "$RS_TMP/pg.err" 'database system is ready to accept connections' "$PG_PID" 30
	app_wait_listen "$NS_A" $PORT "$PG_PID"
}

# pg_stop: a fast shutdown (SIGINT to the postmaster), waited for
pg_stop() {
	APP_STOP_SIG=INT app_stop "$PG_PID" 20 || rs_fail "postgres did not stop: $(tail -n 5 "$RS_TMP/pg.err")"
	PG_PID=
}

# in teardown: an immediate shutdown, which still removes the shared memory
pg_stop_now() {
	[[ -n $PG_PID ]] || return 0
	APP_STOP_SIG=QUIT app_stop "$PG_PID" 10 || true
	PG_PID=
}

# pginit NAME [--rshare]: pgbench -i -s 1 from node B
pginit() {
	local name=$1
	shift
	app_run "$name" "$NS_B" "$@" "$PGBIN/pgbench" -h $ADDR_A -p $PORT -U postgres -i -s 1 -q postgres
}

# bench NAME SECS [--rshare]: pgbench from node B for SECS; sets TXNS and
# RATE (transactions per second, without the connection time)
bench() {
	local name=$1 secs=$2 failed
	shift 2
	app_run "$name" "$NS_B" "$@" "$PGBIN/pgbench" -h $ADDR_A -p $PORT -U postgres \
		-c $CLIENTS -j 2 -T "$secs" postgres
	TXNS=$(sed -n 's/^number of transactions actually processed: *\([0-9]*\).*/\1/p' "$RS_TMP/$name.out")
	failed=$(sed -n 's/^number of failed transactions: *\([0-9]*\).*/\1/p' "$RS_TMP/$name.out")
	RATE=$(sed -n 's/^tps = \([0-9.]*\) (without initial connection time).*/\1/p' "$RS_TMP/$name.out")
	[[ -n $TXNS && -n $RATE ]] && ((TXNS > 0 && ${failed:-0} == 0)) ||
		rs_fail "$name: pgbench failed: $(cat "$RS_TMP/$name.out" "$RS_TMP/$name.err")"
}

@test "postgresql: pgbench initialises and runs over one rshare link, a forked backend per connection" {
	local k r
	server_preload_ok
	# kernel TCP: the baseline, and the harness checked
	pg_start
	pginit kernel-init
	bench kernel 2
	k=$RATE
	pg_stop

	# rshare: server and client preloaded
	pg_start --rshare
	app_snap before
	pginit rshare-init --rshare
	app_snap init
	# 100,000 rows of pgbench_accounts in COPY, at least 7 bytes each
	app_check_rshare "pgbench -i went over the link" before init 1 700000 100
	bench rshare 2 --rshare
	r=$RATE
	app_snap run
	# a transaction sends 7 statements (over 200 bytes) and gets over 100 back
	app_check_rshare "pgbench's $CLIENTS clients went over the link" init run \
		$CLIENTS $((TXNS * 200)) $((TXNS * 100))
	app_rates "postgresql pgbench TPC-B ($CLIENTS clients)" "$r" "$k" "tps"
}

@test "postgresql: with only the server preloaded, plain pgbench reaches its kernel listener" {
	server_preload_ok
	pg_start --rshare
	app_snap s0
	pginit server-init
	bench server 1
	app_snap s1
	app_check_fallback "plain pgbench to a preloaded postgres" s0 s1 server 0 $PORT
}

@test "postgresql: with only the client preloaded, pgbench falls back to kernel TCP" {
	pg_start
	app_snap c0
	pginit client-init --rshare
	bench client 1 --rshare
	app_snap c1
	app_check_fallback "preloaded pgbench to a plain postgres" c0 c1 client $((1 + CLIENTS)) $PORT
}
