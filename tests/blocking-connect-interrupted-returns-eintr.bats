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
# A handler that leaves the connects with siglongjmp leaves the process's
# sockets working.
# waits: connects blocked until alarms, a quarter of its time on a CPU (tests/run runs it beside the others)

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
	rs_vs_kernel intr "$NS_B" 7661 "$RS_BIN/connect-interrupted" -s PORT -- \
		"$RS_BIN/connect-interrupted" -c 4 $ADDR_A PORT
	[[ $RS_TCP == "ok ok EINTR/EINTR EINTR/EINTR" ]] || rs_fail "kernel TCP: '$RS_TCP'"
	rs_stat "$NS_B" >"$RS_TMP/statB.json"
	rs_jq_check "the rshare run took the link" --slurpfile b "$RS_TMP/statB.json" '
		$b[0] as $B |
		fail(($B.links[0].connections_total // 0) >= 2; "B link carried \($B.links[0].connections_total) connections, want 2")'
}

# A handler that leaves the waiting connects with siglongjmp, as old
# programs time out a connect: each jumps out of both connects, and the
# sockets then close, as on kernel TCP.
@test "blocking connect left by a handler's siglongjmp: and again, then the sockets close, as on kernel TCP" {
	rs_vs_kernel jump "$NS_B" 7665 "$RS_BIN/connect-interrupted" -s PORT -- \
		"$RS_BIN/connect-interrupted" -j 4 $ADDR_A PORT
	[[ $RS_TCP == "ok ok jumped/jumped jumped/jumped closed" ]] || rs_fail "kernel TCP: '$RS_TCP'"
	rs_stat "$NS_B" >"$RS_TMP/statB.json"
	rs_jq_check "the rshare run took the link" --slurpfile b "$RS_TMP/statB.json" '$b[0] as $B |
		fail(($B.links[0].connections_total // 0) >= 2; "B link carried \($B.links[0].connections_total) connections")'
}

@test "nonblocking connect, then connect again: 0 once, then EISCONN, as on kernel TCP" {
	rs_vs_kernel again "$NS_B" 7663 "$RS_BIN/connect-interrupted" -s PORT -- \
		"$RS_BIN/connect-interrupted" -n $ADDR_A PORT
	[[ $RS_TCP == "EINPROGRESS 0 EISCONN" ]] || rs_fail "kernel TCP: '$RS_TCP'"
	rs_stat "$NS_B" >"$RS_TMP/statB.json"
	rs_jq_check "the rshare run took the link" --slurpfile b "$RS_TMP/statB.json" '
		$b[0] as $B |
		fail(($B.links[0].connections_total // 0) >= 1; "B link carried \($B.links[0].connections_total) connections")'
}
