#!/usr/bin/env bats
# A program whose socket I/O goes through io_uring (tests/uring-echo-server.c,
# linked with liburing) would hand the kernel operations on sockets that
# rshare serves from the arena, which no call of the library sees.  So a
# program linked with liburing runs on kernel TCP from its start: preloaded,
# it echoes every byte to a preloaded client as it does without rshare, and
# no socket of it is an rshare one (its hub has no listener, the client's
# hub counts its connections as fallen back to kernel TCP).

load lib

setup() {
	rs_require uring-echo-server echo-client
	rs_setup
	rs_two_nodes
}

teardown() {
	rs_teardown
}

@test "an io_uring echo server, preloaded, serves on kernel TCP as without rshare" {
	rs_vs_kernel uring "$NS_B" 7841 "$RS_BIN/uring-echo-server" PORT -- \
		"$RS_BIN/echo-client" -c 4 -n 8 -m 100000 $ADDR_A PORT
	[[ $RS_TCP == *"conns=4 verified=4 resets=0"* ]] || rs_fail "kernel TCP: $RS_TCP"
	rs_stat "$NS_A" >"$RS_TMP/a.json"
	rs_stat "$NS_B" >"$RS_TMP/b.json"
	rs_jq_check "the io_uring program stayed on kernel TCP" --slurpfile a "$RS_TMP/a.json" \
		--slurpfile b "$RS_TMP/b.json" '
		$a[0] as $A | $b[0] as $B |
		fail([$A.sockets[] | select(.state == "listening")] | length == 0; "node A has an rshare listener"),
		fail($B.counters.fallback_connects >= 4; "node B fell back \($B.counters.fallback_connects) times, want 4")'
}
