#!/usr/bin/env bats
# A hub polls for spin_us after its last piece of work, and, while the
# work comes back within 1 ms of the work before, for twice that gap: a
# flow of messages slower than spin_us (round trips through a slow machine
# or NIC) finds it awake instead of asleep behind a kick.  A flow with
# gaps longer than that lets it sleep between messages.  Counted from the
# hubs' `sleeps` (times the loop went to sleep, `rshare stat`).

load lib

setup() {
	rs_require echo-server echo-rounds
	rs_setup
	RS_HUB_ARGS="--transport soft" rs_two_nodes
}

teardown() {
	rs_teardown
}

sleeps() { # NS: the hub's count of sleeps
	rs_stat "$1" | jq -e '.counters.sleeps'
}

# rounds R PAUSE_US: R round trips of up to 64 B from node B to node A,
# PAUSE_US apart; prints how often the two hubs slept meanwhile
rounds() {
	local a0 b0 a1 b1
	a0=$(sleeps "$NS_A") && b0=$(sleeps "$NS_B") || rs_fail "no sleeps counter"
	rs_exec "$NS_B" --rshare "$RS_BIN/echo-rounds" -q -c 1 -m 64 -r "$1" -p "$2" "$ADDR_A" 7241 \
		>"$RS_TMP/rounds.out" 2>&1 || rs_fail "echo-rounds: $(cat "$RS_TMP/rounds.out")"
	a1=$(sleeps "$NS_A") && b1=$(sleeps "$NS_B") || rs_fail "no sleeps counter"
	echo "$((a1 - a0)) $((b1 - b0))"
}

@test "round trips 0.3 ms apart keep both hubs awake; 3 ms apart, the hubs sleep between them" {
	local flow slow links fa fb sa sb
	rs_bg server "$NS_A" --rshare "$RS_BIN/echo-server" -w 1 7241
	rs_wait_ready server
	rounds 5 0 >/dev/null # the link up, the pools made
	links=$(rs_stat "$NS_B" | jq -c '[.links[] | .transport]')
	[[ $links == *soft* ]] || rs_fail "no soft link: $links"

	flow=$(rounds 300 300)
	echo "300 round trips 0.3 ms apart: sleeps of hub A, hub B: $flow"
	slow=$(rounds 100 3000)
	echo "100 round trips 3 ms apart: sleeps of hub A, hub B: $slow"

	[[ $flow =~ ^[0-9]+\ [0-9]+$ && $slow =~ ^[0-9]+\ [0-9]+$ ]] || rs_fail "no counts: '$flow' '$slow'"
	read -r fa fb <<<"$flow"
	read -r sa sb <<<"$slow"
	# a wake-up every 500 ms and the last poll's end are sleeps too, and on
	# a loaded machine a pause of the client's can outlast the window (CI
	# once counted 99 and 57); a hub that does not keep awake for the flow
	# sleeps at least once a round trip (431 and 303 before it did)
	((fa < 150 && fb < 150)) || rs_fail "a flow 0.3 ms apart let the hubs sleep: $flow"
	((sa >= 100 && sb >= 100)) || rs_fail "a flow 3 ms apart kept a hub awake: $slow (want a sleep a round trip)"
}
