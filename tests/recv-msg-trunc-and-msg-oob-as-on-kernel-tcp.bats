#!/usr/bin/env bats
# recv's MSG_TRUNC discards the bytes it counts, without touching the
# buffer (HAProxy drains a connection before closing it with
# recv(NULL, INT_MAX, MSG_DONTWAIT | MSG_NOSIGNAL | MSG_TRUNC)), MSG_TRUNC
# with MSG_PEEK counts and leaves them, MSG_OOB with no urgent data fails
# with EINVAL and MSG_ERRQUEUE with an empty error queue with EAGAIN, both
# taking nothing, SO_PEEK_OFF (Linux 6.10 on) moves with each peek and
# read, and recvmsg and recvfrom give no source address (a given buffer's
# length set to 0, an absent one's left as it was), as on kernel TCP.
# tests/recv-flags.c runs once on kernel TCP and once under rshare, across
# nodes and within one node, and must print the same lines; the stat proves
# that the rshare runs took the link and the same-node path.  Before,
# rshare copied into the NULL buffer (the program died of SIGSEGV),
# MSG_OOB and MSG_ERRQUEUE read the stream's next bytes, and every peek
# started at the reader whatever SO_PEEK_OFF said, and recvmsg and
# recvfrom gave the peer's address.

load lib

setup() {
	rs_require recv-flags
	rs_setup
	rs_two_nodes
}

teardown() {
	rs_teardown
}

@test "MSG_TRUNC, MSG_OOB and MSG_ERRQUEUE across nodes: as on kernel TCP" {
	rs_vs_kernel flags "$NS_B" 7171 "$RS_BIN/recv-flags" -s PORT -- "$RS_BIN/recv-flags" -c $ADDR_A PORT
	sed "s/^/# /" <<<"$RS_RS" >&3
	[[ $RS_TCP == *"drain: MSG_TRUNC into no buffer 1000, then EAGAIN"* ]] || rs_fail "kernel TCP: '$RS_TCP'"
	rs_stat "$NS_B" >"$RS_TMP/statB.json"
	rs_jq_check "the rshare run went over the link" --slurpfile b "$RS_TMP/statB.json" '
		$b[0] as $B |
		fail(($B.links|length) == 1; "B has \($B.links|length) links"),
		fail(($B.links[0].connections_total // 0) >= 3; "B link carried \($B.links[0].connections_total) connections, want 3"),
		fail($B.counters.fallback_connects == 0; "fallback_connects \($B.counters.fallback_connects)")'
}

@test "MSG_TRUNC, MSG_OOB and MSG_ERRQUEUE within one node: as on kernel TCP" {
	rs_vs_kernel flags1 "$NS_A" 7173 "$RS_BIN/recv-flags" -s PORT -- "$RS_BIN/recv-flags" -c $ADDR_A PORT
	sed "s/^/# /" <<<"$RS_RS" >&3
	rs_stat "$NS_A" >"$RS_TMP/statA.json"
	rs_jq_check "the rshare run took the same-node path" --slurpfile a "$RS_TMP/statA.json" '
		$a[0] as $A |
		fail(($A.counters.local_connects // 0) >= 3; "local_connects \($A.counters.local_connects), want 3"),
		fail($A.counters.fallback_connects == 0; "fallback_connects \($A.counters.fallback_connects)")'
}
