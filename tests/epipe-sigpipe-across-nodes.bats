#!/usr/bin/env bats
# Over rshare across nodes: writing to a connection the server closed fails
# with EPIPE and raises SIGPIPE; send(MSG_NOSIGNAL) fails with EPIPE and
# raises none.

load lib

setup() {
	rs_require epipe-server epipe-client
	rs_setup
	rs_two_nodes
}

teardown() {
	rs_teardown
}

@test "EPIPE with SIGPIPE, and MSG_NOSIGNAL without, over rshare" {
	local port=7010
	rs_bg server "$NS_A" --rshare "$RS_BIN/epipe-server" $port
	rs_wait_ready server
	run rs_exec "$NS_B" --rshare "$RS_BIN/epipe-client" $ADDR_A $port
	echo "$output"
	[[ $status -eq 0 ]]
	rs_stat "$NS_B" >"$RS_TMP/statB.json"
	rs_jq_check "it went over rshare" --slurpfile b "$RS_TMP/statB.json" '
		$b[0] as $B |
		fail($B.links|length == 1; "B has \($B.links|length) links, want 1"),
		fail(($B.links[0].connections_total // 0) >= 2; "B link connections_total \($B.links[0].connections_total), want >= 2"),
		fail($B.counters.fallback_connects == 0; "B fallback_connects \($B.counters.fallback_connects)")'
}
