#!/usr/bin/env bats
# A server that accepts and forks a child per connection (the parent closes
# its copy) echoes correctly over rshare: each accepted socket on node A is
# held by exactly one of the children, and its bytes match its peer's.

load lib

setup() {
	rs_require echo-server echo-client
	rs_setup
	rs_two_nodes
}

teardown() {
	rs_teardown
}

@test "accept-then-fork echo server over rshare: child holds the accepted socket" {
	local port=7003 cpid children
	rs_bg server "$NS_A" --rshare "$RS_BIN/echo-server" -f $port
	rs_wait_ready server
	rs_bg client "$NS_B" --rshare "$RS_BIN/echo-client" -c 8 -s 7 -n 8 -w "$RS_TMP/hold" $ADDR_A $port
	cpid=$RS_LASTPID
	rs_wait_file "$RS_TMP/client.out" '^done$' 1 120
	grep -q 'verified=8 resets=0 errors=0' "$RS_TMP/client.out"
	rs_wait_file "$RS_TMP/server.out" '^child [0-9]+$' 8 10
	children=$(sed -n 's/^child //p' "$RS_TMP/server.out" | jq -sc .)
	rs_stat "$NS_A" >"$RS_TMP/statA.json"
	rs_stat "$NS_B" >"$RS_TMP/statB.json"

	rs_jq_check "accepted sockets live in the children, over the link" \
		--slurpfile a "$RS_TMP/statA.json" --slurpfile b "$RS_TMP/statB.json" \
		--argjson port $port --argjson kids "$children" '
		$a[0] as $A | $b[0] as $B |
		fail(($B.links|length) == 1 and ($A.links|length) == 1; "links: A \($A.links|length) B \($B.links|length), want 1 each"),
		($B.links[0].id) as $lb |
		[$B.sockets[] | select(.state == "established" and (.peer|port_of) == $port)] as $cs |
		fail($cs|length == 8; "B has \($cs|length) established sockets to port \($port), want 8"),
		fail($B.links[0].connections_total >= 8; "B link connections_total \($B.links[0].connections_total)"),
		($cs[] | . as $x |
			fail($x.link == $lb; "client socket \($x.sid) on link \($x.link)"),
			([$A.sockets[] | select(.sid == $x.peer_sid)]) as $ys |
			if ($ys|length) != 1 then "client socket \($x.sid): no peer \($x.peer_sid) on A"
			else $ys[0] as $y |
				fail(($y.holders|length) == 1 and ($kids | index($y.holders[0])) != null;
				     "A socket \($y.sid) holders \($y.holders), want one of the children \($kids)"),
				fail($x.bytes_tx == $y.bytes_rx and $x.bytes_rx == $y.bytes_tx and $x.bytes_tx > 0;
				     "bytes: B \($x.sid) tx \($x.bytes_tx) rx \($x.bytes_rx), A \($y.sid) tx \($y.bytes_tx) rx \($y.bytes_rx)")
			end),
		([$cs[] | . as $x | $A.sockets[] | select(.sid == $x.peer_sid) | .holders[0]] | unique | length) as $nk |
		fail($nk == 8; "the 8 accepted sockets are held by \($nk) distinct processes, want 8")'

	touch "$RS_TMP/hold"
	rs_wait_pid $cpid 60
}
