#!/usr/bin/env bats
# A client on node B blocks in recv() on an rshare connection to a server
# on node A that sends nothing.  SIGALRM, with a handler installed by
# sigaction without SA_RESTART, ends that recv() with -1/EINTR, as on
# kernel TCP; the connection then still carries bytes (checked), and the
# hubs' stat shows it was an rshare connection.  With SA_RESTART the
# kernel restarts recv(), and rshare must do the same.  Each case runs the
# same programs without the preload first, as the reference.  And so when
# the handler runs while the preloaded recv still polls its ring (a spin
# of 100 ms, RSHARE_SPIN_US, and the alarm after 20 ms): the library
# counts the program's handlers as they run (preload/signal.c), where the
# recv used to spin on and then sleep for good.  A handler that leaves
# the recv with siglongjmp, while it polls or while it sleeps, leaves the
# socket working for the next recv (the spin used to keep the ring's lock).
# waits: recv blocked until an alarm (tests/run runs it beside the others)

load lib

setup() {
	rs_require eintr-recv
	rs_setup
	rs_two_nodes
}

teardown() {
	rs_teardown
}

# run_pair NAME PORT [--rshare] [CLIENT-OPTIONS...]: server on A, client on
# B holding the connection until $RS_TMP/NAME.hold; waits for "received".
run_pair() {
	local name=$1 port=$2 pre=()
	shift 2
	if [[ ${1:-} == --rshare ]]; then
		pre=(--rshare)
		shift
	fi
	rs_bg "$name-server" "$NS_A" "${pre[@]}" "$RS_BIN/eintr-recv" server "$port"
	SERVER_PID=$RS_LASTPID
	rs_wait_ready "$name-server"
	rs_bg "$name-client" "$NS_B" "${pre[@]}" env ${CLIENT_ENV:-} "$RS_BIN/eintr-recv" client "$@" -w "$RS_TMP/$name.hold" \
		$ADDR_A "$port"
	CLIENT_PID=$RS_LASTPID
	rs_wait_file "$RS_TMP/$name-client.out" '^received 100000 verified$' 1 8
}

# finish NAME: release the client, both must exit 0
finish() {
	touch "$RS_TMP/$1.hold"
	rs_wait_pid "$CLIENT_PID" 20 || rs_fail "$1 client exit $?: $(cat "$RS_TMP/$1-client.err")"
	rs_wait_pid "$SERVER_PID" 20 || rs_fail "$1 server exit $?: $(cat "$RS_TMP/$1-server.err")"
	grep -q '^server done$' "$RS_TMP/$1-server.out" || rs_fail "$1 server did not see EOF"
}

# finish_closed NAME: the client (-c) closes its socket and lives on; the
# server sees EOF from that close alone, then both exit 0
finish_closed() {
	touch "$RS_TMP/$1.hold"
	rs_wait_file "$RS_TMP/$1-client.out" '^closed$' 1 10
	rs_wait_pid "$SERVER_PID" 20 || rs_fail "$1: the server saw no EOF from the close while the client lived (exit $?): $(cat "$RS_TMP/$1-server.err")"
	grep -q '^server done$' "$RS_TMP/$1-server.out" || rs_fail "$1 server did not see EOF"
	touch "$RS_TMP/$1.hold.exit"
	rs_wait_pid "$CLIENT_PID" 20 || rs_fail "$1 client exit $?: $(cat "$RS_TMP/$1-client.err")"
}

# the outcome word and handler count: "eintr 1", "data 1"
outcome() {
	sed -n 's/^outcome \([a-z]*\) after .* s, handler ran \([0-9]*\)$/\1 \2/p' "$RS_TMP/$1-client.out"
}

# b_received PORT: B's socket to PORT has received all 100000 bytes
b_received() {
	rs_stat "$NS_B" | jq -e --argjson port "$1" \
		"$RS_JQ_DEFS"'[.sockets[] | select((.peer|port_of) == $port and .bytes_rx == 100000)] | length == 1' >/dev/null
}

