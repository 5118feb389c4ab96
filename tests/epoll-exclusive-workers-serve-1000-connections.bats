#!/usr/bin/env bats
# An event-driven pre-forked echo server under rshare on node A: 32
# workers, each with its own epoll set holding the shared listener with
# EPOLLIN|EPOLLEXCLUSIVE and its connections nonblocking with
# EPOLLIN|EPOLLET (EPOLLOUT|EPOLLET while a write waits for room).  8
# client processes on node B open 125 connections each, 1000 at once, and
# check every echoed byte and the EOF after it; each connection carries
# about 256 KiB each way, more than a socket buffers, so workers wait for
# EPOLLOUT too.  No connection is lost or served twice: the workers
# accepted 1000 in all and closed each at its EOF, every client verified
# its 125, more than one worker served, and the hubs' stat shows the 1000
# connections on the one link between the nodes.  The same run on kernel
# TCP first is the reference.  After a stall, each connection still open
# is listed with what its worker waits for.

load lib

setup() {
	rs_require epoll-exclusive-workers echo-client
	rs_setup
	rs_two_nodes
}

teardown() {
	rs_teardown
}

# serve_1000 [--rshare]: the run, checked up to the workers' reports
serve_1000() {
	local port=7201 i pids=() st=() line master sum=0 n total deadline left
	rs_bg server "$NS_A" $1 "$RS_BIN/epoll-exclusive-workers" -w 32 $port
	rs_wait_ready server
	master=$(sed -n 's/^master //p' "$RS_TMP/server.out")
	[[ -n $master ]] || rs_fail "no master pid: $(cat "$RS_TMP/server.out")"
	for i in 1 2 3 4 5 6 7 8; do
		rs_bg client$i "$NS_B" $1 "$RS_BIN/echo-client" -c 125 -s $i -n 8 -m 65536 $ADDR_A $port
		pids+=("$RS_LASTPID")
	done
	deadline=$((SECONDS + 40))
	for i in 1 2 3 4 5 6 7 8; do
		left=$((deadline - SECONDS))
		((left > 0)) || left=1
		st[i]=0
		rs_wait_pid "${pids[$i - 1]}" $left || st[i]=$?
	done
	rs_stat "$NS_A" >"$RS_TMP/statA.json"
	rs_stat "$NS_B" >"$RS_TMP/statB.json"

	# the workers report, also after a stall: each still open connection
	# says what its worker waits for
	kill -TERM "$master"
	rs_wait_file "$RS_TMP/server.out" '^total ' 1 30
	grep -vE '^worker [0-9]+$' "$RS_TMP/server.out"

	for i in 1 2 3 4 5 6 7 8; do
		[[ ${st[i]} -eq 0 ]] ||
			rs_fail "client$i exit ${st[i]} (124: still running after 40 s): $(cat "$RS_TMP/client$i.out" "$RS_TMP/client$i.err" | tail -n 5)"
		grep -q '^echo-client: conns=125 verified=125 resets=0 errors=0 ' "$RS_TMP/client$i.out" ||
			rs_fail "client$i: $(cat "$RS_TMP/client$i.out")"
	done

	n=$(grep -cE '^worker [0-9]+ accepted=' "$RS_TMP/server.out")
	[[ $n -eq 32 ]] || rs_fail "$n of 32 workers reported"
	while read -r line; do
		sum=$((sum + line))
	done < <(sed -n 's/^worker [0-9]* accepted=\([0-9]*\) .*/\1/p' "$RS_TMP/server.out")
	[[ $sum -eq 1000 ]] || rs_fail "the workers accepted $sum connections in all, want 1000"
	total=$(grep '^total ' "$RS_TMP/server.out")
	[[ $total == "total workers=32 reported=32 accepted=1000 closed=1000 errors=0 open=0 "* ]] ||
		rs_fail "server: $total"
	n=$(sed -n 's/.* served_by=\([0-9]*\).*/\1/p' <<<"$total")
	[[ $n -gt 1 ]] || rs_fail "only $n worker served: EPOLLEXCLUSIVE woke one worker for everything"
	rs_wait_pid "$(cat "$RS_TMP/server.pid")" 20 || rs_fail "server exit $?: $(tail -n 5 "$RS_TMP/server.err")"
}

@test "epoll EXCLUSIVE workers serve 1000 concurrent connections on kernel TCP (the reference)" {
	serve_1000
	rs_stat "$NS_A" >"$RS_TMP/statA.json"
	rs_jq_check "kernel TCP: no rshare link" --slurpfile a "$RS_TMP/statA.json" '
		fail($a[0].links|length == 0; "node A has \($a[0].links|length) links")'
}

@test "epoll EXCLUSIVE workers serve 1000 concurrent connections under rshare, none lost or served twice" {
	serve_1000 --rshare
	rs_jq_check "the 1000 connections went over the one link between the nodes" \
		--slurpfile a "$RS_TMP/statA.json" --slurpfile b "$RS_TMP/statB.json" '
		$a[0] as $A | $b[0] as $B |
		fail($A.links|length == 1; "node A has \($A.links|length) links, want 1"),
		fail($B.links|length == 1; "node B has \($B.links|length) links, want 1"),
		($A.links[0] // {}) as $LA | ($B.links[0] // {}) as $LB |
		fail($LA.peer_node == $B.node and $LB.peer_node == $A.node;
		     "link peers \($LA.peer_node) \($LB.peer_node), nodes \($A.node) \($B.node)"),
		fail($LA.state == "up" and $LB.state == "up"; "link states \($LA.state) \($LB.state)"),
		fail($LB.connections_total == 1000; "B link connections_total \($LB.connections_total), want 1000"),
		fail($LA.connections_total == 1000; "A link connections_total \($LA.connections_total), want 1000"),
		fail($A.counters.fallback_connects == 0 and $B.counters.fallback_connects == 0;
		     "fallback_connects A \($A.counters.fallback_connects) B \($B.counters.fallback_connects)"),
		fail(($LB.bytes_tx // 0) > 0 and ($LB.bytes_tx == $LA.bytes_rx) and ($LA.bytes_tx == $LB.bytes_rx);
		     "link bytes B tx \($LB.bytes_tx) rx \($LB.bytes_rx), A tx \($LA.bytes_tx) rx \($LA.bytes_rx)")'

	# closed on both sides: no connection left in either hub
	for i in $(seq 100); do
		rs_stat "$NS_A" >"$RS_TMP/statA2.json"
		rs_stat "$NS_B" >"$RS_TMP/statB2.json"
		jq -se '.[0].sockets == [] and .[1].sockets == []' "$RS_TMP/statA2.json" "$RS_TMP/statB2.json" \
			>/dev/null && break
		sleep 0.1
	done
	rs_jq_check "after close" --slurpfile a "$RS_TMP/statA2.json" --slurpfile b "$RS_TMP/statB2.json" '
		$a[0] as $A | $b[0] as $B |
		fail($A.sockets|length == 0; "A still has \($A.sockets|length) sockets"),
		fail($B.sockets|length == 0; "B still has \($B.sockets|length) sockets"),
		fail(($A.links[0].connections // 0) == 0; "A link still counts \($A.links[0].connections) connections")'
}
