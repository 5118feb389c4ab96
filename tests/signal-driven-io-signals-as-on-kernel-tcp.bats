#!/usr/bin/env bats
# Signal-driven I/O on a connection works under rshare as on kernel TCP
# (tests/signal-driven-io.py): with O_ASYNC and an owner (F_SETOWN, or
# the ioctls FIOSETOWN and FIOASYNC), and a signal of its choice
# (F_SETSIG), a program is signalled when data arrives (POLL_IN), at the
# peer's end of stream and reset, and when a full send buffer has room
# again, never before, not after it closed the socket (the hub keeps the
# readiness descriptor's file open while the connection ends: its end
# signalled the program), and no more once O_ASYNC is off; set in either
# order, or on a descriptor already polled; and a listener with O_ASYNC
# is signalled for each connection that comes.  The kernel signals for the
# connection's readiness descriptor (preload/sockopt.c, rs_async), and a
# listener's, which the hub writes a byte into as it queues a connection
# (core/hub/ready.c): the library used to leave the settings on the kernel
# socket behind the descriptor, which never connects (or, for a listener,
# has no rshare connection), so no signal ever came and a program waiting
# for one waited for good.  The transcript under rshare must be
# the one on kernel TCP, on one node and across two, and stat proves the
# connections were rshare's.

load lib

PROG=$BATS_TEST_DIRNAME/signal-driven-io.py

setup() {
	rs_require
	command -v python3 >/dev/null || skip "needs python3"
	rs_setup
}

teardown() {
	rs_teardown
}

@test "on one node, O_ASYNC connections are signalled as on kernel TCP" {
	local plain pre n
	rs_netns "$NS_A"
	plain=$(ip netns exec "$NS_A" timeout 60 python3 "$PROG" both 7451 2>&1)
	pre=$(ip netns exec "$NS_A" timeout 60 "$RSHARE" run -- python3 "$PROG" both 7452 2>&1)
	echo "# $(head -1 <<<"$plain")" >&3
	[[ $plain == *$'\nend' ]] || rs_fail "kernel TCP: '$plain'"
	[[ $pre == "$plain" ]] || rs_fail "under rshare: $(diff <(echo "$plain") <(echo "$pre"))"
	n=$(rs_stat "$NS_A" | jq .counters.local_connects)
	((n == 11)) || rs_fail "the hub counted $n same-node connections, want 11"
}

@test "across nodes, O_ASYNC connections are signalled as on kernel TCP" {
	rs_two_nodes
	rs_vs_kernel sigio "$NS_B" 7455 python3 "$PROG" server PORT -- python3 "$PROG" client $ADDR_A PORT
	[[ $RS_TCP == *$'\nend' ]] || rs_fail "kernel TCP: '$RS_TCP'"
	rs_stat "$NS_B" >"$RS_TMP/statB.json"
	rs_jq_check "it went over rshare" --slurpfile b "$RS_TMP/statB.json" '
		$b[0] as $B |
		fail(($B.links[0].connections_total // 0) == 11; "B link connections_total \($B.links[0].connections_total), want 11"),
		fail($B.counters.fallback_connects == 0; "B fallback_connects \($B.counters.fallback_connects)")'
}
