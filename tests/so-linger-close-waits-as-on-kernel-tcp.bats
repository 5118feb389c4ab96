#!/usr/bin/env bats
# close with SO_LINGER on and a time waits, as tcp_close does, until the
# peer has every byte written or the time is up, and only where it drops
# the socket's last descriptor (not a parent's close of a socket its child
# still holds).  tests/linger.c runs once on kernel TCP and once under
# rshare across nodes, and must print the same lines (what each close
# returned, whether it waited, and within the bounds its case sets); the
# stat proves that the rshare run took the link.  Before, every close
# returned at once, the bytes still going.  Within one node rshare's bytes
# are in the peer's ring once written, so such a close does not wait
# (rshare(7)).
# waits: closes that linger, and readers that sleep seconds (tests/run runs it beside the others)

load lib

setup() {
	rs_require linger
	rs_setup
	rs_two_nodes
}

teardown() {
	rs_teardown
}

@test "SO_LINGER: the last close waits for the peer to have the bytes, across nodes, as on kernel TCP" {
	rs_vs_kernel linger "$NS_B" 7191 "$RS_BIN/linger" -s PORT -- "$RS_BIN/linger" -c $ADDR_A PORT
	sed "s/^/# /" <<<"$RS_RS" >&3
	[[ $RS_TCP == *"timeout: close 0, waited (in time)"* ]] || rs_fail "kernel TCP: '$RS_TCP'"
	rs_stat "$NS_B" >"$RS_TMP/statB.json"
	rs_jq_check "the rshare run went over the link" --slurpfile b "$RS_TMP/statB.json" '
		$b[0] as $B |
		fail(($B.links|length) == 1; "B has \($B.links|length) links"),
		fail(($B.links[0].connections_total // 0) >= 4; "B link carried \($B.links[0].connections_total) connections, want 4"),
		fail($B.counters.fallback_connects == 0; "fallback_connects \($B.counters.fallback_connects)")'
}
