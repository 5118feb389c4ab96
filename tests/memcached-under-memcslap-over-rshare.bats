#!/usr/bin/env bats
# memcached (4 threads on libevent's epoll) on node A, libmemcached's tools
# on node B: memccp stores a 64 KiB random value and memccat reads it back
# (compared byte for byte), then memcslap sets 40,000 keys and gets 40,000
# with 4 threads.  First all on kernel TCP (the baseline), then server and
# clients preloaded: every key is stored and read and the hubs' stat shows
# every connection and at least the bytes moved on the one link between
# the nodes.  With only the server or only the clients preloaded the same
# succeeds on kernel TCP and no link carries a connection.  The operation
# rates are printed, never asserted.

load lib
load apps

PORT=11212
THREADS=4
PER_THREAD=10000
VALUE_SIZE=65536

setup() {
	rs_require
	app_require memcached memccp:libmemcached-tools memccat:libmemcached-tools
	MEMCSLAP=$(command -v memcslap || command -v memcaslap || true)
	[[ -n $MEMCSLAP ]] || skip "memcslap not installed (Debian package libmemcached-tools)"
	id memcache >/dev/null 2>&1 || skip "no user memcache for memcached to drop root to"
	rs_setup
	rs_two_nodes
	DATA=$(app_dir data)
	head -c $VALUE_SIZE /dev/urandom >"$DATA/value.bin"
	MC_PID=
}

teardown() {
	app_stop "$MC_PID"
	rs_teardown
}

# mc_start [--rshare]: memcached on node A, TCP only
mc_start() {
	rs_bg memcached "$NS_A" "$@" memcached -u memcache -l $ADDR_A -p $PORT -U 0 \
		-t 4 -m 64 -c 1024
	MC_PID=$RS_LASTPID
	app_wait_listen "$NS_A" $PORT "$MC_PID"
}

mc_stop() {
	app_stop "$MC_PID" || rs_fail "memcached did not stop"
	MC_PID=
}

# roundtrip NAME [--rshare]: memccp stores value.bin, memccat reads it back
roundtrip() {
	local name=$1
	shift
	rm -f "$RS_TMP/$name.got"
	app_run "$name-cp" "$NS_B" "$@" memccp --servers=$ADDR_A:$PORT "$DATA/value.bin"
	app_run "$name-cat" "$NS_B" "$@" memccat --servers=$ADDR_A:$PORT --file="$RS_TMP/$name.got" value.bin
	cmp "$DATA/value.bin" "$RS_TMP/$name.got" >&2 ||
		rs_fail "$name: the value read back differs from the one stored"
}

# bench NAME TEST [--rshare]: memcslap's TEST (set or get) from node B;
# sets OPS (keys set or got by the threads) and RATE (per second)
bench() {
	local name=$1 test=$2 secs
	shift 2
	app_run "$name" "$NS_B" "$@" "$MEMCSLAP" --servers=$ADDR_A:$PORT --concurrency=$THREADS \
		--execute-number=$PER_THREAD --test="$test"
	read -r OPS secs < <(sed -n "s/^Time to $test *\([0-9]*\) keys by *$THREADS threads: *\([0-9.]*\) seconds.*/\1 \2/p" "$RS_TMP/$name.out")
	# memcslap exits 0 whatever failed: it counts the keys that worked
	[[ ${OPS:-0} -eq $((THREADS * PER_THREAD)) ]] && ! grep -qi error "$RS_TMP/$name.err" ||
		rs_fail "$name: memcslap did not $test every key: $(cat "$RS_TMP/$name.out"; head -n 5 "$RS_TMP/$name.err")"
	RATE=$(awk -v n="$OPS" -v s="$secs" 'BEGIN { printf "%.0f", (s > 0 ? n / s : 0) }')
}

@test "memcached: memccp, memccat and memcslap over one rshare link" {
	local k_set k_get r_set r_get
	local ops=$((THREADS * PER_THREAD))
	# kernel TCP: the baseline, and the harness checked
	mc_start
	roundtrip kernel
	bench kernel-set set
	k_set=$RATE
	bench kernel-get get
	k_get=$RATE
	mc_stop

	# rshare: server and clients preloaded
	mc_start --rshare
	app_snap before
	roundtrip rshare --rshare
	app_snap copied
	app_check_rshare "memccp and memccat went over the link" before copied \
		2 $VALUE_SIZE $VALUE_SIZE
	bench rshare-set set --rshare
	r_set=$RATE
	app_snap set
	# a set is at least "set k 0 0 1\r\nv\r\n" (16 bytes), its answer "STORED\r\n"
	app_check_rshare "memcslap's sets went over the link" copied set \
		$THREADS $((ops * 16)) $((ops * 8))
	app_rates "memcached set (memcslap, $THREADS threads)" "$r_set" "$k_set" "ops/s"
	bench rshare-get get --rshare
	r_get=$RATE
	app_snap get
	# a get is at least "get k\r\n" (7 bytes), a hit's answer more than "END\r\n"
	app_check_rshare "memcslap's gets went over the link" set get \
		$THREADS $((ops * 7)) $((ops * 5))
	app_rates "memcached get (memcslap, $THREADS threads)" "$r_get" "$k_get" "ops/s"
}

@test "memcached: with only the server preloaded, plain clients reach its kernel listener" {
	mc_start --rshare
	app_snap s0
	roundtrip server
	bench server-set set
	app_snap s1
	app_check_fallback "plain clients to a preloaded memcached" s0 s1 server 0 $PORT
}

@test "memcached: with only the clients preloaded, they fall back to kernel TCP" {
	mc_start
	app_snap c0
	roundtrip client --rshare
	bench client-set set --rshare
	app_snap c1
	app_check_fallback "preloaded clients to a plain memcached" c0 c1 client $((2 + THREADS)) $PORT
}
