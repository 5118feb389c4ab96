#!/usr/bin/env bats
# Isolation (rshare(7), SECURITY): a process joins a pool only as a child
# forked by one of its processes.  The hub refuses MSG_FORK with a wrong
# token (the pool's secret), with the right token from a process that is
# not its holder, and from another uid; and the arena's memfd is never
# handed to anyone but the pool's first process.

load lib

setup() {
	rs_require pool-intruder
	rs_setup
	rs_two_nodes
}

teardown() {
	exec 7>&- 2>/dev/null || true
	rs_teardown
}

@test "a pool admits only the children of its processes" {
	local token
	mkfifo "$RS_TMP/hold"
	ip netns exec "$NS_A" timeout 60 "$RS_BIN/pool-intruder" owner <"$RS_TMP/hold" >"$RS_TMP/owner.out" &
	exec 7>"$RS_TMP/hold"
	rs_wait_file "$RS_TMP/owner.out" '^token '
	token=$(awk '/^token/ {print $2}' "$RS_TMP/owner.out")
	run ip netns exec "$NS_A" "$RS_BIN/pool-intruder" guess
	[[ $output == "status -1" ]] || rs_fail "made-up token: $output (want status -1, EPERM)"
	run ip netns exec "$NS_A" "$RS_BIN/pool-intruder" steal "$token"
	[[ $output == "status -1" ]] || rs_fail "stolen token, other pid: $output (want status -1, EPERM)"
	run ip netns exec "$NS_A" "$RS_BIN/pool-intruder" steal-as 65534 "$token"
	[[ $output == "status -1" ]] || rs_fail "stolen token, other uid: $output (want status -1, EPERM)"
	# the owner's pool still has one process: nobody got in
	rs_stat "$NS_A" >"$RS_TMP/a.json"
	rs_jq_check "one pool, one process" --slurpfile a "$RS_TMP/a.json" '
		fail(($a[0].pools | length) == 1 and $a[0].pools[0].processes == 1;
			"pools: \($a[0].pools)")'
	exec 7>&-
}
