#!/usr/bin/env bats
# A preloaded client connecting to a plain (not preloaded) server on a node
# whose hub has no rshare listener on that port falls back to kernel TCP:
# the echo works, the client's hub counts a fallback connect, no socket and
# no payload go over a link, and the kernel shows the TCP connection.

load lib

setup() {
	rs_require echo-server echo-client
	rs_setup
	rs_two_nodes
}

teardown() {
	rs_teardown
}

@test "fallback: preloaded client to plain server uses kernel TCP" {
	local port=7004 cpid bytes
	rs_bg server "$NS_A" "$RS_BIN/echo-server" -w 2 $port
	rs_wait_ready server
	rs_bg client "$NS_B" --rshare "$RS_BIN/echo-client" -c 4 -s 3 -n 8 -w "$RS_TMP/hold" $ADDR_A $port
	cpid=$RS_LASTPID
	rs_wait_file "$RS_TMP/client.out" '^done$' 1 60
	grep -q 'verified=4 resets=0 errors=0' "$RS_TMP/client.out"
	bytes=$(sed -n 's/.* bytes=\([0-9]*\).*/\1/p' "$RS_TMP/client.out")

	# the kernel carries it: 4 established TCP connections to the port on both sides
	run ip netns exec "$NS_A" ss -tnH state established "( sport = :$port )"
	echo "$output"
	[[ $(grep -c . <<<"$output") -eq 4 ]]
	run ip netns exec "$NS_B" ss -tnH state established "( dport = :$port )"
	[[ $(grep -c . <<<"$output") -eq 4 ]]

	rs_stat "$NS_A" >"$RS_TMP/statA.json"
	rs_stat "$NS_B" >"$RS_TMP/statB.json"
	rs_jq_check "nothing on rshare" \
		--slurpfile a "$RS_TMP/statA.json" --slurpfile b "$RS_TMP/statB.json" \
		--argjson port $port --argjson bytes "$bytes" '
		$a[0] as $A | $b[0] as $B |
		fail($B.counters.fallback_connects >= 4; "B fallback_connects \($B.counters.fallback_connects), want >= 4"),
		($A, $B) as $N |
		($N.sockets[] | select(.link != 0) | "socket \(.sid) of node \($N.node) is on link \(.link)"),
		($N.links[] |
			fail(.connections == 0; "link \(.id) of node \($N.node) has \(.connections) connections"),
			fail(.bytes_tx < $bytes and .bytes_rx < $bytes;
			     "link \(.id) of node \($N.node) moved tx \(.bytes_tx) rx \(.bytes_rx), the echo was \($bytes)"))'

	touch "$RS_TMP/hold"
	rs_wait_pid $cpid 60
}
