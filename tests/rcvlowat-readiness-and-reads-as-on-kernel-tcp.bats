#!/usr/bin/env bats
# SO_RCVLOWAT as on kernel TCP: fewer bytes than the mark do not make a
# connection readable (poll, select, level- and edge-triggered epoll), the
# mark's worth does, and so does the end of the stream; a blocking read
# waits for the smaller of its length and the mark (or its SO_RCVTIMEO,
# then returns what came), a nonblocking one takes what is there;
# getsockopt reads back the kernel's values, and an accepted connection
# takes its listener's mark.  tests/rcvlowat.c runs once on kernel TCP and
# once under rshare, across nodes and within one node, and must print the
# same lines; the stat proves that the rshare runs took the link and the
# same-node path.  Before, rshare kept the option for getsockopt only: 400
# bytes made a connection readable under a mark of 1000, and a blocking
# read returned them.
# waits: poll, select and epoll timeouts and SO_RCVTIMEO (tests/run runs it beside the others)

load lib

setup() {
	rs_require rcvlowat
	rs_setup
	rs_two_nodes
}

teardown() {
	rs_teardown
}

@test "SO_RCVLOWAT across nodes: readiness and reads as on kernel TCP" {
	rs_vs_kernel lowat "$NS_B" 7161 "$RS_BIN/rcvlowat" -s PORT -- "$RS_BIN/rcvlowat" -c $ADDR_A PORT
	sed "s/^/# /" <<<"$RS_RS" >&3
	[[ $RS_TCP == *"below: poll none, select 0, epoll 0, FIONREAD 400"* ]] || rs_fail "kernel TCP: '$RS_TCP'"
	rs_stat "$NS_B" >"$RS_TMP/statB.json"
	rs_jq_check "the rshare run went over the link" --slurpfile b "$RS_TMP/statB.json" '
		$b[0] as $B |
		fail(($B.links|length) == 1; "B has \($B.links|length) links"),
		fail(($B.links[0].connections_total // 0) >= 8; "B link carried \($B.links[0].connections_total) connections, want 8"),
		fail($B.counters.fallback_connects == 0; "fallback_connects \($B.counters.fallback_connects)")'
}

@test "SO_RCVLOWAT within one node: readiness and reads as on kernel TCP" {
	rs_vs_kernel lowat1 "$NS_A" 7163 "$RS_BIN/rcvlowat" -s PORT -- "$RS_BIN/rcvlowat" -c $ADDR_A PORT
	sed "s/^/# /" <<<"$RS_RS" >&3
	rs_stat "$NS_A" >"$RS_TMP/statA.json"
	rs_jq_check "the rshare run took the same-node path" --slurpfile a "$RS_TMP/statA.json" '
		$a[0] as $A |
		fail(($A.counters.local_connects // 0) >= 8; "local_connects \($A.counters.local_connects), want 8"),
		fail($A.counters.fallback_connects == 0; "fallback_connects \($A.counters.fallback_connects)")'
}
