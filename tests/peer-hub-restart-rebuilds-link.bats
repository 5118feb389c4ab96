#!/usr/bin/env bats
# Soft transport, two nodes.  Connections from node B to a pre-forked echo
# server on node A, some idle and some in the middle of transfers; SIGKILL
# of B's hub.  On A, within a few seconds, the link is gone and every
# connection it carried is reset: the server's workers see ECONNRESET, and
# A's hub keeps no socket on that link.  A new hub on B: new connections
# from B to A work, every byte verified, over one new link that A shows up.
# (B's own processes of the dead hub are not what this checks: they are
# killed once A has been looked at.)

load lib

setup() {
	rs_require respawn-server echo-rounds echo-client
	export RSHARE_TRANSPORT=soft
	rs_setup
	rs_two_nodes
}

teardown() {
	rs_teardown
}

say() {
	echo "# $*" >&3
}

# A's hub dropped the link and every socket on it
link_gone() {
	rs_stat "$NS_A" >"$RS_TMP/a1.json" &&
		jq -e --argjson l "$oldlink" '([.links[] | select(.id == $l)] | length == 0) and
			([.sockets[] | select(.state != "listening")] | length == 0)' "$RS_TMP/a1.json" >/dev/null
}

@test "peer hub killed and restarted: its connections reset within seconds, a new link carries new ones" {
	local port=7401 hubB t0 secs resets i newB
	oldlink=
	rs_bg server "$NS_A" --rshare "$RS_BIN/respawn-server" -w 2 -v $port
	rs_wait_ready server
	rs_bg idle "$NS_B" --rshare "$RS_BIN/echo-rounds" -c 4 -s 3 -r 2 -g "$RS_TMP/go" $ADDR_A $port
	rs_wait_file "$RS_TMP/idle.out" '^round 0 ok' 1 20
	rs_bg busy "$NS_B" --rshare "$RS_BIN/echo-client" -r -c 2 -t 30 -s 4 -m 65536 $ADDR_A $port
	# all 6 connections accepted, the busy ones moving data
	rs_retry 10 eval '[[ $(rs_stat "$NS_A" | jq "[.sockets[] | select(.state == \"established\" and .bytes_rx > 0)] | length") -eq 6 ]]' ||
		rs_fail "not 6 connections moving data on A: $(rs_stat "$NS_A" | jq -c '[.sockets[] | {state, bytes_rx}]')"
	sleep 0.5
	rs_stat "$NS_A" >"$RS_TMP/a0.json"
	rs_stat "$NS_B" >"$RS_TMP/b0.json"
	rs_jq_check "six connections on one soft link" --slurpfile a "$RS_TMP/a0.json" --slurpfile b "$RS_TMP/b0.json" '
		$a[0] as $A | $b[0] as $B |
		fail($A.links | length == 1; "A has \($A.links | length) links"),
		fail(($A.links[0].transport // "") == "soft" and ($A.links[0].state // "") == "up"; "A link: \($A.links[0])"),
		fail(($A.links[0].connections // 0) == 6; "A link carries \($A.links[0].connections) connections"),
		fail(($A.links[0].peer_node // "") == $B.node; "A link peer \($A.links[0].peer_node), B is \($B.node)")'
	oldlink=$(jq '.links[0].id' "$RS_TMP/a0.json")
	hubB=$(jq '.pid' "$RS_TMP/b0.json")
	[[ $(grep -c '^end ' "$RS_TMP/server.out") -eq 0 ]] || rs_fail "connections ended early: $(grep '^end ' "$RS_TMP/server.out")"

	kill -KILL "$hubB"
	t0=$(date +%s%N)
	rs_retry 10 link_gone || rs_fail "A still has the link or its sockets: $(jq -c '{links, sockets}' "$RS_TMP/a1.json")"
	secs=$(( ($(date +%s%N) - t0) / 1000000 ))
	rs_retry 5 eval '[[ $(grep -c "^end " "$RS_TMP/server.out") -ge 6 ]]' || true
	grep '^end ' "$RS_TMP/server.out" >&2 || true
	resets=$(grep -c '^end [0-9]* reset ' "$RS_TMP/server.out" || true)
	say "B's hub killed: A dropped the link and its sockets after $secs ms; the server saw $resets connections reset"
	((secs <= 5000)) || rs_fail "A took $secs ms to drop the link of a dead hub"
	[[ $resets -eq 6 ]] || rs_fail "the server saw $resets of 6 connections reset"
	[[ $(grep -c '^end ' "$RS_TMP/server.out") -eq 6 ]] || rs_fail "connections ended otherwise than by a reset"
	rs_jq_check "A counts the dropped link" --slurpfile a "$RS_TMP/a1.json" '
		fail($a[0].counters.links_dropped >= 1; "links_dropped \($a[0].counters.links_dropped)"),
		fail([$a[0].links[] | select(.state == "up")] | length == 0; "a link is still up on A")'

	# B's processes of the dead hub: how they ended is not this test's point
	touch "$RS_TMP/go.1"
	sleep 1
	for i in idle busy; do
		if kill -0 "$(cat "$RS_TMP/$i.pid")" 2>/dev/null; then
			say "$i client of the dead hub still running: killed"
		else
			say "$i client of the dead hub ended: $(cat "$RS_TMP/$i.err" "$RS_TMP/$i.out" | tail -n 2 | xargs)"
		fi
	done
	for i in $(ip netns pids "$NS_B"); do
		[[ $(cat /proc/$i/comm 2>/dev/null) == echo-* ]] && kill -KILL "$i" 2>/dev/null
	done

	# a new hub on B: new connections work over one new link
	mv "$RS_TMP/hub-$NS_B.err" "$RS_TMP/hub-$NS_B-first.log"
	rs_hub_start "$NS_B"
	rs_bg fresh "$NS_B" --rshare "$RS_BIN/echo-client" -c 8 -n 8 -s 5 -m 65536 -w "$RS_TMP/hold" $ADDR_A $port
	rs_wait_file "$RS_TMP/fresh.out" '^done$' 1 30
	grep -q 'verified=8 resets=0 errors=0' "$RS_TMP/fresh.out" || rs_fail "fresh: $(cat "$RS_TMP/fresh.out")"
	rs_stat "$NS_A" >"$RS_TMP/a2.json"
	rs_stat "$NS_B" >"$RS_TMP/b2.json"
	newB=$(jq -r .node "$RS_TMP/b2.json")
	rs_jq_check "one new link up on A carries the new connections" \
		--slurpfile a "$RS_TMP/a2.json" --slurpfile b "$RS_TMP/b2.json" --argjson old "$oldlink" '
		$a[0] as $A | $b[0] as $B |
		[$A.links[] | select(.state == "up")] as $up |
		fail($up | length == 1; "A has \($up | length) links up: \($A.links)"),
		($up[0] // {}) as $L |
		fail($L.id != $old; "the link up on A is the old one (\($old))"),
		fail($L.peer_node == $B.node; "A link peer_node \($L.peer_node), the new hub is \($B.node)"),
		fail($L.transport == "soft"; "A link transport \($L.transport)"),
		fail($L.connections == 8; "A link carries \($L.connections) connections, want 8"),
		fail([$A.sockets[] | select(.state == "established" and .link == $L.id)] | length == 8;
		     "A has \([$A.sockets[] | select(.state == "established" and .link == $L.id)] | length) established sockets on the new link"),
		fail([$A.sockets[] | select(.state == "established" and .link != $L.id)] | length == 0;
		     "A has established sockets on another link"),
		fail($B.counters.fallback_connects == 0; "B fell back \($B.counters.fallback_connects) times")'
	say "new hub on B (node $newB): 8 new connections verified over link $(jq '[.links[] | select(.state == "up")][0].id' "$RS_TMP/a2.json") (the old was $oldlink)"
	touch "$RS_TMP/hold"
}
