#!/usr/bin/env bats
# `rshare hub restart` hands a node to a new hub without a reset, as a
# daemon's restart leaves kernel TCP's connections alone: the new hub runs
# in the same process (the pid stays), takes the records of the old one,
# and the connections go on, every byte verified: those on the node (their
# rings are in shared memory, no link) and those across nodes (their link
# is dropped and made again, and each side resumes from what the other
# placed, as after an outage).  The same clients on kernel TCP print the
# same summaries.  A newer rshared put in the hub's place (renamed over
# its program, as a package upgrade does) takes over the same way; one
# whose records differ is refused, and the hub goes on as it was.

load lib
load handover

setup() {
	rs_require echo-server echo-client
	rs_setup
	rs_two_nodes nohubs
}

teardown() {
	rs_teardown
}

# restart NS: `rshare hub restart` there, which must say that it did
restart() {
	local out
	out=$(ip netns exec "$1" "$RSHARE" hub restart 2>&1) || rs_fail "rshare hub restart in $1: $out"
	[[ $out == "hub restarted: "* ]] || rs_fail "rshare hub restart in $1 said: $out"
}

@test "streams on one node and across nodes go on through two restarts of both hubs, every byte verified, as on kernel TCP" {
	local pa pb
	rs_hub_start "$NS_A"
	rs_hub_start "$NS_B"
	pa=$(rs_stat "$NS_A" | jq .pid)
	pb=$(rs_stat "$NS_B" | jq .pid)
	# both at once: kernel TCP's streams see no restart
	streams_through "hub restarts" 7761 restart_both
	rs_jq_check "both hubs restarted twice in their own process, and the streams resumed" \
		--slurpfile a "$RS_TMP/statA.json" --slurpfile b "$RS_TMP/statB.json" --argjson pa "$pa" --argjson pb "$pb" '
		$a[0] as $A | $b[0] as $B |
		fail($A.pid == $pa and $B.pid == $pb; "pids \($A.pid) \($B.pid), were \($pa) \($pb)"),
		fail($A.counters.restarts == 2 and $B.counters.restarts == 2;
		     "restarts A \($A.counters.restarts) B \($B.counters.restarts)"),
		fail($A.counters.conns_resumed >= 4 and $B.counters.conns_resumed >= 4;
		     "conns_resumed A \($A.counters.conns_resumed) B \($B.counters.conns_resumed)"),
		fail($A.counters.local_connects >= 4; "local_connects A \($A.counters.local_connects)"),
		fail($A.counters.fallback_connects == 0 and $B.counters.fallback_connects == 0;
		     "fallback_connects A \($A.counters.fallback_connects) B \($B.counters.fallback_connects)")'
}

# restart_both: restart A's hub and B's
restart_both() {
	restart "$NS_A"
	restart "$NS_B"
}

@test "idle connections and a blocked recv go on through restarts of both hubs, as on kernel TCP" {
	local k r
	rs_hub_start "$NS_A"
	rs_hub_start "$NS_B"
	k=$(held kernel-held 7763)
	r=$(held rshare-held 7764 --rshare restart_both)
	echo "kernel TCP: $k"
	echo "rshare: $r"
	[[ $k == "$HELD_KERNEL" ]] ||
		rs_fail "kernel TCP: $k"
	[[ $r == "$k" ]] || rs_fail "rshare: $r ($(cat "$RS_TMP/rshare-held.err"))"
	rs_stat "$NS_B" | jq -e '.counters.restarts == 1 and .counters.conns_resumed >= 4' >/dev/null ||
		rs_fail "B: $(rs_stat "$NS_B" | jq -c .counters)"
}

@test "a newer rshared renamed over the hub's program takes over with every connection; one whose records differ is refused and the hub goes on" {
	local bin=$RS_TMP/sbin pid out ok="conns=4 verified=4 resets=0 errors=0"
	mkdir -p "$bin"
	cp "$RSHARED" "$bin/rshared"
	RSHARED=$bin/rshared rs_hub_start "$NS_A"
	rs_hub_start "$NS_B"
	pid=$(rs_stat "$NS_A" | jq .pid)
	rs_bg up-srv "$NS_A" --rshare "$RS_BIN/echo-server" -w 2 7765
	rs_wait_ready up-srv
	rs_bg up-a "$NS_A" --rshare "$RS_BIN/echo-client" -S -c 4 -s 23 -t 6 -m 262144 $ADDR_A 7765
	rs_bg up-b "$NS_B" --rshare "$RS_BIN/echo-client" -S -c 4 -s 24 -t 6 -m 262144 $ADDR_A 7765
	sleep 2
	# records laid out otherwise: refused, and said why
	printf '#!/bin/sh\necho 0000000000000001\n' >"$bin/rshared.new"
	chmod +x "$bin/rshared.new"
	mv "$bin/rshared.new" "$bin/rshared"
	out=$(ip netns exec "$NS_A" "$RSHARE" hub restart 2>&1) && rs_fail "a hub with other records took over: $out"
	echo "refused: $out"
	[[ $out == *"keeps its records otherwise"* ]] || rs_fail "the refusal says: $out"
	sleep 1
	# the same records: a new program takes over
	cp "$RSHARED" "$bin/rshared.new"
	mv "$bin/rshared.new" "$bin/rshared"
	restart "$NS_A"
	rs_wait_file "$RS_TMP/up-a.out" '^echo-client:' 1 60
	rs_wait_file "$RS_TMP/up-b.out" '^echo-client:' 1 60
	[[ $(summary up-a) == "$ok" && $(summary up-b) == "$ok" ]] ||
		rs_fail "after the upgrade: $(summary up-a); $(summary up-b)"
	rs_stat "$NS_A" | jq -e --argjson p "$pid" '.pid == $p and .counters.restarts == 1 and
		.counters.restarts_refused == 1 and .counters.restart_refused == ""' >/dev/null ||
		rs_fail "A: $(rs_stat "$NS_A" | jq -c '[.pid, .counters]')"
	grep -q "restart refused: the new rshared keeps its records otherwise" "$RS_TMP/hub-$NS_A.err" ||
		rs_fail "the hub did not log the refusal"
}
