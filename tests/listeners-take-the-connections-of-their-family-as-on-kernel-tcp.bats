#!/usr/bin/env bats
# A connection reaches the listener that kernel TCP gives it by address
# family (tests/listeners-by-family.py): with an IPv4 listener and an IPv6
# one with IPV6_V6ONLY on one port (asyncio's start_server, nginx's
# "listen 80" beside "listen [::]:80"), IPv4 connections reach the IPv4
# listener and IPv6 ones the IPv6 listener, and an IPv4 connect to a port
# with only an IPV6_V6ONLY listener is refused.  The hub matched
# listeners by port and address alone (core/hub/conn.c, listener_score),
# so an IPv6 connection could reach the IPv4 listener and an IPv4 one the
# IPv6-only listener, and the IPv4 connect was accepted; the library now
# tells the hub IPV6_V6ONLY with the listen (core/proc/vsock.c).  The
# client's transcript under rshare must be kernel TCP's, on one node and
# across two, and stat proves the connections were rshare's.

load lib

PROG=$BATS_TEST_DIRNAME/listeners-by-family.py

setup() {
	rs_require
	command -v python3 >/dev/null || skip "needs python3"
	rs_setup
}

teardown() {
	rs_teardown
}

@test "on one node, IPv4 and IPv6 connections reach the listeners kernel TCP gives them" {
	local n
	rs_netns "$NS_A"
	ip -n "$NS_A" addr add ::1/128 dev lo 2>/dev/null || true
	rs_vs_kernel fam "$NS_A" 7471 python3 "$PROG" server PORT -- python3 "$PROG" client 127.0.0.1,::1 PORT
	echo "# $(grep -c . <<<"$RS_TCP") lines, e.g. '$(sed -n 3p <<<"$RS_TCP")'" >&3
	[[ $RS_TCP == *$'\nend' ]] || rs_fail "kernel TCP: '$RS_TCP'"
	n=$(rs_stat "$NS_A" | jq .counters.local_connects)
	((n == 6)) || rs_fail "the hub counted $n same-node connections, want 6"
}

@test "across nodes, IPv4 and IPv6 connections reach the listeners kernel TCP gives them" {
	rs_two_nodes
	ip -n "$NS_A" addr add fd00:199::1/64 dev "va$RS_SUF" nodad
	ip -n "$NS_B" addr add fd00:199::2/64 dev "vb$RS_SUF" nodad
	rs_vs_kernel fam "$NS_B" 7475 python3 "$PROG" server PORT -- python3 "$PROG" client $ADDR_A,fd00:199::1 PORT
	[[ $RS_TCP == *$'\nend' ]] || rs_fail "kernel TCP: '$RS_TCP'"
	rs_stat "$NS_B" >"$RS_TMP/statB.json"
	rs_jq_check "it went over rshare" --slurpfile b "$RS_TMP/statB.json" '
		$b[0] as $B |
		fail(([$B.links[].connections_total] | add // 0) == 6; "B links connections_total \([$B.links[].connections_total])"),
		fail($B.counters.fallback_connects == 2; "B fallback_connects \($B.counters.fallback_connects), want the 2 refused")'
}
