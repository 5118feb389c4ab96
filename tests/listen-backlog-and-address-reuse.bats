#!/usr/bin/env bats
# listen(2) and bind(2) as servers use them, on a preloaded server on node
# A with preloaded clients on node B:
#  - a server that closes its listener and at once binds the same port
#    again with SO_REUSEADDR gets it, and serves a new rshare connection;
#  - binding that port without SO_REUSEADDR while a connection accepted from
#    the old listener is still open fails with EADDRINUSE, exactly as on
#    kernel TCP (the same programs without the preload are the reference);
#  - a listener with backlog 1 that does not accept yet: 5 clients connect,
#    none fails, they wait; once the server accepts, all 5 complete their
#    echo, every connection on rshare.
# waits: clients that wait on a listener that does not accept yet (tests/run runs it beside the others)

load lib

setup() {
	rs_require listen-server echo-client
	rs_setup
	rs_two_nodes
}

teardown() {
	rs_teardown
}

# run_rebind NAME PORT [--rshare]: the rebind server on A, one client on B
# before the re-bind and one after it (when the server listens again), both
# echoing and then holding their connection until $RS_TMP/NAME.hold.
run_rebind() {
	local name=$1 port=$2 pre=()
	[[ ${3:-} == --rshare ]] && pre=(--rshare)
	rs_bg "$name-server" "$NS_A" "${pre[@]}" "$RS_BIN/listen-server" rebind "$port"
	SERVER_PID=$RS_LASTPID
	rs_wait_ready "$name-server"
	rs_bg "$name-c1" "$NS_B" "${pre[@]}" "$RS_BIN/echo-client" -c 1 -s 1 -n 4 -m 65536 \
		-w "$RS_TMP/$name.hold" $ADDR_A "$port"
	C1_PID=$RS_LASTPID
	rs_wait_file "$RS_TMP/$name-c1.out" '^done$' 1 20
	rs_wait_file "$RS_TMP/$name-server.out" '^bind-reuse ' 1 20
	C2_PID=
	if grep -q '^relistening$' "$RS_TMP/$name-server.out"; then
		rs_bg "$name-c2" "$NS_B" "${pre[@]}" "$RS_BIN/echo-client" -c 1 -s 2 -n 4 -m 65536 \
			-w "$RS_TMP/$name.hold" $ADDR_A "$port"
		C2_PID=$RS_LASTPID
		rs_wait_file "$RS_TMP/$name-c2.out" '^done$' 1 20
	fi
}

# finish_rebind NAME: release the clients; all must exit 0
finish_rebind() {
	local name=$1 n=1
	touch "$RS_TMP/$name.hold"
	rs_wait_pid "$C1_PID" 20 || rs_fail "$name client 1 exit $?: $(cat "$RS_TMP/$name-c1.err")"
	if [[ -n $C2_PID ]]; then
		n=2
		rs_wait_pid "$C2_PID" 20 || rs_fail "$name client 2 exit $?: $(cat "$RS_TMP/$name-c2.err")"
	fi
	rs_wait_file "$RS_TMP/$name-server.out" "^served $n\$" 1 20
	rs_wait_pid "$SERVER_PID" 20 || rs_fail "$name server exit $?: $(cat "$RS_TMP/$name-server.err")"
}

