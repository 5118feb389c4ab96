#!/usr/bin/env bats
# Echo clients that write a whole 1 MiB chunk before they read the echo
# (tests/write-then-read-client.c, 4 connections x 3 rounds) finish on
# kernel TCP, whose buffers grow under load; over rshare they stalled once
# 256 KiB was in flight each way (a 128 KiB send ring and the peer's
# 128 KiB receive ring).  A send ring that a writer finds full now grows,
# up to tcp_wmem's maximum (on one node, the one ring of the direction), so
# the same clients finish the same way, in front of a fork-per-connection
# server that execs its worker (socat fork EXEC:cat) and a pre-fork one
# (echo-server), across two nodes and within one.  Both ends nonblocking,
# each sending 512 KiB before it reads, finish too, across nodes and on
# one: the hub grows the full ring of a writer that waits in poll.  The hubs' stat proves the rshare
# runs took the link, or the same-node path.

load lib

setup() {
	rs_require write-then-read-client echo-server
	command -v socat >/dev/null || skip "socat not installed"
	rs_setup
	rs_two_nodes
}

teardown() {
	rs_teardown
}

# run NAME PORT [--rshare] SERVER...: the client's line in $out (the
# client on node B, or CLIENT_NS)
run_pair() {
	local name=$1 port=$2 pre= cns=${CLIENT_NS:-$NS_B}
	shift 2
	if [[ $1 == --rshare ]]; then
		pre=--rshare
		shift
	fi
	rs_bg "$name" "$NS_A" $pre "$@"
	rs_wait_listen "$NS_A" "$port" $pre
	sleep 0.3
	out=$(RS_TIMEOUT=120 rs_exec "$cns" $pre "$RS_BIN/write-then-read-client" -c 4 -m 1048576 -n 3 \
		$ADDR_A "$port" 2>"$RS_TMP/$name-client.err") || true
}

