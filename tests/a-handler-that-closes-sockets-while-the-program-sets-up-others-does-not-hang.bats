#!/usr/bin/env bats
# A SIGALRM handler that closes one of 200 connections every 200 us (as
# a server's SIGTERM handler that tidies up) while the client's own thread
# connects and closes others, adds one to an epoll set and deletes it, or
# forks (tests/handler-during-setup.c).  On kernel TCP every call
# finishes.  rshare makes each request of the hub (connect, close) under
# one lock of the process, and keeps its epoll records and a fork's
# hand-over under locks too, which a close takes: a handler's close that
# came while its own thread held one waited for ever.  Each case runs once
# on kernel TCP and once under rshare (client on node B, server on node
# A), and both must print the same.  The hubs' stat shows the rshare runs
# took the link.

load lib

setup() {
	rs_require handler-during-setup
	rs_setup
	rs_two_nodes
}

teardown() {
	rs_teardown
}

# both_ways PORT MODE: the same output on kernel TCP and under rshare
both_ways() {
	RS_TIMEOUT=60 rs_vs_kernel "$2" "$NS_B" "$1" "$RS_BIN/handler-during-setup" server PORT -- \
		"$RS_BIN/handler-during-setup" client "$ADDR_A" PORT "$2" 200 20000
	echo "kernel TCP: $RS_TCP / rshare: $RS_RS"
	[[ $RS_TCP == "client: the handler closed 200 of 200" ]] || rs_fail "kernel TCP: '$RS_TCP'"
	rs_stat "$NS_B" >"$RS_TMP/statB.json"
	rs_jq_check "the rshare run took the link" --slurpfile b "$RS_TMP/statB.json" '$b[0] as $B |
		fail(($B.links[0].connections_total // 0) >= 201 and $B.counters.fallback_connects == 0;
		     "B link carried \($B.links[0].connections_total) connections, \($B.counters.fallback_connects) fell back")'
}

@test "a handler that closes connections while the program connects and closes others: every call finishes, as on kernel TCP" {
	both_ways 7241 dial
}

@test "a handler that closes connections while the program adds one to an epoll set and deletes it: every call finishes, as on kernel TCP" {
	both_ways 7243 epoll
}

@test "a handler that closes connections while the program forks: every call finishes, as on kernel TCP" {
	both_ways 7245 fork
}
