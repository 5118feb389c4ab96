#!/usr/bin/env bats
# A connection a program polls costs it one descriptor, as on kernel TCP:
# the library puts the connection's readiness descriptor in place of the
# kernel socket the program holds (preload/ready.c), where it used to hold
# both (200 connections cost 400 descriptors).  The same program runs on
# kernel TCP and with both sides preloaded, across two nodes: the
# descriptors each hundred connections cost the client and the server, the
# socket options, flags and errors the client reads back (set before
# connect, and once polled), and how many connections it opens under a
# descriptor limit, must be the kernel's (less the library's own few, a
# constant), and stat proves that the rshare run went over the link and
# that every readiness descriptor came with the connect's or the accept's
# answer, none asked for later.

load lib

setup() {
	rs_require polled-connections
	command -v prlimit >/dev/null || skip "needs prlimit"
	rs_setup
	rs_two_nodes
}

teardown() {
	rs_teardown
}

@test "200 polled connections cost the client and the server one descriptor each, options as on kernel TCP" {
	local n=200 p
	rs_vs_kernel pc "$NS_B" 7301 "$RS_BIN/polled-connections" server PORT -- \
		"$RS_BIN/polled-connections" client -o -n $n $ADDR_A PORT
	[[ $RS_TCP == "per_conn_x100=100 library=few"* ]] || rs_fail "kernel TCP: '${RS_TCP%%$'\n'*}'"
	# the server's count from its second hundred on, both runs
	for p in 7301 7302; do
		grep -qx "held=200 last100=100" "$RS_TMP/pc-srv-$p.out" ||
			rs_fail "server on port $p: $(grep held= "$RS_TMP/pc-srv-$p.out" | tr '\n' ' ')"
	done
	rs_stat "$NS_B" >"$RS_TMP/statB.json"
	rs_stat "$NS_A" >"$RS_TMP/statA.json"
	rs_jq_check "the rshare run went over the link" --slurpfile b "$RS_TMP/statB.json" --argjson n $n '
		$b[0] as $B |
		fail(($B.links[0].connections_total // 0) >= $n; "B link carried \($B.links[0].connections_total) connections, want \($n)"),
		fail($B.counters.fallback_connects == 0; "fallback_connects \($B.counters.fallback_connects)")'
	# the client's nonblocking connects and the server's nonblocking
	# accepts got their readiness descriptors with the hub's answer: none
	# was asked for at the first poll
	rs_jq_check "the readiness descriptors came with the answers" --slurpfile a "$RS_TMP/statA.json" \
		--slurpfile b "$RS_TMP/statB.json" --argjson n $n '
		($a[0].counters, $b[0].counters) as $c |
		fail($c.readiness_with_answer >= $n; "\($c.readiness_with_answer) with the answer, want \($n)"),
		fail($c.readiness_asked == 0; "\($c.readiness_asked) asked for, want none")'
}

# link_carried N: A's link has carried at least N connections
link_carried() {
	rs_stat "$NS_A" | jq -e --argjson n "$1" '(.links[0].connections_total // 0) >= $n' >/dev/null
}

@test "under a descriptor limit a program opens as many polled connections as on kernel TCP, less the library's few" {
	local out k r pre
	for pre in "" --rshare; do
		rs_bg "lim-srv$pre" "$NS_A" $pre "$RS_BIN/polled-connections" server 7311
		rs_wait_ready "lim-srv$pre"
		out=$(rs_exec "$NS_B" $pre prlimit --nofile=300 "$RS_BIN/polled-connections" limit $ADDR_A 7311)
		# a connect answered early by B's hub returns before A's hub has
		# its CONNECT: the server stays until A's hub has them all
		[[ -z $pre || ! $out =~ ^opened=([0-9]+) ]] ||
			rs_retry 20 link_carried "${BASH_REMATCH[1]}" || true
		kill "$(cat "$RS_TMP/lim-srv$pre.pid")"
		rs_wait_pid "$(cat "$RS_TMP/lim-srv$pre.pid")" 10 >/dev/null || true
		if [[ -z $pre ]]; then k=$out; else r=$out; fi
	done
	echo "kernel TCP: $k; rshare: $r" >&2
	[[ $k =~ ^opened=([0-9]+)\ first=EMFILE$ ]] || rs_fail "kernel TCP: '$k'"
	k=${BASH_REMATCH[1]}
	[[ $r =~ ^opened=([0-9]+)\ first=EMFILE$ ]] || rs_fail "rshare: '$r'"
	r=${BASH_REMATCH[1]}
	# the library's own: its hub connection, the pool's doorbell, the
	# watch of the hub, one spare (a descriptor it takes in at the limit)
	((r >= k - 4 && r <= k)) || rs_fail "rshare opened $r, kernel TCP $k: the library holds $((k - r)), want at most 4"
	rs_stat "$NS_A" >"$RS_TMP/statA.json"
	rs_jq_check "the rshare run went over the link" --slurpfile a "$RS_TMP/statA.json" --argjson r "$r" '
		$a[0] as $A | fail(($A.links[0].connections_total // 0) >= $r; "A link carried \($A.links[0].connections_total) connections, want \($r)")'
}