check_link() {
	local min=$1
	rs_stat "$NS_B" >"$RS_TMP/statB.json"
	rs_jq_check "the rshare runs took the link" --slurpfile b "$RS_TMP/statB.json" --argjson n "$min" '
		$b[0] as $B |
		fail(($B.links[0].connections_total // 0) >= $n; "B link carried \($B.links[0].connections_total) connections, want \($n)"),
		fail(($B.links[0].bytes_rx // 0) >= $n * 3 * 1048576; "B link received \($B.links[0].bytes_rx) bytes"),
		fail($B.counters.fallback_connects == 0; "fallback_connects \($B.counters.fallback_connects)")'
}

@test "large writes before reads: socat fork EXEC:cat, as on kernel TCP" {
	local want="done conns=4 verified=4 errors=0 bytes=12582912" tcp rs
	run_pair k-socat 7601 socat TCP-LISTEN:7601,fork,reuseaddr EXEC:cat
	tcp=$out
	[[ $tcp == "$want" ]] || rs_fail "kernel TCP: '$tcp' $(cat "$RS_TMP/k-socat-client.err")"
	run_pair r-socat 7602 --rshare socat TCP-LISTEN:7602,fork,reuseaddr EXEC:cat
	rs=$out
	[[ $rs == "$tcp" ]] || rs_fail "rshare: '$rs', kernel TCP: '$tcp' $(cat "$RS_TMP/r-socat-client.err")"
	check_link 4
}

@test "large writes before reads: a pre-fork echo server, as on kernel TCP" {
	local want="done conns=4 verified=4 errors=0 bytes=12582912" tcp rs
	run_pair k-echo 7603 "$RS_BIN/echo-server" -w 2 7603
	tcp=$out
	[[ $tcp == "$want" ]] || rs_fail "kernel TCP: '$tcp' $(cat "$RS_TMP/k-echo-client.err")"
	run_pair r-echo 7604 --rshare "$RS_BIN/echo-server" -w 2 7604
	rs=$out
	[[ $rs == "$tcp" ]] || rs_fail "rshare: '$rs', kernel TCP: '$tcp' $(cat "$RS_TMP/r-echo-client.err")"
	check_link 4
}

@test "large writes before reads: a pre-fork echo server on the same node, as on kernel TCP" {
	local want="done conns=4 verified=4 errors=0 bytes=12582912" tcp rs
	CLIENT_NS=$NS_A run_pair k-local 7605 "$RS_BIN/echo-server" -w 2 7605
	tcp=$out
	[[ $tcp == "$want" ]] || rs_fail "kernel TCP: '$tcp' $(cat "$RS_TMP/k-local-client.err")"
	CLIENT_NS=$NS_A run_pair r-local 7606 --rshare "$RS_BIN/echo-server" -w 2 7606
	rs=$out
	[[ $rs == "$tcp" ]] || rs_fail "rshare: '$rs', kernel TCP: '$tcp' $(cat "$RS_TMP/r-local-client.err")"
	rs_stat "$NS_A" >"$RS_TMP/statA.json"
	rs_jq_check "the rshare run took the same-node path" --slurpfile a "$RS_TMP/statA.json" '
		$a[0] as $A | fail($A.counters.local_connects >= 4; "local_connects \($A.counters.local_connects)")'
}

# xchg NAME PORT [--rshare]: both ends nonblocking, 512 KiB each way
# before either reads (tests/nonblocking-exchange.c); their lines in $out
xchg() {
	local name=$1 port=$2 pre=${3:-}
	rs_bg "$name" "$NS_A" $pre "$RS_BIN/nonblocking-exchange" server "$port" 524288
	rs_wait_file "$RS_TMP/$name.out" '^ready' 1 10
	out=$(RS_TIMEOUT=60 rs_exec "${CLIENT_NS:-$NS_B}" $pre "$RS_BIN/nonblocking-exchange" client $ADDR_A "$port" 524288)
	rs_wait_pid "$(cat "$RS_TMP/$name.pid")" 30 || true
	out="$out / $(grep -v '^ready' "$RS_TMP/$name.out")"
}

@test "large writes before reads: both ends nonblocking, 512 KiB each way before reading, as on kernel TCP" {
	local tcp
	xchg k-xchg 7607
	tcp=$out
	[[ $tcp == "client ok 524288 / server ok 524288" ]] || rs_fail "kernel TCP: '$tcp'"
	# a nonblocking writer waits in poll, not in send: the hub watches its
	# full ring and grows it when the reader stalls
	xchg r-xchg 7608 --rshare
	[[ $out == "$tcp" ]] || rs_fail "rshare: '$out', kernel TCP: '$tcp'"
	# both writers wait with full rings: whichever hub grows its writer's
	# ring first lets that end read, and the other's bytes then flow
	rs_stat "$NS_A" >"$RS_TMP/statA.json"
	rs_stat "$NS_B" >"$RS_TMP/statB.json"
	rs_jq_check "a writer's send ring grew on the link" --slurpfile a "$RS_TMP/statA.json" --slurpfile b "$RS_TMP/statB.json" '
		$a[0] as $A | $b[0] as $B |
		fail($A.counters.tx_rings_grown + $B.counters.tx_rings_grown >= 1;
		     "tx_rings_grown A \($A.counters.tx_rings_grown) B \($B.counters.tx_rings_grown)"),
		fail(($B.links[0].bytes_tx // 0) >= 524288; "B link sent \($B.links[0].bytes_tx) bytes")'
}

@test "large writes before reads: both ends nonblocking on the same node, 512 KiB each way, as on kernel TCP" {
	local tcp
	CLIENT_NS=$NS_A xchg k-xchg-local 7609
	tcp=$out
	[[ $tcp == "client ok 524288 / server ok 524288" ]] || rs_fail "kernel TCP: '$tcp'"
	CLIENT_NS=$NS_A xchg r-xchg-local 7610 --rshare
	[[ $out == "$tcp" ]] || rs_fail "rshare: '$out', kernel TCP: '$tcp'"
	rs_stat "$NS_A" >"$RS_TMP/statA.json"
	rs_jq_check "the same-node rings grew" --slurpfile a "$RS_TMP/statA.json" '
		$a[0] as $A |
		fail($A.counters.local_connects >= 1; "local_connects \($A.counters.local_connects)"),
		fail($A.counters.tx_rings_grown >= 1; "tx_rings_grown \($A.counters.tx_rings_grown)")'
}
