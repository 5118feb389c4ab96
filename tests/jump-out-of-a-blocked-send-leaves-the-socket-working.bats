#!/usr/bin/env bats
# A client on node B blocks in one send() of 64 MiB to a server on node A
# that reads nothing for a second; a SIGALRM handler leaves the send with
# siglongjmp, as old programs time out a blocking call
# (tests/jump-out-of-send.c).  On kernel TCP the socket then carries the
# next 1 MiB as soon as the server reads; under rshare it must too, where
# a send that polled its full ring when the handler ran kept the ring's
# lock, and the next send waited on it for good.  The alarm comes 20 ms
# into a spin of 100 ms (RSHARE_SPIN_US), and then after 300 ms, when the
# send sleeps.  The hubs' stat shows the rshare runs took the link.
# waits: a server that sleeps a second

load lib

setup() {
	rs_require jump-out-of-send
	rs_setup
	rs_two_nodes
}

teardown() {
	rs_teardown
}

# run_pair NAME PORT MS [--rshare]: both lines in $out
run_pair() {
	local name=$1 port=$2 ms=$3 pre=${4:-}
	rs_bg "$name" "$NS_A" $pre "$RS_BIN/jump-out-of-send" server "$port"
	rs_wait_ready "$name"
	out=$(RS_TIMEOUT=30 rs_exec "$NS_B" $pre env ${CLIENT_ENV:-} "$RS_BIN/jump-out-of-send" client $ADDR_A "$port" "$ms" \
		2>"$RS_TMP/$name-client.err")
	rs_wait_pid "$(cat "$RS_TMP/$name.pid")" 20 || true
	out="$out / $(grep -v '^ready' "$RS_TMP/$name.out")"
}

# both_ways PORT MS: the same outcome on kernel TCP and under rshare
both_ways() {
	local tcp
	run_pair k-$1 "$1" "$2"
	tcp=$out
	[[ $tcp == "client jumped"$'\n'"client sent more / server eof" ]] || rs_fail "kernel TCP: '$tcp'"
	run_pair r-$1 $(($1 + 1)) "$2" --rshare
	[[ $out == "$tcp" ]] || rs_fail "rshare: '$out', kernel TCP: '$tcp' $(cat "$RS_TMP/r-$1-client.err")"
	rs_stat "$NS_B" >"$RS_TMP/statB.json"
	rs_jq_check "the rshare run took the link" --slurpfile b "$RS_TMP/statB.json" '$b[0] as $B |
		fail(($B.links[0].bytes_tx // 0) >= 1048576 and $B.counters.fallback_connects == 0;
		     "B link sent \($B.links[0].bytes_tx) bytes, \($B.counters.fallback_connects) connects fell back")'
}

@test "a handler that jumps out of a send polling its full ring leaves the socket working, as on kernel TCP" {
	CLIENT_ENV=RSHARE_SPIN_US=100000 both_ways 7221 20
}

@test "a handler that jumps out of a send sleeping on its full ring leaves the socket working, as on kernel TCP" {
	both_ways 7223 300
}

# A send asleep counts itself among its socket's sleepers (tx_waiters) for
# the hub, which makes the wake-up system call only for sleepers; a jump
# out of the sleep must give that back when the socket is next used, or
# the hub wakes nobody with a system call at every event of the socket.
# Kernel TCP has no such count: what is compared is the hub's view, taken
# while the client holds the socket after its next send went through.
@test "a handler that jumps out of a sleeping send leaves no sleeper counted on its socket" {
	local socks
	rs_bg server "$NS_A" --rshare "$RS_BIN/jump-out-of-send" server 7225
	rs_wait_ready server
	rs_bg client "$NS_B" --rshare "$RS_BIN/jump-out-of-send" client "$ADDR_A" 7225 300 3000
	rs_wait_file "$RS_TMP/client.out" '^client sent more$' 1 30
	socks=$(rs_stat "$NS_B" | jq -c '[.sockets[] | select(.flow.sleepers != null) | {state, sleepers: .flow.sleepers}]')
	echo "node B's sockets: $socks"
	grep -q '^client jumped$' "$RS_TMP/client.out" || rs_fail "the client did not jump: $(cat "$RS_TMP/client.out")"
	[[ $socks == *sleepers* ]] || rs_fail "no socket of the client at the hub: $socks"
	jq -e 'all(.[]; .sleepers == [0, 0, 0])' <<<"$socks" >/dev/null ||
		rs_fail "a socket nobody waits on counts sleepers: $socks"
	rs_wait_pid "$(cat "$RS_TMP/client.pid")" 20 || rs_fail "the client did not end"
}
