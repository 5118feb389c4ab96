#!/usr/bin/env bats
# One thread of a client blocks reading answers that come 20 ms apart while
# another writes to the same connection without a pause (sink: the server
# reads all of it) or is blocked on a full send buffer (stall: the server
# reads nothing more).  A blocked recv should wake for bytes to read and a
# blocked send for room to write, not for the other direction's traffic.
# Over rshare the reader (sink) and the blocked writer (stall) must go to
# sleep no more often than on kernel TCP, and no more than the design
# allows: the reader once an answer, the blocked writer not at all (they
# sleep on words of their own, arena.h: rx_seq, tx_seq).  Kernel TCP
# itself sleeps more in sink mode (10 to 190 an answer here: the writer
# holds the socket's lock), once an answer in stall mode.  Before the
# words were split, every completion of the writer's woke the reader too
# (115 to 137 an answer across nodes, 2 to 16 on one node) and every
# answer the blocked writer (1).  The count: voluntary context switches
# of the thread from the first answer to the last, an answer, rounded
# (tests/sleeps-per-answer.c).  The same programs run on kernel TCP
# first; the hubs' stat shows the rshare runs took rshare's path.

load lib

setup() {
	rs_require sleeps-per-answer
	rs_setup
	rs_two_nodes
}

teardown() {
	rs_teardown
}

# sleeps NS ADDR PORT [--rshare] MODE: the client's count
sleeps() {
	local ns=$1 addr=$2 port=$3 pre=() out
	shift 3
	[[ $1 == --rshare ]] && pre=(--rshare) && shift
	out=$(rs_exec "$ns" "${pre[@]}" "$RS_BIN/sleeps-per-answer" client "$addr" "$port" "$1" 30) ||
		rs_fail "$1 client${pre:+ over rshare}: $out"
	[[ $out == *"answers: 31 ok"* ]] || rs_fail "$1 client${pre:+ over rshare}: $out"
	sed -n 's/^sleeps per answer: //p' <<<"$out"
}

# compare NS ADDR PORT: both modes on kernel TCP (server on A, PORT) and
# over rshare (PORT + 1)
compare() {
	local ns=$1 addr=$2 port=$3 m k r
	rs_bg spa-tcp "$NS_A" "$RS_BIN/sleeps-per-answer" server $port
	rs_bg spa-rs "$NS_A" --rshare "$RS_BIN/sleeps-per-answer" server $((port + 1))
	rs_wait_ready spa-tcp
	rs_wait_ready spa-rs
	for m in sink stall; do
		k=$(sleeps "$ns" "$addr" $port "$m")
		r=$(sleeps "$ns" "$addr" $((port + 1)) --rshare "$m")
		echo "$m: kernel TCP $k, rshare $r sleeps an answer"
		((r <= k)) || rs_fail "$m: rshare's thread slept $r times an answer, kernel TCP's $k"
		if [[ $m == sink ]]; then
			((r == 1)) || rs_fail "sink: the reader slept $r times an answer, want 1"
		else
			((r == 0)) || rs_fail "stall: the blocked writer slept $r times an answer, want 0"
		fi
	done
}

@test "threads reading and writing one connection across nodes sleep no more than on kernel TCP" {
	compare "$NS_B" $ADDR_A 7330
	rs_stat "$NS_B" >"$RS_TMP/statB.json"
	rs_jq_check "the rshare runs crossed the link" --slurpfile b "$RS_TMP/statB.json" '
		$b[0] as $B |
		fail($B.links|length == 1; "B has \($B.links|length) links, want 1"),
		fail(($B.links[0].connections_total // 0) >= 2; "B link connections_total \($B.links[0].connections_total)"),
		fail($B.counters.fallback_connects == 0; "B fallback_connects \($B.counters.fallback_connects)")'
}

@test "threads reading and writing one connection on one node sleep no more than on kernel TCP" {
	compare "$NS_A" 127.0.0.1 7340
	rs_stat "$NS_A" >"$RS_TMP/statA.json"
	rs_jq_check "the rshare runs took the same-node path" --slurpfile a "$RS_TMP/statA.json" '
		$a[0] as $A |
		fail($A.counters.local_connects >= 2; "local_connects \($A.counters.local_connects), want 2"),
		fail($A.counters.fallback_connects == 0; "fallback_connects \($A.counters.fallback_connects)")'
}
