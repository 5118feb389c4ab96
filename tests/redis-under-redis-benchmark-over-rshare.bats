#!/usr/bin/env bats
# Redis (one event loop on epoll) on node A, redis-cli and redis-benchmark
# on node B: redis-cli stores a 64 KiB random value and reads it back
# (compared byte for byte), then redis-benchmark runs 40,000 SETs and
# 40,000 GETs over 16 connections.  First all on kernel TCP (the baseline),
# then server and clients preloaded: every command succeeds and the hubs'
# stat shows every connection and at least the bytes moved on the one link
# between the nodes.  With only the server or only the clients preloaded
# the same succeeds on kernel TCP and no link carries a connection.  The
# request rates are printed, never asserted.

load lib
load apps

PORT=6380
CONNS=16
REQUESTS=40000
VALUE_SIZE=65536

setup() {
	rs_require
	app_require redis-server redis-benchmark:redis-tools redis-cli:redis-tools base64:coreutils
	rs_setup
	rs_two_nodes
	DATA=$(app_dir data)
	# redis-cli takes the value as an argument: random bytes in base64
	head -c $((VALUE_SIZE * 3 / 4)) /dev/urandom | base64 -w0 >"$DATA/value.txt"
	REDIS_PID=
}

teardown() {
	app_stop "$REDIS_PID"
	rs_teardown
}

# redis_start [--rshare]: redis-server on node A, no persistence
redis_start() {
	rs_bg redis "$NS_A" "$@" redis-server --bind $ADDR_A --port $PORT --protected-mode no \
		--daemonize no --save '' --appendonly no --dir "$DATA" --logfile '' --loglevel notice
	REDIS_PID=$RS_LASTPID
	app_wait_log "$RS_TMP/redis.out" 'Ready to accept connections' "$REDIS_PID"
	app_wait_listen "$NS_A" $PORT "$REDIS_PID"
}

redis_stop() {
	app_stop "$REDIS_PID" || rs_fail "redis-server did not stop"
	REDIS_PID=
}

# roundtrip NAME [--rshare]: SET the value, GET it back, compare
roundtrip() {
	local name=$1 key=value-$1
	shift
	app_run "$name-set" "$NS_B" "$@" redis-cli -h $ADDR_A -p $PORT SET "$key" "$(cat "$DATA/value.txt")"
	[[ $(cat "$RS_TMP/$name-set.out") == OK ]] || rs_fail "$name: SET answered $(head -c 200 "$RS_TMP/$name-set.out")"
	app_run "$name-get" "$NS_B" "$@" redis-cli -h $ADDR_A -p $PORT GET "$key"
	cmp <(tr -d '\n' <"$RS_TMP/$name-get.out") "$DATA/value.txt" >&2 ||
		rs_fail "$name: the value read back differs from the one stored"
}

# bench NAME [--rshare]: redis-benchmark SET and GET from node B; sets
# SET_RATE and GET_RATE (requests per second)
bench() {
	local name=$1
	shift
	# redis-benchmark retries a refused connection for ever: APP_TIMEOUT ends it
	app_run "$name" "$NS_B" "$@" redis-benchmark -h $ADDR_A -p $PORT -c $CONNS -n $REQUESTS \
		-t set,get --csv
	SET_RATE=$(sed -n 's/^"SET","\([0-9.]*\)".*/\1/p' "$RS_TMP/$name.out")
	GET_RATE=$(sed -n 's/^"GET","\([0-9.]*\)".*/\1/p' "$RS_TMP/$name.out")
	[[ -n $SET_RATE && -n $GET_RATE ]] && ! grep -qiE 'error|could not' "$RS_TMP/$name.err" ||
		rs_fail "$name: redis-benchmark failed: $(cat "$RS_TMP/$name.out"; head -n 5 "$RS_TMP/$name.err")"
}

@test "redis: redis-cli and redis-benchmark over one rshare link" {
	local k_set k_get
	# kernel TCP: the baseline, and the harness checked
	redis_start
	roundtrip kernel
	bench kernel
	k_set=$SET_RATE k_get=$GET_RATE
	redis_stop

	# rshare: server and clients preloaded
	redis_start --rshare
	app_snap before
	roundtrip rshare --rshare
	app_snap copied
	app_check_rshare "redis-cli's SET and GET went over the link" before copied \
		2 $VALUE_SIZE $VALUE_SIZE
	bench rshare --rshare
	app_snap bench
	# a SET or GET request is over 30 bytes, its answer at least "+OK\r\n"
	app_check_rshare "redis-benchmark went over the link" copied bench \
		$CONNS $((2 * REQUESTS * 30)) $((2 * REQUESTS * 5))
	app_rates "redis SET (redis-benchmark -c $CONNS)" "$SET_RATE" "$k_set"
	app_rates "redis GET (redis-benchmark -c $CONNS)" "$GET_RATE" "$k_get"
}

@test "redis: with only the server preloaded, plain clients reach its kernel listener" {
	redis_start --rshare
	app_snap s0
	roundtrip server
	bench server
	app_snap s1
	app_check_fallback "plain clients to a preloaded redis" s0 s1 server 0 $PORT
}

@test "redis: with only the clients preloaded, they fall back to kernel TCP" {
	redis_start
	app_snap c0
	roundtrip client --rshare
	bench client --rshare
	app_snap c1
	app_check_fallback "preloaded clients to a plain redis" c0 c1 client $((2 + CONNS)) $PORT
}
