#!/usr/bin/env bats
# Over rshare across nodes: after the client's shutdown(SHUT_WR) the
# server reads to EOF and still sends its reply, which the client reads,
# followed by EOF.

load lib

setup() {
	rs_require halfclose-server halfclose-client
	rs_setup
	rs_two_nodes
}

teardown() {
	rs_teardown
}

@test "half-close: reply after shutdown(SHUT_WR), then EOF, over rshare" {
	local port=7009
	rs_bg server "$NS_A" --rshare "$RS_BIN/halfclose-server" $port
	rs_wait_ready server
	run rs_exec "$NS_B" --rshare "$RS_BIN/halfclose-client" $ADDR_A $port 1000000
	echo "$output"
	[[ $status -eq 0 ]]
	run rs_exec "$NS_B" --rshare "$RS_BIN/halfclose-client" $ADDR_A $port 0
	echo "$output"
	[[ $status -eq 0 ]]
	rs_wait_file "$RS_TMP/server.out" '^replied' 2 10
	rs_stat "$NS_A" >"$RS_TMP/statA.json"
	rs_stat "$NS_B" >"$RS_TMP/statB.json"
	rs_jq_check "it went over rshare" \
		--slurpfile a "$RS_TMP/statA.json" --slurpfile b "$RS_TMP/statB.json" '
		$a[0] as $A | $b[0] as $B |
		fail($B.links|length == 1; "B has \($B.links|length) links, want 1"),
		fail(($B.links[0].connections_total // 0) >= 2; "B link connections_total \($B.links[0].connections_total)"),
		fail(($B.links[0].bytes_tx // 0) >= 1000000; "B link bytes_tx \($B.links[0].bytes_tx) < 1000000"),
		fail(($A.links[0].bytes_rx // 0) >= 1000000; "A link bytes_rx \($A.links[0].bytes_rx) < 1000000"),
		fail($B.counters.fallback_connects == 0; "B fallback_connects \($B.counters.fallback_connects)")'
}
