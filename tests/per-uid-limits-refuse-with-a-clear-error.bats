#!/usr/bin/env bats
# rshare.conf's per-uid limits (uid_sockets, uid_pools, uid_memory) hold:
# what goes past one is refused with a clear error (connect fails with
# ENOBUFS, as kernel TCP under memory pressure; the hub logs the uid and
# the limit and counts it in stat), and the rest goes on as before.

load lib

setup() {
	rs_require many-connections
	rs_setup
	rs_two_nodes nohubs
	RS_CONF=$RS_TMP/rshare.conf
}

teardown() {
	rs_teardown
}

# hubs with CONF's lines on node B, none on A; the server on A
start() {
	printf '%s\n' "$@" >"$RS_CONF"
	rs_hub_start "$NS_A"
	RSHARE_CONF=$RS_CONF rs_hub_start "$NS_B"
	rs_bg server "$NS_A" --rshare "$RS_BIN/many-connections" server -w 1 7731
	rs_wait_listen "$NS_A" 7731 --rshare
	sleep 0.3
}

client() {
	RSHARE_CONF=$RS_CONF RS_TIMEOUT=60 rs_exec "$NS_B" --rshare "$RS_BIN/many-connections" client "$@" $ADDR_A 7731 \
		2>>"$RS_TMP/client.err"
}

@test "uid_sockets 3: the 4th connection fails with ENOBUFS, the first 3 echo, the hub says why" {
	start "uid_sockets 3"
	run client -n 5
	[[ $output == "open=3 echoed=3 errors=0 first=ENOBUFS" ]] || rs_fail "client: '$output'"
	rs_stat "$NS_B" >"$RS_TMP/statB.json"
	rs_jq_check "the limit is counted, nothing fell back" --slurpfile b "$RS_TMP/statB.json" '
		$b[0] as $B |
		fail($B.counters.limit_refused >= 1; "limit_refused \($B.counters.limit_refused)"),
		fail($B.counters.fallback_connects == 0; "fallback_connects \($B.counters.fallback_connects)"),
		fail(($B.links[0].connections_total // 0) == 3; "link carried \($B.links[0].connections_total // 0)")'
	grep -q "uid $(id -u): at its limit of sockets (rshare.conf uid_sockets)" "$RS_TMP/hub-$NS_B.err" ||
		rs_fail "the hub did not say which limit"
	# the sockets went back: the next client gets its 3 again
	run client -n 3
	[[ $output == "open=3 echoed=3 errors=0 first=none" ]] || rs_fail "second client: '$output'"
}

@test "uid_memory 1M: connections past 1 MiB of rings fail with ENOBUFS, the others echo" {
	start "uid_memory 1M"
	run client -n 8
	# 256 KiB of rings each: 4 fit
	[[ $output == "open=4 echoed=4 errors=0 first=ENOBUFS" ]] || rs_fail "client: '$output'"
	grep -q "at its limit of memory (rshare.conf uid_memory)" "$RS_TMP/hub-$NS_B.err" ||
		rs_fail "the hub did not say which limit"
}

@test "a bad limit in rshare.conf is a clear error of the hub" {
	printf 'uid_sockets lots\n' >"$RS_CONF"
	run ip netns exec "$NS_B" env RSHARE_CONF="$RS_CONF" "$RSHARED"
	[[ $status == 2 ]] || rs_fail "status $status: $output"
	[[ $output == *"uid_sockets: 'lots' is not a number from 1 to 16777216"* ]] || rs_fail "$output"
}
