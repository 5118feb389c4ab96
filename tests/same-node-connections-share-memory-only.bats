#!/usr/bin/env bats
# Connections whose two ends are on one node take the same-node path: their
# bytes move through a pair segment that only the two pools map, with no
# link, no hub and no system call on the way while both sides are awake.

load lib

setup() {
	rs_require echo-server echo-client echo-rounds
	rs_setup
	rs_two_nodes
}

teardown() {
	rs_teardown
}

# pids_mapping: the pids of node A whose memory maps a pair segment
pids_mapping() {
	local p
	for p in $(ip netns pids "$NS_A"); do
		grep -qs 'rshare-pair' "/proc/$p/maps" && echo "$p"
	done | sort -n
}

@test "same node: prefork echo over shared memory, every byte verified, the segment mapped by its two pools only" {
	local port=7201 i pids=() total=0 b allowed mapped hub bystander bypool p
	rs_bg server "$NS_A" --rshare "$RS_BIN/echo-server" -w 4 $port
	rs_wait_ready server
	# a bystander pool on the node: a listener nobody dials
	rs_bg bystander "$NS_A" --rshare "$RS_BIN/echo-server" -w 1 $((port + 1))
	rs_wait_ready bystander
	for i in 1 2 3 4; do
		# two clients dial the loopback address, two the node's own address
		local dst=127.0.0.1
		((i > 2)) && dst=$ADDR_A
		rs_bg client$i "$NS_A" --rshare "$RS_BIN/echo-client" -c 8 -s $i -n 8 -m 262144 \
			-w "$RS_TMP/hold" $dst $port
		pids+=("$RS_LASTPID")
	done
	for i in 1 2 3 4; do
		rs_wait_file "$RS_TMP/client$i.out" '^done$' 1 120
		b=$(sed -n 's/.*verified=8 resets=0 errors=0 bytes=\([0-9]*\).*/\1/p' "$RS_TMP/client$i.out")
		[[ -n $b ]] || rs_fail "client$i: $(cat "$RS_TMP/client$i.out")"
		total=$((total + b))
	done
	echo "bytes verified: $total"

	rs_stat "$NS_A" >"$RS_TMP/statA.json"
	rs_jq_check "32 connections, all on the same-node path, bytes agree per pair" \
		--slurpfile a "$RS_TMP/statA.json" --argjson total "$total" '
		$a[0] as $A |
		fail($A.links|length == 0; "\($A.links|length) links, want none"),
		fail($A.counters.local_connects == 32; "local_connects \($A.counters.local_connects), want 32"),
		fail($A.counters.fallback_connects == 0; "fallback_connects \($A.counters.fallback_connects)"),
		fail($A.counters.pair_segments == 4; "pair_segments \($A.counters.pair_segments), want 4 (one per client pool)"),
		[$A.sockets[] | select(.state == "established")] as $E |
		fail([$E[] | select(.same_node)] | length == 64; "\([$E[] | select(.same_node)] | length) same-node sockets, want 64"),
		($E | map({key: (.sid|tostring), value: .}) | from_entries) as $by |
		($E[] | select(.same_node) | . as $s | $by[(.peer_sid|tostring)] as $p |
		 if $p == null then "socket \($s.sid): peer \($s.peer_sid) not established"
		 elif $s.bytes_tx != $p.bytes_rx then "socket \($s.sid) sent \($s.bytes_tx), its peer \($p.sid) received \($p.bytes_rx)"
		 else empty end),
		fail(([$E[] | select(.same_node) | .bytes_tx] | add) == 2 * $total;
		     "sockets sent \([$E[] | select(.same_node) | .bytes_tx] | add) bytes, clients verified \($total) each way")'

	# who maps a pair segment: the hub (rshared and its hub process, which
	# share their memory) and the processes of the server's
	# and the clients' pools; not the bystander's pool
	hub=$(jq -r .pid "$RS_TMP/statA.json")
	bypool=$(jq -r --argjson port $((port + 1)) "$RS_JQ_DEFS"' .sockets[] | select(.state == "listening" and
		(.local | port_of) == $port) | .pool' "$RS_TMP/statA.json")
	bystander=$(jq -r --argjson p "$bypool" '.processes[] | select(.pool == $p) | .pid' "$RS_TMP/statA.json")
	allowed=$( { echo "$hub"; jq -r .hub_pid "$RS_TMP/statA.json"; jq -r --argjson p "$bypool" '.processes[] | select(.pool != $p) | .pid' \
		"$RS_TMP/statA.json"; } | sort -n)
	mapped=$(pids_mapping)
	echo "mapping a pair segment: $(echo $mapped); bystander pool $bypool: $(echo $bystander)"
	[[ -n $bystander ]] || rs_fail "no bystander process in stat"
	for p in $bystander; do
		grep -qx "$p" <<<"$mapped" && rs_fail "bystander $p maps a pair segment"
	done
	for p in $mapped; do
		grep -qx "$p" <<<"$allowed" || rs_fail "process $p ($(cat /proc/$p/comm)) maps a pair segment"
	done
	[[ $(wc -l <<<"$mapped") -ge 6 ]] || rs_fail "only $(wc -l <<<"$mapped") processes map a pair segment"

	touch "$RS_TMP/hold"
	for i in 1 2 3 4; do
		rs_wait_pid "${pids[$i - 1]}" 60 || rs_fail "client$i exit $?"
	done
	# the clients' pools are gone, so are their segments and sockets
	rs_retry 10 bash -c "ip netns exec $NS_A $RSHARE stat --json |
		jq -e '.counters.pair_segments == 0 and ([.sockets[] | select(.same_node)] | length == 0)' >/dev/null" ||
		rs_fail "segments or same-node sockets left: $(rs_stat "$NS_A" | jq -c '.counters, [.sockets[] | select(.same_node)]')"
}

@test "same node: sends to an awake reader and receives of waiting data make no system call" {
	local port=7211 rounds=4000 n
	command -v strace >/dev/null || skip "needs strace"
	# waiters spin long enough that nobody sleeps on this idle machine
	RSHARE_SPIN_US=100000 rs_bg server "$NS_A" --rshare "$RS_BIN/echo-server" -w 1 $port
	rs_wait_ready server
	# one connection, 4000 round trips of up to 64 B; count the client's
	# system calls but the yields of its spinning
	run rs_exec "$NS_A" --rshare env RSHARE_SPIN_US=100000 strace -f -qq -c -o "$RS_TMP/strace.txt" \
		-e 'trace=!sched_yield' "$RS_BIN/echo-rounds" -q -c 1 -m 64 -r $rounds 127.0.0.1 $port
	echo "$output"
	[[ $status -eq 0 ]] || rs_fail "echo-rounds exit $status"
	cat "$RS_TMP/strace.txt"
	n=$(awk '$NF == "total" { print $(NF - 2) }' "$RS_TMP/strace.txt")
	echo "system calls: $n for $rounds round trips"
	rs_stat "$NS_A" | jq -e '.counters.local_connects == 1' >/dev/null || rs_fail "not on the same-node path"
	# set-up and tear-down take some (loading, attaching, connect, close):
	# nothing like the 2 x 4000 a kernel socket makes
	[[ $n -lt 400 ]] || rs_fail "$n system calls for $rounds round trips"
}
