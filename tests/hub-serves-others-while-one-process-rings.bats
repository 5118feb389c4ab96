#!/usr/bin/env bats
# One process that rings its doorbell in a loop, with nothing for the hub
# to do (tests/bell-ringer.c), does not keep the hub from anyone else: a
# new process's first request is answered, an echo across the link runs,
# and stat answers, while it rings.  The hub used to drain doorbells for
# as long as any rang, and never came back to its requests and links.

load lib

setup() {
	rs_require bell-ringer echo-server echo-client
	rs_setup
	rs_two_nodes
}

teardown() {
	rs_teardown
}

@test "a process ringing its doorbell in a loop: others' requests, links and stat are served" {
	rs_bg ringer "$NS_B" "$RS_BIN/bell-ringer" 7741
	rs_wait_file "$RS_TMP/ringer.out" ringing 1 10 || rs_fail "the ringer did not start: $(cat "$RS_TMP/ringer.err")"
	rs_bg server "$NS_A" --rshare "$RS_BIN/echo-server" -w 1 7742
	rs_wait_listen "$NS_A" 7742 --rshare
	RS_TIMEOUT=60 run rs_exec "$NS_B" --rshare "$RS_BIN/echo-client" -c 4 -m 4096 -n 50 $ADDR_A 7742
	[[ $status == 0 ]] || rs_fail "echo while the ringer rings: status $status: $output"
	kill -0 "$(cat "$RS_TMP/ringer.pid")" || rs_fail "the ringer stopped"
	rs_stat "$NS_B" >"$RS_TMP/statB.json" || rs_fail "stat did not answer while the ringer rings"
	rs_jq_check "the echo took the link" --slurpfile b "$RS_TMP/statB.json" '
		$b[0] as $B |
		fail(($B.links[0].connections_total // 0) >= 4; "link carried \($B.links[0].connections_total // 0)"),
		fail($B.counters.fallback_connects == 0; "fallback_connects \($B.counters.fallback_connects)")'
}
