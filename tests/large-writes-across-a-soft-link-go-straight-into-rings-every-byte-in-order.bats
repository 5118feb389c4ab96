#!/usr/bin/env bats
# The receiving hub of a soft link reads a large write's payload from the
# link straight into the destination ring (soft_rx.c), not through its own
# buffer.  Echo clients on node B send messages of up to 1 MiB (the
# sending hub writes them in frames of up to 64 KiB) to an echo server on
# node A, on kernel TCP and on rshare: both runs end with the same
# verdict, every echoed byte checked in order; both links read payload
# straight into rings (bytes_rx_direct: A the clients' bytes, B the
# echoes), and no connection fell back to kernel TCP.

load lib

setup() {
	rs_require echo-server echo-client
	export RSHARE_TRANSPORT=soft
	rs_setup
	rs_two_nodes
}

teardown() {
	rs_teardown
}

@test "large writes across a soft link go straight into their rings, every byte in order, as on kernel TCP" {
	rs_vs_kernel echo "$NS_B" 7841 "$RS_BIN/echo-server" -w 2 PORT -- \
		"$RS_BIN/echo-client" -c 4 -s 31 -n 48 -m 1048576 $ADDR_A PORT
	echo "# kernel TCP and rshare: $RS_TCP" >&3
	rs_stat "$NS_A" >"$RS_TMP/a.json"
	rs_stat "$NS_B" >"$RS_TMP/b.json"
	echo "# read straight into rings: A $(jq '.links[0].bytes_rx_direct' "$RS_TMP/a.json") of $(jq '.links[0].bytes_rx' "$RS_TMP/a.json") bytes, B $(jq '.links[0].bytes_rx_direct' "$RS_TMP/b.json") of $(jq '.links[0].bytes_rx' "$RS_TMP/b.json")" >&3
	[[ $RS_TCP == *"verified=4 resets=0 errors=0"* ]] || rs_fail "kernel TCP: $RS_TCP"
	rs_jq_check "both links read payload straight into rings, nothing fell back" \
		--slurpfile a "$RS_TMP/a.json" --slurpfile b "$RS_TMP/b.json" '
		$a[0] as $A | $b[0] as $B | one_link($A; $B),
		fail($A.links[0].transport == "soft"; "A link transport \($A.links[0].transport)"),
		fail($A.links[0].bytes_rx_direct > 0; "A read nothing straight into a ring"),
		fail($B.links[0].bytes_rx_direct > 0; "B read nothing straight into a ring"),
		fail($A.counters.fallback_connects == 0 and $B.counters.fallback_connects == 0;
		     "fallback_connects A \($A.counters.fallback_connects) B \($B.counters.fallback_connects)")'
}