# check_on_rshare PORT N: B holds N established rshare sockets to PORT on
# A, on its one link, each matched by its peer socket on A
check_on_rshare() {
	rs_stat "$NS_A" >"$RS_TMP/statA.json"
	rs_stat "$NS_B" >"$RS_TMP/statB.json"
	rs_jq_check "$2 connections to port $1 on rshare" \
		--slurpfile a "$RS_TMP/statA.json" --slurpfile b "$RS_TMP/statB.json" \
		--argjson port "$1" --argjson n "$2" '
		$a[0] as $A | $b[0] as $B |
		fail($A.counters.fallback_connects == 0 and $B.counters.fallback_connects == 0;
		     "fallback_connects A \($A.counters.fallback_connects) B \($B.counters.fallback_connects)"),
		fail($B.links|length == 1 and $B.links[0].state == "up"; "B links \($B.links)"),
		[$B.sockets[] | select((.peer|port_of) == $port)] as $cs |
		fail($cs|length == $n and all($cs[]; .state == "established");
		     "B sockets to port \($port): \($cs|map(.state)), want \($n) established"),
		($cs[] | . as $x |
			fail($x.link == $B.links[0].id and $x.bytes_tx > 0 and $x.bytes_rx == $x.bytes_tx;
			     "B socket \($x.sid): link \($x.link) tx \($x.bytes_tx) rx \($x.bytes_rx)"),
			([$A.sockets[] | select(.sid == $x.peer_sid)][0] // {}) as $y |
			fail($y.peer_sid == $x.sid and $y.bytes_rx == $x.bytes_tx;
			     "B socket \($x.sid): A peer \($y.sid // "none") peer_sid \($y.peer_sid) rx \($y.bytes_rx)"))'
}

# socks_to_port_are NS PORT N: the hub of NS has N sockets whose peer is PORT
socks_to_port_are() {
	rs_stat "$1" 2>/dev/null | jq -e --argjson port "$2" --argjson n "$3" \
		'[.sockets[] | select(.peer|tostring|endswith(":\($port)"))] | length == $n' >/dev/null
}

@test "listener closed and bound again at once with SO_REUSEADDR serves a new rshare connection" {
	local port=7302
	run_rebind rs $port --rshare
	grep -q '^bind-reuse ok$' "$RS_TMP/rs-server.out" ||
		rs_fail "re-bind with SO_REUSEADDR: $(cat "$RS_TMP/rs-server.out" "$RS_TMP/rs-server.err")"
	[[ -n $C2_PID ]] || rs_fail "the server did not listen again"
	grep -q 'verified=1 resets=0 errors=0' "$RS_TMP/rs-c1.out" || rs_fail "client 1: $(cat "$RS_TMP/rs-c1.out")"
	grep -q 'verified=1 resets=0 errors=0' "$RS_TMP/rs-c2.out" || rs_fail "client 2: $(cat "$RS_TMP/rs-c2.out")"
	# both: the one from before the re-bind, still open, and the new one
	check_on_rshare $port 2
	finish_rebind rs
}

@test "bind without SO_REUSEADDR while an accepted connection is open gives EADDRINUSE, as kernel TCP" {
	run_rebind plain 7303
	finish_rebind plain
	local want got
	want=$(grep '^bind-' "$RS_TMP/plain-server.out")
	[[ $want == $'bind-noreuse EADDRINUSE\nbind-reuse ok' ]] || rs_fail "kernel TCP reference: $want"

	run_rebind rs 7304 --rshare
	check_on_rshare 7304 "$( [[ -n $C2_PID ]] && echo 2 || echo 1)"
	finish_rebind rs
	got=$(grep '^bind-' "$RS_TMP/rs-server.out")
	[[ $got == "$want" ]] || rs_fail "rshare: '${got//$'\n'/, }', kernel TCP: '${want//$'\n'/, }'"
}

@test "backlog 1, no accept yet: 5 clients wait instead of failing, then all complete on rshare" {
	local port=7311 i pids=() b
	rs_bg server "$NS_A" --rshare "$RS_BIN/listen-server" backlog $port 1 "$RS_TMP/go" 5
	local server_pid=$RS_LASTPID
	rs_wait_ready server
	for i in 1 2 3 4 5; do
		rs_bg client$i "$NS_B" --rshare "$RS_BIN/echo-client" -c 1 -s $i -n 4 -m 16384 \
			-w "$RS_TMP/hold" $ADDR_A $port
		pids+=("$RS_LASTPID")
	done
	# all five connects are in flight in the hubs, none has failed
	rs_retry 10 socks_to_port_are "$NS_B" $port 5 ||
		rs_fail "B sockets: $(rs_stat "$NS_B" | jq -c '[.sockets[] | {sid, state, peer}]')"
	sleep 1.5
	for i in 1 2 3 4 5; do
		kill -0 "${pids[$((i - 1))]}" 2>/dev/null ||
			rs_fail "client $i ended before the server accepted: $(cat "$RS_TMP/client$i.out" "$RS_TMP/client$i.err")"
		[[ ! -s $RS_TMP/client$i.err ]] || rs_fail "client $i: $(cat "$RS_TMP/client$i.err")"
		! grep -q '^done$' "$RS_TMP/client$i.out" || rs_fail "client $i echoed with no accept"
	done
	rs_stat "$NS_B" >"$RS_TMP/statB0.json"
	rs_jq_check "waiting connects" --slurpfile b "$RS_TMP/statB0.json" --argjson port $port '
		$b[0] as $B |
		[$B.sockets[] | select((.peer|port_of) == $port)] as $cs |
		fail($B.counters.fallback_connects == 0; "B fell back to kernel TCP"),
		fail($cs|all(.state == "established" or .state == "connecting");
		     "B sockets to port \($port): \($cs|map(.state))")'

	touch "$RS_TMP/go"
	rs_wait_file "$RS_TMP/server.out" '^accepted 5$' 1 30
	for i in 1 2 3 4 5; do
		rs_wait_file "$RS_TMP/client$i.out" '^done$' 1 30
		grep -q 'verified=1 resets=0 errors=0' "$RS_TMP/client$i.out" ||
			rs_fail "client $i: $(cat "$RS_TMP/client$i.out")"
	done
	check_on_rshare $port 5
	touch "$RS_TMP/hold"
	for i in 1 2 3 4 5; do
		rs_wait_pid "${pids[$((i - 1))]}" 20 || rs_fail "client $i exit $?: $(cat "$RS_TMP/client$i.err")"
	done
	rs_wait_file "$RS_TMP/server.out" '^served 5$' 1 20
	rs_wait_pid "$server_pid" 20 || rs_fail "server exit $?: $(cat "$RS_TMP/server.err")"
}
