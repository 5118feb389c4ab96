#!/usr/bin/env bats
# A thread blocked in recv on a socket that another thread closes, while
# a new connection may take the socket's place (tests/close-under-blocked-
# recv.c): the kernel keeps a socket while a call on it runs, so the
# blocked recv still gets the old connection's bytes and the new one its
# own.  Over rshare the close released the slot under the blocked recv
# (which then hung, or read the new connection's ring); a call now holds
# its socket, and the release waits for the last call to end.  Run on
# kernel TCP and over rshare, across nodes and within one node.
# waits: threads blocked in recv, and the pauses that order them, a quarter of its time on a CPU (tests/run runs it beside the others)

load lib

setup() {
	rs_require close-under-blocked-recv
	rs_setup
	rs_two_nodes
}

teardown() {
	rs_teardown
}

run_both() { # CLIENT_NS PORT: the rshare run's line equals kernel TCP's
	RS_TIMEOUT=20 rs_vs_kernel close "$1" "$2" "$RS_BIN/close-under-blocked-recv" -s PORT -- \
		"$RS_BIN/close-under-blocked-recv" -c $ADDR_A PORT
	[[ $RS_TCP == "blocked=old! new=new!" ]] || rs_fail "kernel TCP: '$RS_TCP'"
}

@test "close under a blocked recv, across nodes: the socket lives until the call ends, as on kernel TCP" {
	run_both "$NS_B" 7671
	rs_stat "$NS_B" >"$RS_TMP/statB.json"
	rs_jq_check "the rshare run took the link" --slurpfile b "$RS_TMP/statB.json" '
		$b[0] as $B | fail(($B.links[0].connections_total // 0) >= 2; "B link carried \($B.links[0].connections_total) connections")'
}

@test "close under a blocked recv, within one node: the socket lives until the call ends, as on kernel TCP" {
	run_both "$NS_A" 7673
	rs_stat "$NS_A" >"$RS_TMP/statA.json"
	rs_jq_check "the rshare run took the same-node path" --slurpfile a "$RS_TMP/statA.json" '
		$a[0] as $A | fail($A.counters.local_connects >= 2; "local_connects \($A.counters.local_connects)")'
}