# check_rshare PORT: the client's socket on B was an rshare connection to
# PORT on A that received all 100000 bytes, matched by its peer on A.  B
# is read first, once it has them (the client may still be reading when
# its outcome is printed): what B received, A has sent
check_rshare() {
	rs_retry 10 b_received "$1" || true
	rs_stat "$NS_B" >"$RS_TMP/statB.json"
	rs_stat "$NS_A" >"$RS_TMP/statA.json"
	rs_jq_check "the connection was on rshare" \
		--slurpfile a "$RS_TMP/statA.json" --slurpfile b "$RS_TMP/statB.json" --argjson port "$1" '
		$a[0] as $A | $b[0] as $B |
		fail($B.counters.fallback_connects == 0; "B fell back to kernel TCP"),
		fail($B.links|length == 1 and $B.links[0].state == "up"; "B links \($B.links)"),
		[$B.sockets[] | select(.state == "established" and (.peer|port_of) == $port)] as $cs |
		fail($cs|length == 1; "B has \($cs|length) established sockets to port \($port), want 1"),
		($cs[0] // {}) as $x |
		fail($x.link == $B.links[0].id; "client socket on link \($x.link)"),
		fail($x.bytes_rx == 100000 and $x.bytes_tx == 1;
		     "client socket bytes_rx \($x.bytes_rx) bytes_tx \($x.bytes_tx), want 100000 and 1"),
		([$A.sockets[] | select(.sid == $x.peer_sid)][0] // {}) as $y |
		fail($y.peer_sid == $x.sid and $y.bytes_tx == 100000;
		     "A peer socket \($y.sid // "none") peer_sid \($y.peer_sid) bytes_tx \($y.bytes_tx)")'
}

# between LO and HI seconds: the client's recv() blocked until the alarm
blocked_for() {
	local dt
	dt=$(sed -n 's/^outcome [a-z]* after \([0-9.]*\) s.*/\1/p' "$RS_TMP/$1-client.out")
	awk -v d="${dt:-0}" -v lo="$2" -v hi="$3" 'BEGIN { exit !(d >= lo && d <= hi) }'
}

# both_ways PORT WANT [CLIENT-OPTIONS...]: the client's recv on kernel TCP
# (port PORT) ends WANT ("eintr 1", "data 1"), and under rshare (PORT + 1,
# with $CLIENT_ENV) the same; the rshare client is left running ("rs")
both_ways() {
	local port=$1 want=$2
	shift 2
	run_pair plain "$port" "$@"
	[[ $(outcome plain) == "$want" ]] || rs_fail "kernel TCP reference: $(cat "$RS_TMP/plain-client.out")"
	finish plain

	run_pair rs $((port + 1)) --rshare "$@"
	[[ $(outcome rs) == "$want" ]] ||
		rs_fail "rshare: '$(outcome rs)', kernel TCP: '$want': $(cat "$RS_TMP/rs-client.out")"
}

@test "blocked recv without SA_RESTART returns EINTR on SIGALRM, then the connection still works" {
	both_ways 7201 "eintr 1" -a 1500
	blocked_for rs 1.4 2.0 || rs_fail "rshare recv did not block until the alarm: $(cat "$RS_TMP/rs-client.out")"
	check_rshare 7202
	finish rs
}

# alarm(1) expires together with the 1 s timeout of the wait inside the
# preloaded recv(): the signal must still end the recv().
@test "blocked recv without SA_RESTART returns EINTR on the SIGALRM of alarm(1)" {
	both_ways 7205 "eintr 1"
	blocked_for rs 0.9 1.5 || rs_fail "rshare recv did not block until the alarm: $(cat "$RS_TMP/rs-client.out")"
	check_rshare 7206
	finish rs
}

@test "blocked recv with SA_RESTART is restarted after SIGALRM, as on kernel TCP" {
	both_ways 7203 "data 1" -R -a 1500
	check_rshare 7204
	finish rs
}

# The alarm comes 20 ms into a spin of 100 ms: the handler runs while the
# preloaded recv polls its ring, not while it sleeps.
@test "a handler that runs while a blocked recv polls its ring ends it with EINTR, as on kernel TCP" {
	CLIENT_ENV=RSHARE_SPIN_US=100000 both_ways 7207 "eintr 1" -a 20
	check_rshare 7208
	finish rs
}

@test "a handler with SA_RESTART that runs while a blocked recv polls its ring leaves it blocked, as on kernel TCP" {
	CLIENT_ENV=RSHARE_SPIN_US=100000 both_ways 7209 "data 1" -R -a 20
	check_rshare 7210
	finish rs
}

# A handler that leaves with siglongjmp, as old programs time out a
# blocking call: the recv it left never returns, and the socket must
# still carry the rest (kernel TCP holds no lock of the socket's while it
# waits).  Once while the preloaded recv polls its ring, once while it
# sleeps.
@test "a handler that jumps out of a blocked recv while it polls its ring leaves the socket working, as on kernel TCP" {
	CLIENT_ENV=RSHARE_SPIN_US=100000 both_ways 7211 "jumped 1" -j -a 20
	check_rshare 7212
	finish rs
}

@test "a handler that jumps out of a blocked recv while it sleeps leaves the socket working, as on kernel TCP" {
	both_ways 7213 "jumped 1" -j -a 300
	check_rshare 7214
	finish rs
}

# A close() after the jump releases the socket: the peer gets its FIN
# while the process lives on (the recv's hold on the socket, left by the
# jump, used to keep it from ever being released).
@test "a socket closed after a handler jumped out of its blocked recv sends its FIN, as on kernel TCP" {
	run_pair plain 7215 -j -c -a 300
	[[ $(outcome plain) == "jumped 1" ]] || rs_fail "kernel TCP reference: $(cat "$RS_TMP/plain-client.out")"
	finish_closed plain
	run_pair rs 7216 --rshare -j -c -a 300
	[[ $(outcome rs) == "jumped 1" ]] || rs_fail "rshare: $(cat "$RS_TMP/rs-client.out")"
	check_rshare 7216
	finish_closed rs
}

# ... and when the close is the first call on the socket after the jump
@test "a socket closed right after a handler jumped out of its blocked recv sends its FIN, as on kernel TCP" {
	local name port=7217
	for name in plain rs; do
		local pre=()
		[[ $name == rs ]] && pre=(--rshare)
		rs_bg "$name-server" "$NS_A" "${pre[@]}" "$RS_BIN/eintr-recv" server "$port"
		SERVER_PID=$RS_LASTPID
		rs_wait_ready "$name-server"
		rs_bg "$name-client" "$NS_B" "${pre[@]}" "$RS_BIN/eintr-recv" client -j -C -a 300 -w "$RS_TMP/$name.hold" \
			$ADDR_A "$port"
		CLIENT_PID=$RS_LASTPID
		rs_wait_file "$RS_TMP/$name-client.out" '^outcome ' 1 8
		[[ $(outcome "$name") == "jumped 1" ]] || rs_fail "$name: $(cat "$RS_TMP/$name-client.out")"
		finish_closed "$name"
		port=$((port + 1))
	done
	rs_stat "$NS_B" >"$RS_TMP/statB.json"
	rs_jq_check "the connection was on rshare" --slurpfile b "$RS_TMP/statB.json" '
		$b[0] as $B | fail($B.counters.fallback_connects == 0; "B fell back to kernel TCP"),
		fail(($B.links|length) == 1 and $B.links[0].connections_total >= 1; "B links \($B.links)")'
}

# The old way to a read that a timeout interrupts: signal(2), which sets
# SA_RESTART, then siginterrupt(3), which takes it off.  glibc's
# siginterrupt changed the kernel's flags past the library's record of
# them: a handler that came while the recv slept ended it (the kernel
# ends the sleep), but one that came while it polled counted as one that
# restarts, and the recv waited for good (the second case, before the
# library had its own siginterrupt).
@test "a handler that siginterrupt(3) made interrupting ends a blocked recv with EINTR, as on kernel TCP" {
	both_ways 7231 "eintr 1" -I -a 1500
	check_rshare 7232
	finish rs
}

@test "a handler that siginterrupt(3) made interrupting, run while a blocked recv polls its ring, ends it with EINTR, as on kernel TCP" {
	CLIENT_ENV=RSHARE_SPIN_US=100000 both_ways 7233 "eintr 1" -I -a 20
	check_rshare 7234
	finish rs
}
