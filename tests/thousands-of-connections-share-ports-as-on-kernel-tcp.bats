#!/usr/bin/env bats
# A client that holds thousands of connections at once, and one whose
# node has few ephemeral ports, do on rshare what they do on kernel TCP
# (tests/many-connections.c: open N blocking connections round-robin over
# the server's ports, keep them all, then echo 16 bytes on each).
# A pool used to hold at most 4,096 slots and 512 MiB of rings (connect
# failed with ENOBUFS after 2,037 connections), and every rshare connection
# reserved a kernel port of its own (EADDRNOTAVAIL once the range was
# used, where kernel TCP shares a port across destinations).  Now slots
# and ring memory grow with the pool, and the hub gives each connection a
# port of the node's range not yet used towards the same destination.
# Within one node, two pools held at most 1,021 connections (their shared
# segment was 256 MiB): the others went to kernel TCP.
# The hubs' stat proves the rshare runs took the link.

load lib

setup() {
	rs_require many-connections
	ulimit -n "$(ulimit -Hn)"
	rs_setup
	rs_two_nodes
}

teardown() {
	rs_teardown
}

# run NAME [--rshare] N PORT...: the client's line in $out
run_pair() {
	local name=$1 pre= n p
	shift
	if [[ $1 == --rshare ]]; then
		pre=--rshare
		shift
	fi
	n=$1
	shift
	rs_bg "$name" "$NS_A" $pre "$RS_BIN/many-connections" server -w 2 "$@"
	for p in "$@"; do
		rs_wait_listen "$NS_A" "$p" $pre
	done
	sleep 0.3
	out=$(RS_TIMEOUT=240 rs_exec "${CLIENT_NS:-$NS_B}" $pre "$RS_BIN/many-connections" client -n "$n" $ADDR_A "$@" \
		2>"$RS_TMP/$name-client.err") || true
	kill "$RS_LASTPID" 2>/dev/null || true
}

check_link() {
	local n=$1
	# the hub may still be closing thousands of sockets (slow under ASan)
	RS_STAT_TIMEOUT=120 rs_stat "$NS_B" >"$RS_TMP/statB.json"
	rs_jq_check "the rshare run took the link" --slurpfile b "$RS_TMP/statB.json" --argjson n "$n" '
		$b[0] as $B |
		fail(($B.links[0].connections_total // 0) >= $n; "B link carried \($B.links[0].connections_total) connections, want \($n)"),
		fail($B.counters.fallback_connects == 0; "fallback_connects \($B.counters.fallback_connects)")'
}

@test "one client holds 5,000 connections at once and echoes on each, as on kernel TCP" {
	local tcp rs want="open=5000 echoed=5000 errors=0 first=none"
	run_pair k-many 5000 7701 7702
	tcp=$out
	[[ $tcp == "$want" ]] || rs_fail "kernel TCP: '$tcp' $(tail -3 "$RS_TMP/k-many-client.err")"
	run_pair r-many --rshare 5000 7703 7704
	rs=$out
	[[ $rs == "$tcp" ]] || rs_fail "rshare: '$rs', kernel TCP: '$tcp' $(tail -3 "$RS_TMP/r-many-client.err")"
	check_link 5000
}

@test "100 ephemeral ports serve 300 connections to 4 ports, as on kernel TCP" {
	local tcp rs want="open=300 echoed=300 errors=0 first=none"
	ip netns exec "$NS_B" sysctl -qw net.ipv4.ip_local_port_range="40000 40099"
	run_pair k-ports 300 7711 7712 7713 7714
	tcp=$out
	[[ $tcp == "$want" ]] || rs_fail "kernel TCP: '$tcp' $(tail -3 "$RS_TMP/k-ports-client.err")"
	run_pair r-ports --rshare 300 7721 7722 7723 7724
	rs=$out
	[[ $rs == "$tcp" ]] || rs_fail "rshare: '$rs', kernel TCP: '$tcp' $(tail -3 "$RS_TMP/r-ports-client.err")"
	check_link 300
}

@test "within one node, 3,000 connections between two pools, all on rshare, as on kernel TCP" {
	local tcp rs want="open=3000 echoed=3000 errors=0 first=none"
	CLIENT_NS=$NS_A run_pair k-local 3000 7731 7732
	tcp=$out
	[[ $tcp == "$want" ]] || rs_fail "kernel TCP: '$tcp' $(tail -3 "$RS_TMP/k-local-client.err")"
	CLIENT_NS=$NS_A run_pair r-local --rshare 3000 7733 7734
	rs=$out
	[[ $rs == "$tcp" ]] || rs_fail "rshare: '$rs', kernel TCP: '$tcp' $(tail -3 "$RS_TMP/r-local-client.err")"
	RS_STAT_TIMEOUT=120 rs_stat "$NS_A" >"$RS_TMP/statA.json"
	rs_jq_check "every connection took the same-node path" --slurpfile a "$RS_TMP/statA.json" '
		$a[0] as $A |
		fail($A.counters.local_connects >= 3000; "local_connects \($A.counters.local_connects)"),
		fail($A.counters.fallback_connects == 0; "fallback_connects \($A.counters.fallback_connects)")'
}
