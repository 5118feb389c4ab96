#!/usr/bin/env bats
# A program that sends with MSG_ZEROCOPY on a socket with SO_ZEROCOPY waits
# for the notifications of its sends on the error queue (poll's POLLERR,
# recvmsg(MSG_ERRQUEUE)) before it writes those buffers again.  rshare
# copies the bytes before the send returns and queues the notification at
# once, as the kernel notifies a copy; without SO_ZEROCOPY the flag does
# nothing.  tests/zerocopy.c runs once on kernel TCP and once under
# rshare, across nodes and within one node, and must print the same lines
# (what the notifications covered and said, the reader's bytes intact);
# the stat proves that the rshare runs took the link and the same-node
# path.  Before, no notification ever came: poll waited its 5 s, recvmsg
# gave EAGAIN for good, and a program waiting for them would have hung.
# waits: polls for notifications, a quarter of its time on a CPU (tests/run runs it beside the others)

load lib

setup() {
	rs_require zerocopy
	rs_setup
	rs_two_nodes
}

teardown() {
	rs_teardown
}

@test "MSG_ZEROCOPY notifications across nodes: as on kernel TCP" {
	rs_vs_kernel zc "$NS_B" 7181 "$RS_BIN/zerocopy" -s PORT -- "$RS_BIN/zerocopy" -c $ADDR_A PORT
	sed "s/^/# /" <<<"$RS_RS" >&3
	[[ $RS_TCP == *"notified 0..7: cmsg SOL_IP/IP_RECVERR len 48, origin ZEROCOPY"* ]] || rs_fail "kernel TCP: '$RS_TCP'"
	rs_stat "$NS_B" >"$RS_TMP/statB.json"
	rs_jq_check "the rshare run went over the link" --slurpfile b "$RS_TMP/statB.json" '
		$b[0] as $B |
		fail(($B.links|length) == 1; "B has \($B.links|length) links"),
		fail(($B.links[0].connections_total // 0) >= 3; "B link carried \($B.links[0].connections_total) connections, want 3"),
		fail($B.counters.fallback_connects == 0; "fallback_connects \($B.counters.fallback_connects)")'
}

@test "MSG_ZEROCOPY notifications within one node: as on kernel TCP" {
	rs_vs_kernel zc1 "$NS_A" 7183 "$RS_BIN/zerocopy" -s PORT -- "$RS_BIN/zerocopy" -c $ADDR_A PORT
	sed "s/^/# /" <<<"$RS_RS" >&3
	rs_stat "$NS_A" >"$RS_TMP/statA.json"
	rs_jq_check "the rshare run took the same-node path" --slurpfile a "$RS_TMP/statA.json" '
		$a[0] as $A |
		fail(($A.counters.local_connects // 0) >= 3; "local_connects \($A.counters.local_connects), want 3"),
		fail($A.counters.fallback_connects == 0; "fallback_connects \($A.counters.fallback_connects)")'
}
