#!/usr/bin/env bats
# Under rshare, a connect() to a port of the other node where nothing
# listens fails with ECONNREFUSED, both before any link exists and when a
# link to that node is already up; no socket is left behind.

load lib

setup() {
	rs_require connect-refused echo-server echo-client
	rs_setup
	rs_two_nodes
}

teardown() {
	rs_teardown
}

@test "connect to a port with no listener: ECONNREFUSED (no link yet)" {
	run rs_exec "$NS_B" --rshare "$RS_BIN/connect-refused" $ADDR_A 7006
	echo "$output"
	[[ $status -eq 0 ]]
	rs_stat "$NS_B" >"$RS_TMP/statB.json"
	rs_jq_check "no socket left" --slurpfile b "$RS_TMP/statB.json" '
		$b[0].sockets[] | select(.state != "listening") | "socket \(.sid) left in state \(.state)"'
}

@test "connect to a port with no listener: ECONNREFUSED (link up, rshare listener elsewhere)" {
	rs_bg server "$NS_A" --rshare "$RS_BIN/echo-server" 7007
	rs_wait_ready server
	run rs_exec "$NS_B" --rshare "$RS_BIN/echo-client" -c 1 -n 2 $ADDR_A 7007
	echo "$output"
	[[ $status -eq 0 ]]
	run rs_exec "$NS_B" --rshare "$RS_BIN/connect-refused" $ADDR_A 7008
	echo "$output"
	[[ $status -eq 0 ]]
	rs_stat "$NS_B" >"$RS_TMP/statB.json"
	rs_jq_check "the link was up, and no socket is left" --slurpfile b "$RS_TMP/statB.json" '
		$b[0] as $B |
		fail($B.links|length == 1; "B has \($B.links|length) links, want 1"),
		fail(($B.links[0].connections_total // 0) >= 1; "the echo did not go over the link"),
		($B.sockets[] | "socket \(.sid) left in state \(.state)")'
}
