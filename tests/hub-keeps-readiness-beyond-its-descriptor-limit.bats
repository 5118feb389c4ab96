#!/usr/bin/env bats
# A hub holds more polled connections than its own descriptor limit: each
# polled socket's readiness descriptor is a socketpair, and past a budget
# of three quarters of its limit the hub hands the least recently used to
# keeper processes and takes them back when it needs them (keep.c).  A
# hub limited to 256 descriptors serves 2,000 connections that a pre-fork
# server polls with epoll, and the client sees what it sees on kernel TCP.
# Before, such a hub refused readiness descriptors past about 100
# connections: the server's epoll_ctl failed and it closed the rest.
# A client killed while it holds them resets them all: the hub takes each
# pair back from its keeper, closes it there, and nothing stays held.

load lib

setup() {
	rs_require many-connections
	command -v prlimit >/dev/null || skip "needs prlimit"
	rs_setup
	rs_two_nodes nohubs
}

teardown() {
	rs_teardown
}

# run NAME PORT [--rshare]: the client's line in $out
run_pair() {
	local name=$1 port=$2 pre=${3:-}
	rs_bg "$name" "$NS_A" $pre "$RS_BIN/many-connections" server -w 2 "$port"
	rs_wait_listen "$NS_A" "$port" $pre
	out=$(RS_TIMEOUT=120 rs_exec "$NS_B" $pre "$RS_BIN/many-connections" client -n 2000 $ADDR_A "$port" \
		2>"$RS_TMP/$name-client.err") || true
}

# held NS: the hub of NS holds no readiness descriptor, nor do its keepers
none_left() {
	rs_stat "$1" | jq -e '.counters.readiness_held == 0 and .counters.readiness_kept == 0' >/dev/null
}

@test "a hub limited to 256 descriptors serves 2,000 polled connections, as kernel TCP does" {
	rs_hub_start "$NS_A" prlimit --nofile=256:256
	rs_hub_start "$NS_B"
	run_pair k 7761
	local tcp=$out
	[[ $tcp == "open=2000 echoed=2000 errors=0 first=none" ]] || rs_fail "kernel TCP: '$tcp'"
	run_pair r 7762 --rshare
	[[ $out == "$tcp" ]] || rs_fail "rshare: '$out', kernel TCP: '$tcp' ($(tail -n 3 "$RS_TMP/r-client.err"))"
	rs_stat "$NS_A" >"$RS_TMP/statA.json"
	rs_jq_check "the connections took the link, their readiness went to keepers" \
		--slurpfile a "$RS_TMP/statA.json" '
		$a[0] as $A |
		fail(($A.links[0].connections_total // 0) >= 2000; "link carried \($A.links[0].connections_total // 0)"),
		fail($A.counters.fallback_connects == 0; "fallback_connects \($A.counters.fallback_connects)"),
		fail($A.counters.keepers >= 1; "keepers \($A.counters.keepers)"),
		fail($A.counters.readiness_held <= 192; "readiness_held \($A.counters.readiness_held), budget 192")'
	pkill -f "many-connections server -w 2 7762" || true
	rs_retry 20 none_left "$NS_A" ||
		rs_fail "readiness descriptors left after the server went: $(rs_stat "$NS_A" | jq -c .counters)"
}

# ended NS: the hub of NS has no connection left, and no readiness descriptor
ended() {
	rs_stat "$1" | jq -e '([.sockets[] | select(.state != "listening")] | length) == 0 and
		.counters.readiness_held == 0 and .counters.readiness_kept == 0' >/dev/null
}

@test "a client killed holding 2,000 polled connections: the server's hub and its keepers let go of every one" {
	rs_hub_start "$NS_A" prlimit --nofile=256:256
	rs_hub_start "$NS_B"
	rs_bg server "$NS_A" --rshare "$RS_BIN/many-connections" server -w 2 7763
	rs_wait_listen "$NS_A" 7763 --rshare
	rs_bg client "$NS_B" --rshare "$RS_BIN/many-connections" client -H -n 2000 $ADDR_A 7763
	rs_wait_file "$RS_TMP/client.out" '^open=2000 echoed=2000 errors=0 first=none$' 1 120
	# while held: most of them with the keepers, at most the budget in the hub
	rs_stat "$NS_A" | jq -e '.counters.readiness_kept >= 1000 and .counters.readiness_held <= 192' >/dev/null ||
		rs_fail "the keepers hold too little: $(rs_stat "$NS_A" | jq -c .counters)"
	pkill -KILL -f "many-connections client -H -n 2000" || rs_fail "no client to kill"
	rs_retry 30 ended "$NS_A" ||
		rs_fail "connections or readiness descriptors left: $(rs_stat "$NS_A" | jq -c .counters)"
	kill -0 "$(cat "$RS_TMP/server.pid")" || rs_fail "the server died"
}
