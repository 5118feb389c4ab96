#!/usr/bin/env bats
# A hub that has used every descriptor it may hold turns new processes away
# (their connection to it closes: they run on kernel TCP) and goes on
# serving the others; once processes leave, it answers again.  It used to
# spin in its accept loop for ever once a process came while it had no
# descriptor left (the kernel says EMFILE before it looks for a waiting
# connection), and then never saw the others leave.

load lib

setup() {
	rs_require pool-intruder
	command -v prlimit >/dev/null || skip "needs prlimit"
	rs_setup
	rs_netns "$NS_B"
}

teardown() {
	exec 7>&- 2>/dev/null || true
	rs_teardown
}

@test "a hub out of descriptors turns processes away, then serves again when they leave" {
	local i n
	RSHARE_LOG=info rs_bg "hub-$NS_B" "$NS_B" prlimit --nofile=64:64 "$RSHARED"
	rs_retry 10 bash -c "ip netns exec $NS_B timeout 2 $RSHARE stat --json >/dev/null 2>&1" ||
		rs_fail "the hub did not start"
	mkfifo "$RS_TMP/hold"
	# each process attached costs the hub three descriptors (its
	# connection, the pool's arena and its eventfd): 30 are too many
	for i in $(seq 30); do
		ip netns exec "$NS_B" timeout 120 "$RS_BIN/pool-intruder" owner <"$RS_TMP/hold" \
			>"$RS_TMP/h$i.out" 2>&1 &
	done
	exec 7>"$RS_TMP/hold"
	for ((i = 0; i < 100; i++)); do
		n=$(cat "$RS_TMP"/h*.out 2>/dev/null | grep -cE '^token|no hub' || true)
		((n >= 30)) && break
		sleep 0.1
	done
	n=$(cat "$RS_TMP"/h*.out | grep -c '^token' || true)
	((n > 0 && n < 30)) || rs_fail "$n of 30 processes attached, want some but not all"
	kill -0 "$(cat "$RS_TMP/hub-$NS_B.pid")" || rs_fail "the hub died"
	exec 7>&- # the holders leave
	rs_retry 20 bash -c "ip netns exec $NS_B timeout 2 $RSHARE stat --json >$RS_TMP/stat.json 2>/dev/null" ||
		rs_fail "the hub does not answer once the processes left"
	rs_jq_check "the turned-away processes are counted" --slurpfile b "$RS_TMP/stat.json" '
		$b[0] as $B | fail($B.counters.procs_refused >= 1; "procs_refused \($B.counters.procs_refused)")'
	grep -q "a process turned away: the hub has no descriptor left" "$RS_TMP/hub-$NS_B.err" ||
		rs_fail "the hub did not say it turned processes away"
}
