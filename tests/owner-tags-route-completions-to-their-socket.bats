#!/usr/bin/env bats
# 32 writer processes on node B send at once, each a distinct byte count,
# to a sink on node A, all over the one link.  Completions on the link are
# routed by owner tag: the hub's per-socket counters must show each
# writer's socket sent exactly its own count, its peer socket on A received
# exactly that, and the 16-byte acks went exactly the other way; nothing is
# credited to a socket it does not belong to.

load lib

setup() {
	rs_require tag-sink tag-writer
	rs_setup
	rs_two_nodes
}

teardown() {
	rs_teardown
}

@test "owner tags route each completion to its own socket (32 concurrent writers)" {
	local port=7002 i pids=() map='{}' pid
	rs_bg sink "$NS_A" --rshare "$RS_BIN/tag-sink" -w "$RS_TMP/hold" $port
	rs_wait_ready sink
	for i in $(seq 0 31); do
		rs_bg writer$i "$NS_B" --rshare "$RS_BIN/tag-writer" -b $(((i + 1) * 50000)) \
			-w "$RS_TMP/hold" $ADDR_A $port
		pids+=("$RS_LASTPID")
	done
	for i in $(seq 0 31); do
		rs_wait_file "$RS_TMP/writer$i.out" '^done$' 1 120
		# the writer's own pid (not the pid of the timeout around it)
		pid=$(sed -n 's/^pid \([0-9]*\) bytes .*/\1/p' "$RS_TMP/writer$i.out")
		map=$(jq -c --arg p "$pid" --argjson n $(((i + 1) * 50000)) '. + {($p): $n}' <<<"$map")
	done
	rs_stat "$NS_A" >"$RS_TMP/statA.json"
	rs_stat "$NS_B" >"$RS_TMP/statB.json"

	rs_jq_check "per-socket bytes and completions" \
		--slurpfile a "$RS_TMP/statA.json" --slurpfile b "$RS_TMP/statB.json" \
		--argjson want "$map" --argjson port $port '
		$a[0] as $A | $b[0] as $B |
		fail($A.links|length == 1; "node A has \($A.links|length) links, want 1"),
		fail($B.links|length == 1; "node B has \($B.links|length) links, want 1"),
		($A.links[0] // {}) as $LA | ($B.links[0] // {}) as $LB |
		fail($LB.peer_node == $A.node and $LA.peer_node == $B.node; "links do not join A and B"),
		[$B.sockets[] | select((.peer|port_of) == $port)] as $cs |
		fail($cs|length == 32; "B has \($cs|length) sockets to port \($port), want 32"),
		($want | to_entries[] | (.key|tonumber) as $pid | .value as $n |
			[$B.processes[] | select(.pid == $pid)] as $ps |
			if ($ps|length) != 1 then "writer \($pid) is \($ps|length) times in B processes"
			else
				[$B.sockets[] | select(.sid as $s | $ps[0].sockets | index($s))] as $mine |
				if ($mine|length) != 1 then "writer \($pid) holds \($mine|length) sockets, want 1"
				else $mine[0] as $x |
					fail($x.link == $LB.id; "writer \($pid) socket \($x.sid) on link \($x.link)"),
					fail($x.holders == [$pid]; "writer \($pid) socket \($x.sid) holders \($x.holders)"),
					fail($x.bytes_tx == $n; "writer \($pid) wrote \($n) but its socket \($x.sid) has bytes_tx \($x.bytes_tx)"),
					fail($x.bytes_rx == 16; "writer \($pid) socket \($x.sid) bytes_rx \($x.bytes_rx), want 16 (the ack)"),
					fail($x.cq_send >= 1; "writer \($pid) socket \($x.sid) has no send completions"),
					([$A.sockets[] | select(.sid == $x.peer_sid)]) as $ys |
					if ($ys|length) != 1 then "writer \($pid): peer_sid \($x.peer_sid) matches \($ys|length) sockets on A"
					else $ys[0] as $y |
						fail($y.peer_sid == $x.sid; "A socket \($y.sid) peer_sid \($y.peer_sid), want \($x.sid)"),
						fail($y.bytes_rx == $n; "A socket \($y.sid) (peer of writer \($pid)) bytes_rx \($y.bytes_rx), want \($n)"),
						fail($y.bytes_tx == 16; "A socket \($y.sid) bytes_tx \($y.bytes_tx), want 16")
					end
				end
			end),
		# every completion is counted at one socket: no more than the link saw
		([$B.sockets[].cq_send] | add // 0) as $sq |
		fail($sq <= $LB.msgs_tx; "B sockets count \($sq) send completions, link sent \($LB.msgs_tx) messages"),
		([$A.sockets[].cq_recv] | add // 0) as $rq |
		fail($rq <= $LA.msgs_rx; "A sockets count \($rq) receive completions, link received \($LA.msgs_rx) messages"),
		([$cs[].bytes_tx] | add) as $sum |
		fail($sum == ([$want[]] | add); "B sockets sent \($sum) bytes in all, writers \([$want[]] | add)"),
		fail($LB.bytes_tx >= $sum; "link carried \($LB.bytes_tx) bytes, less than the \($sum) payload"),
		fail($B.counters.stale_dropped == 0 and $A.counters.stale_dropped == 0;
		     "stale completions dropped: A \($A.counters.stale_dropped) B \($B.counters.stale_dropped)")'

	touch "$RS_TMP/hold"
	for i in "${!pids[@]}"; do
		rs_wait_pid "${pids[$i]}" 60 || rs_fail "writer$i exit $?: $(cat "$RS_TMP/writer$i.err")"
	done
}
