#!/usr/bin/env bats
# SO_RCVTIMEO and SO_SNDTIMEO bound accept, recv, send and connect as on
# kernel TCP (EAGAIN when the time passes with nothing moved, the count
# when some bytes moved), and an accepted connection takes the options set
# on its listener (timeouts, SO_KEEPALIVE, TCP_NODELAY, TCP_KEEPIDLE,
# SO_LINGER).  tests/socket-timeouts.c runs once on kernel TCP and once
# with both sides preloaded, across nodes: the client's transcript must be
# the same, and the stat proves that the rshare run took the link.  Before,
# the timeouts were kept for getsockopt but never bounded a wait: a read
# under SO_RCVTIMEO blocked until the peer wrote.

load lib

setup() {
	rs_require socket-timeouts
	rs_setup
	rs_two_nodes
}

teardown() {
	rs_teardown
}

@test "socket timeouts and a listener's options: accept, recv and send end as on kernel TCP" {
	rs_vs_kernel tmo "$NS_B" 7151 "$RS_BIN/socket-timeouts" -s PORT -- \
		"$RS_BIN/socket-timeouts" -c $ADDR_A PORT
	sed "s/^/# /" <<<"$RS_RS" >&3
	[[ $RS_TCP == *"read with nothing coming: EAGAIN"* ]] || rs_fail "kernel TCP: '$RS_TCP'"

	rs_stat "$NS_B" >"$RS_TMP/statB.json"
	rs_jq_check "the rshare run went over the link" --slurpfile b "$RS_TMP/statB.json" '
		$b[0] as $B |
		fail(($B.links|length) == 1; "B has \($B.links|length) links"),
		fail(($B.links[0].connections_total // 0) >= 2; "B link carried \($B.links[0].connections_total) connections, want 2"),
		fail($B.counters.fallback_connects == 0; "fallback_connects \($B.counters.fallback_connects)")'
}
