#!/usr/bin/env bats
# A blocking connect that waits (the listener's backlog is full, as a
# dropped SYN makes it wait on kernel TCP) and that a SIGALRM handler
# without SA_RESTART interrupts fails with EINTR, and a second blocking
# connect on that socket waits on for the same connect (EINTR again at the
# next signal), as on kernel TCP
# (tests/connect-interrupted.c, 4 connects to a listener of backlog 1
# that never accepts).  It used to go on waiting through the signal.  And
# a nonblocking connect's end is reported by the next connect() once (0),
# EISCONN after that, as the kernel does (rshare said EISCONN at once).

load lib

setup() {
	rs_require connect-interrupted
	rs_setup
	rs_two_nodes
}

teardown() {
	rs_teardown
}

@test "blocking connect interrupted by a signal: EINTR, and again, as on kernel TCP" {
	local tcp rs
	rs_bg k-srv "$NS_A" "$RS_BIN/connect-interrupted" -s 7661
	rs_wait_ready k-srv
	tcp=$(rs_exec "$NS_B" "$RS_BIN/connect-interrupted" -c 4 $ADDR_A 7661) || true
	[[ $tcp == "ok ok EINTR/EINTR EINTR/EINTR" ]] || rs_fail "kernel TCP: '$tcp'"
	rs_bg r-srv "$NS_A" --rshare "$RS_BIN/connect-interrupted" -s 7662
	rs_wait_ready r-srv
	rs=$(rs_exec "$NS_B" --rshare "$RS_BIN/connect-interrupted" -c 4 $ADDR_A 7662) || true
	[[ $rs == "$tcp" ]] || rs_fail "rshare: '$rs', kernel TCP: '$tcp'"
	rs_stat "$NS_B" >"$RS_TMP/statB.json"
	rs_jq_check "the rshare run took the link" --slurpfile b "$RS_TMP/statB.json" '
		$b[0] as $B |
		fail(($B.links[0].connections_total // 0) >= 2; "B link carried \($B.links[0].connections_total) connections, want 2")'
}

@test "nonblocking connect, then connect again: 0 once, then EISCONN, as on kernel TCP" {
	local tcp rs
	rs_bg k-srv "$NS_A" "$RS_BIN/connect-interrupted" -s 7663
	rs_wait_ready k-srv
	tcp=$(rs_exec "$NS_B" "$RS_BIN/connect-interrupted" -n $ADDR_A 7663) || true
	[[ $tcp == "EINPROGRESS 0 EISCONN" ]] || rs_fail "kernel TCP: '$tcp'"
	rs_bg r-srv "$NS_A" --rshare "$RS_BIN/connect-interrupted" -s 7664
	rs_wait_ready r-srv
	rs=$(rs_exec "$NS_B" --rshare "$RS_BIN/connect-interrupted" -n $ADDR_A 7664) || true
	[[ $rs == "$tcp" ]] || rs_fail "rshare: '$rs', kernel TCP: '$tcp'"
	rs_stat "$NS_B" >"$RS_TMP/statB.json"
	rs_jq_check "the rshare run took the link" --slurpfile b "$RS_TMP/statB.json" '
		$b[0] as $B |
		fail(($B.links[0].connections_total // 0) >= 1; "B link carried \($B.links[0].connections_total) connections")'
}
