#!/usr/bin/env bats
# A blocked accept or connect, in a program that has a handler installed
# with SA_RESTART (SIGALRM, which runs) and one without it (SIGUSR1): the
# kernel restarts the call after the handler that ran, whatever the
# others' flags (tests/restart-per-handler.c).  rshare used to guess from
# all the handlers the process has (any without SA_RESTART: EINTR); it now
# knows which ran from the library's count of them (preload/signal.c).  A
# connect across nodes then ends with EINTR at SIGUSR1, and an accept on
# one node takes the connection that comes after the alarm; each run once
# on kernel TCP and once under rshare, the hubs' stat proving the latter.
# waits: accepts and connects blocked until alarms

load lib

setup() {
	rs_require restart-per-handler connect-interrupted
	rs_setup
	rs_two_nodes
}

teardown() {
	rs_teardown
}

@test "a blocked connect goes on after a handler with SA_RESTART beside one without, as on kernel TCP" {
	rs_vs_kernel conn "$NS_B" 7671 "$RS_BIN/connect-interrupted" -s PORT -- \
		"$RS_BIN/restart-per-handler" connect $ADDR_A PORT
	[[ $RS_TCP == "ok ok EINTR alarms 1 usr1 1" ]] || rs_fail "kernel TCP: '$RS_TCP'"
	rs_stat "$NS_B" >"$RS_TMP/statB.json"
	rs_jq_check "the rshare run took the link" --slurpfile b "$RS_TMP/statB.json" '$b[0] as $B |
		fail(($B.links[0].connections_total // 0) >= 2; "B link carried \($B.links[0].connections_total) connections")'
}

@test "a blocked accept goes on after a handler with SA_RESTART beside one without, as on kernel TCP" {
	local tcp rs
	tcp=$(RS_TIMEOUT=30 rs_exec "$NS_A" "$RS_BIN/restart-per-handler" accept 7673)
	[[ $tcp == "accept ok alarms 1 usr1 0 read x" ]] || rs_fail "kernel TCP: '$tcp'"
	rs=$(RS_TIMEOUT=30 rs_exec "$NS_A" --rshare "$RS_BIN/restart-per-handler" accept 7674)
	[[ $rs == "$tcp" ]] || rs_fail "rshare: '$rs', kernel TCP: '$tcp'"
	rs_stat "$NS_A" >"$RS_TMP/statA.json"
	rs_jq_check "the rshare run took the same-node path" --slurpfile a "$RS_TMP/statA.json" '$a[0] as $A |
		fail($A.counters.local_connects >= 1; "local_connects \($A.counters.local_connects)")'
}
