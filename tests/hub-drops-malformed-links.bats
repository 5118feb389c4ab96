#!/usr/bin/env bats
# A peer that speaks the hub protocol wrongly loses its link and nothing
# else.  With 4 preloaded echo connections held open from node B to an echo
# server on node A, a fake peer (bad-peer, run in B) connects to A's hub
# port once per malformed case: wrong HELLO magic, wrong protocol version, a
# first frame that is not HELLO, an unknown frame type, an unknown control
# op, a control frame of wrong length, a write longer than the largest
# write, a write with immediate for a socket that lives on another link, a
# write outside the ring window of a socket on its own link, and random
# garbage before and after HELLO.  For each case: the hub closes that
# connection (bad-peer sees EOF or reset), logs a line naming the reason,
# counts it in `malformed`, and keeps running.  Afterwards the same held
# connections echo again with every byte checked, and A still has exactly
# its one link to B, up.

load lib

setup() {
	rs_require bad-peer echo-rounds echo-server
	rs_setup
	rs_two_nodes
}

teardown() {
	rs_teardown
}

# the malformed counter of A's hub
malformed_a() {
	rs_stat "$NS_A" | jq -e '.counters.malformed'
}

# rs_retry helper: A's malformed counter is $1
malformed_is() {
	[[ $(malformed_a 2>/dev/null) == "$1" ]]
}

# rs_retry helper: A has exactly one link, to node $1, up
one_link_to() {
	rs_stat "$NS_A" 2>/dev/null | jq -e --arg b "$1" \
		'.links | length == 1 and .[0].peer_node == $b and .[0].state == "up"' >/dev/null
}

