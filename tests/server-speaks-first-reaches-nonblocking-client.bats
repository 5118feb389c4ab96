#!/usr/bin/env bats
# A pre-fork server (2 workers) writes an 8-byte greeting right after
# accept(), as SSH, SMTP, FTP and MySQL servers do; a client connects
# nonblocking, polls, and waits for it.  100 connections, once on kernel
# TCP and once with both sides preloaded: the client's outcome must be the
# same (every greeting arrives), and the hubs' stat proves that the rshare
# run went over the link.  The greeting used to be lost about one
# connection in three: its write reached the client's hub in the same read
# as the ACCEPT, before the ACCEPT was handled, and was dropped.

load lib

setup() {
	rs_require server-speaks-first
	rs_setup
	rs_two_nodes
}

teardown() {
	rs_teardown
}

@test "server speaks first: a nonblocking client gets every greeting, as on kernel TCP" {
	local n=100
	rs_vs_kernel greet "$NS_B" 7101 "$RS_BIN/server-speaks-first" -s -w 2 PORT -- \
		"$RS_BIN/server-speaks-first" -c $n $ADDR_A PORT
	[[ $RS_TCP == "done got=$n lost=0 bad=0 errors=0" ]] || rs_fail "kernel TCP: '$RS_TCP'"

	rs_stat "$NS_B" >"$RS_TMP/statB.json"
	rs_jq_check "the rshare run went over the link" --slurpfile b "$RS_TMP/statB.json" --argjson n $n '
		$b[0] as $B |
		fail(($B.links|length) == 1; "B has \($B.links|length) links"),
		fail(($B.links[0].connections_total // 0) >= $n; "B link carried \($B.links[0].connections_total) connections, want \($n)"),
		fail(($B.links[0].bytes_rx // 0) >= 8 * $n; "B link received \($B.links[0].bytes_rx) bytes, want \(8 * $n)"),
		fail($B.counters.fallback_connects == 0; "fallback_connects \($B.counters.fallback_connects)")'
}
