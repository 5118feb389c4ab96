#!/usr/bin/env bats
# A pre-forked echo server (8 workers) on node A and 4 clients x 16
# connections on node B, all preloaded: every byte of random-size messages
# comes back intact, and the hubs' stat proves that all 64 connections ran
# over the one link between the two nodes, with the bytes each socket sent
# received by its peer socket on the other node.

load lib

setup() {
	rs_require echo-server echo-client
	rs_setup
	rs_two_nodes
}

teardown() {
	rs_teardown
}

@test "two-node prefork echo: 64 connections share one link, bytes match per socket" {
	local port=7001 i pids=() total=0 b
	rs_bg server "$NS_A" --rshare "$RS_BIN/echo-server" -w 8 $port
	rs_wait_ready server
	for i in 1 2 3 4; do
		rs_bg client$i "$NS_B" --rshare "$RS_BIN/echo-client" -c 16 -s $i -n 8 -m 262144 \
			-w "$RS_TMP/hold" $ADDR_A $port
		pids+=("$RS_LASTPID")
	done
	for i in 1 2 3 4; do
		rs_wait_file "$RS_TMP/client$i.out" '^done$' 1 120
	done
	for i in 1 2 3 4; do
		b=$(sed -n 's/.*verified=16 resets=0 errors=0 bytes=\([0-9]*\).*/\1/p' "$RS_TMP/client$i.out")
		[[ -n $b ]] || rs_fail "client$i: $(cat "$RS_TMP/client$i.out")"
		total=$((total + b))
	done

	rs_stat "$NS_A" >"$RS_TMP/statA.json"
	rs_stat "$NS_B" >"$RS_TMP/statB.json"

	rs_jq_check "one link each way between the two nodes" \
		--slurpfile a "$RS_TMP/statA.json" --slurpfile b "$RS_TMP/statB.json" '
		$a[0] as $A | $b[0] as $B |
		one_link($A; $B),
		($A.links[0] // {}) as $LA | ($B.links[0] // {}) as $LB |
		fail($LB.connections_total >= 64; "B link connections_total \($LB.connections_total)"),
		fail($LA.connections_total >= 64; "A link connections_total \($LA.connections_total)"),
		fail($LB.connections >= 64; "B link open connections \($LB.connections)"),
		fail($A.counters.fallback_connects == 0 and $B.counters.fallback_connects == 0;
		     "fallback_connects A \($A.counters.fallback_connects) B \($B.counters.fallback_connects)")'

	rs_jq_check "each client socket and its peer socket agree" \
		--slurpfile a "$RS_TMP/statA.json" --slurpfile b "$RS_TMP/statB.json" \
		--argjson port $port --argjson total $total '
		$a[0] as $A | $b[0] as $B |
		($A.links[0].id) as $la | ($B.links[0].id) as $lb |
		[$B.sockets[] | select(.state == "established" and (.peer|port_of) == $port)] as $cs |
		fail($cs|length == 64; "B has \($cs|length) established sockets to port \($port), want 64"),
		($cs[] | . as $x |
			fail($x.link == $lb; "client socket \($x.sid) on link \($x.link), want \($lb)"),
			fail($x.bytes_tx > 0; "client socket \($x.sid) sent nothing"),
			([$A.sockets[] | select(.sid == $x.peer_sid)]) as $ys |
			if ($ys|length) != 1 then
				"client socket \($x.sid): peer_sid \($x.peer_sid) matches \($ys|length) sockets on A"
			else $ys[0] as $y |
				fail($y.peer_sid == $x.sid; "A socket \($y.sid) peer_sid \($y.peer_sid), want \($x.sid)"),
				fail($y.link == $la; "A socket \($y.sid) on link \($y.link), want \($la)"),
				fail($x.bytes_tx == $y.bytes_rx; "B \($x.sid) bytes_tx \($x.bytes_tx) != A \($y.sid) bytes_rx \($y.bytes_rx)"),
				fail($x.bytes_rx == $y.bytes_tx; "B \($x.sid) bytes_rx \($x.bytes_rx) != A \($y.sid) bytes_tx \($y.bytes_tx)")
			end),
		([$cs[].bytes_tx] | add) as $tx | ([$cs[].bytes_rx] | add) as $rx |
		fail($tx == $total and $rx == $total;
		     "clients verified \($total) bytes; their sockets sent \($tx), received \($rx)")'

	touch "$RS_TMP/hold"
	for i in "${!pids[@]}"; do
		rs_wait_pid "${pids[$i]}" 60 || rs_fail "client$((i + 1)) exit $?: $(cat "$RS_TMP/client$((i + 1)).err")"
	done

	# closed on both sides: the sockets leave stat and the link carries none
	deadline=$((SECONDS + 15))
	for i in $(seq 50); do
		((SECONDS < deadline)) || break
		rs_stat "$NS_B" >"$RS_TMP/statB2.json"
		jq -se --argjson port $port '.[0].sockets != null and ([.[0].sockets[] | select((.peer|tostring|endswith(":\($port)")))] | length == 0)' \
			"$RS_TMP/statB2.json" >/dev/null && break
		sleep 0.1
	done
	rs_jq_check "after close" --slurpfile b "$RS_TMP/statB2.json" --argjson port $port '
		$b[0] as $B |
		fail([$B.sockets[] | select((.peer|port_of) == $port)] | length == 0;
		     "client sockets still in stat after close"),
		fail(($B.links[0].connections // 0) == 0; "link still counts \($B.links[0].connections) open connections")'
}
