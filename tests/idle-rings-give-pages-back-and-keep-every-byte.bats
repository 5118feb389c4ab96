#!/usr/bin/env bats
# An idle connection's rings give their pages back (the hub punches them
# out of the arena, or the pair segment on one node) and the connection
# goes on as before: echo-rounds sends a round, waits until the hubs say
# they punched its rings (stat: rings_punched), sends the next, and checks
# every byte of every round, across two nodes and within one.
# waits: rounds that wait for the hubs to give idle rings back (tests/run runs it beside the others)

load lib

setup() {
	rs_require echo-rounds echo-server
	rs_setup
	rs_two_nodes
}

teardown() {
	rs_teardown
}

# punched NS MIN: the hub of NS has punched the rings of at least MIN sockets
punched() {
	local n
	n=$(rs_stat "$1" | jq -r '.counters.rings_punched') || return 1
	((n >= $2))
}

# rounds CLIENT_NS PORT: 3 rounds of 8 connections, punched before rounds 1 and 2
rounds() {
	local cns=$1 port=$2 r
	rs_bg server "$NS_A" --rshare "$RS_BIN/echo-server" -w 2 "$port"
	rs_wait_listen "$NS_A" "$port" --rshare
	rs_bg client "$cns" --rshare "$RS_BIN/echo-rounds" -c 8 -r 3 -m 65536 -g "$RS_TMP/go" $ADDR_A "$port"
	rs_wait_file "$RS_TMP/client.out" '^round 0 ok' 1 30
	for r in 1 2; do
		rs_retry 20 punched "$cns" $((8 * r)) || rs_fail "the client's hub punched no rings before round $r"
		rs_retry 20 punched "$NS_A" $((8 * r)) || rs_fail "the server's hub punched no rings before round $r"
		touch "$RS_TMP/go.$r"
		rs_wait_file "$RS_TMP/client.out" "^round $r ok conns=8" 1 30
	done
	rs_wait_file "$RS_TMP/client.out" '^done' 1 30
}

@test "idle rings across a link give their pages back, and the next rounds keep every byte" {
	rounds "$NS_B" 7751
	rs_stat "$NS_B" >"$RS_TMP/statB.json"
	rs_jq_check "the rounds took the link" --slurpfile b "$RS_TMP/statB.json" '
		$b[0] as $B |
		fail(($B.links[0].connections_total // 0) >= 8; "link carried \($B.links[0].connections_total // 0)"),
		fail($B.counters.fallback_connects == 0; "fallback_connects \($B.counters.fallback_connects)")'
}

@test "idle rings on one node give their pages back, and the next rounds keep every byte" {
	rounds "$NS_A" 7752
	rs_stat "$NS_A" >"$RS_TMP/statA.json"
	rs_jq_check "the rounds took the same-node path" --slurpfile a "$RS_TMP/statA.json" '
		$a[0] as $A | fail($A.counters.local_connects >= 8; "local_connects \($A.counters.local_connects)")'
}