@test "hub drops malformed links, counts and logs them, and keeps serving the others" {
	local port=7101 hublog="$RS_TMP/hub-$NS_A.err" hubpid
	hubpid=$(cat "$RS_TMP/hub-$NS_A.pid")
	rs_bg server "$NS_A" --rshare "$RS_BIN/echo-server" -w 1 $port
	rs_wait_ready server
	rs_bg held "$NS_B" --rshare "$RS_BIN/echo-rounds" -c 4 -s 7 -r 2 -g "$RS_TMP/go" $ADDR_A $port
	local heldpid=$RS_LASTPID
	rs_wait_file "$RS_TMP/held.out" '^round 0 ok conns=4 ' 1 30

	rs_stat "$NS_A" >"$RS_TMP/statA0.json"
	rs_stat "$NS_B" >"$RS_TMP/statB0.json"
	local nodeB link sids imm m0
	nodeB=$(jq -r .node "$RS_TMP/statB0.json")
	link=$(jq -r '.links[0].id' "$RS_TMP/statA0.json")
	rs_jq_check "before: the held connections are on rshare" \
		--slurpfile a "$RS_TMP/statA0.json" --slurpfile b "$RS_TMP/statB0.json" --argjson port $port '
		$a[0] as $A | $b[0] as $B |
		fail($A.links|length == 1; "A has \($A.links|length) links, want 1"),
		fail($A.links[0].peer_node == $B.node; "A link peer_node \($A.links[0].peer_node)"),
		fail([$A.sockets[] | select(.state == "established" and (.local|port_of) == $port)] | length == 4;
		     "A has \([$A.sockets[] | select(.state == "established")] | length) established sockets, want 4"),
		fail($B.counters.fallback_connects == 0; "B fell back to kernel TCP")'
	# the server sides of the held connections, by sid
	sids=$(jq -c --argjson port $port '[.sockets[] | select(.state == "established" and
		(.local|split(":")|last|tonumber) == $port) | .sid] | sort' "$RS_TMP/statA0.json")
	# a socket of A on the link to B: the target of the "foreign" case
	imm=$(jq -r --argjson port $port '[.sockets[] | select(.state == "established" and
		(.local|split(":")|last|tonumber) == $port)][0] | .sid * 4096 + (.gen % 4096)' "$RS_TMP/statA0.json")
	m0=$(jq -r .counters.malformed "$RS_TMP/statA0.json")
	[[ $m0 == 0 ]] || rs_fail "malformed is $m0 before any bad peer"

	# a well formed peer is kept: the fake peer itself is right but for the case
	run rs_exec "$NS_B" "$RS_BIN/bad-peer" good $ADDR_A $RS_PORT
	[[ $status -eq 0 && $output == *held* ]] || rs_fail "good: exit $status: $output"
	rs_retry 10 one_link_to "$nodeB" || rs_fail "A's links after the good peer left: $(rs_stat "$NS_A" | jq -c .links)"
	malformed_is 0 || rs_fail "a well formed peer counted as malformed"

	# case | bad-peer arguments | the reason in the hub's log (extended regex)
	local cases=(
		"magic|magic|link [0-9]+ not established: bad magic"
		"version|version|link [0-9]+ not established: unsupported protocol version"
		"nothello|nothello|link [0-9]+ not established: first frame is not HELLO"
		"type|type|link [0-9]+ to node 0bad0bad0bad0bad dropped: unknown frame type"
		"op|op|link [0-9]+ to node 0bad0bad0bad0bad dropped: unknown control op"
		"ctllen|ctllen|link [0-9]+ to node 0bad0bad0bad0bad dropped: control frame of wrong length"
		"wlen|wlen|link [0-9]+ to node 0bad0bad0bad0bad dropped: write frame of impossible length"
		"foreign|-i $imm foreign|link [0-9]+ to node 0bad0bad0bad0bad dropped: write outside its socket's ring window"
		"window|-p $port window|link [0-9]+ to node 0bad0bad0bad0bad dropped: write outside its socket's ring window"
		"garbage|-s 1 garbage|link [0-9]+ not established: (reserved frame bits set|unknown frame type|.* of (wrong|impossible) length|first frame is not HELLO)"
		"garbage2|-s 2 garbage|link [0-9]+ not established: (reserved frame bits set|unknown frame type|.* of (wrong|impossible) length|first frame is not HELLO)"
		"hgarbage|-s 3 hgarbage|link [0-9]+ to node 0bad0bad0bad0bad dropped: (reserved frame bits set|unknown frame type|.* of (wrong|impossible) length|second HELLO)"
	)
	local c name args why n0 n1 m=0
	for c in "${cases[@]}"; do
		IFS='|' read -r name args why <<<"$c"
		n0=$(grep -cE -- "$why" "$hublog" || true)
		# shellcheck disable=SC2086
		run rs_exec "$NS_B" "$RS_BIN/bad-peer" $args $ADDR_A $RS_PORT
		[[ $status -eq 0 && $output == *"closed "* ]] ||
			rs_fail "$name: the hub did not close the link (exit $status): $output"
		m=$((m + 1))
		rs_retry 5 malformed_is $m ||
			rs_fail "$name: malformed is $(malformed_a), want $m"
		rs_retry 5 eval '(( $(grep -cE -- "$why" "$hublog" || true) > n0 ))' || {
			tail -n 5 "$hublog" >&2
			rs_fail "$name: no new log line matching '$why'"
		}
		kill -0 "$hubpid" 2>/dev/null || rs_fail "$name: A's hub is gone"
		rs_retry 10 one_link_to "$nodeB" ||
			rs_fail "$name: A's links: $(rs_stat "$NS_A" | jq -c .links)"
	done

	# the held connections are the same ones, still established
	rs_stat "$NS_A" >"$RS_TMP/statA1.json"
	rs_jq_check "after the bad peers" --slurpfile a "$RS_TMP/statA1.json" \
		--argjson sids "$sids" --argjson port $port --argjson m $m --arg b "$nodeB" '
		$a[0] as $A |
		fail($A.counters.malformed == $m; "malformed \($A.counters.malformed), want \($m)"),
		fail($A.links|length == 1; "A has \($A.links|length) links, want 1"),
		fail($A.links[0].peer_node == $b and $A.links[0].state == "up";
		     "A link to \($A.links[0].peer_node) is \($A.links[0].state)"),
		([$A.sockets[] | select(.state == "established" and (.local|port_of) == $port) | .sid] | sort) as $now |
		fail($now == $sids; "held sockets were \($sids), now \($now)")'

	# and they still carry bytes, checked on the client
	touch "$RS_TMP/go.1"
	rs_wait_file "$RS_TMP/held.out" '^round 1 ok conns=4 ' 1 30
	rs_wait_file "$RS_TMP/held.out" '^done$' 1 30
	rs_wait_pid "$heldpid" 30 || rs_fail "echo-rounds exit $?: $(cat "$RS_TMP/held.err")"
	rs_stat "$NS_B" >"$RS_TMP/statB1.json"
	rs_jq_check "B's link survived" --slurpfile b "$RS_TMP/statB1.json" '
		$b[0] as $B |
		fail($B.links|length == 1 and $B.links[0].state == "up"; "B links \($B.links|map(.state))"),
		fail($B.counters.fallback_connects == 0; "B fell back to kernel TCP"),
		fail($B.counters.links_dropped == 0; "B dropped a link")'
	kill -0 "$hubpid" 2>/dev/null || rs_fail "A's hub is gone"
}
