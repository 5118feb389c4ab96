#!/usr/bin/env bats
# A thread that waits for what only its node's hub can bring (a recv on a
# soft link, where the hub places every byte) polls before it sleeps only
# where the hub and the program's peer have a processor each beside it (3
# processors in the process's affinity) or spin_us says so: with fewer, its
# polling takes the processor the hub needs to answer it.  (The same-node
# path, which no hub is on, polls as before: same-node-connections-share-
# memory-only.)  Counted from the client's system calls, with the client
# pinned to one processor so that any machine is a small one: a polling
# wait yields the processor every 64 looks and, where the hub answers
# within the poll, never sleeps (few futex calls); a wait that does not
# poll makes no yields and sleeps once a round trip.

load lib

setup() {
	rs_require echo-server echo-rounds
	command -v strace >/dev/null || skip "needs strace"
	command -v taskset >/dev/null || skip "needs taskset"
	rs_setup
	RS_HUB_ARGS="--transport soft" rs_two_nodes
}

teardown() {
	rs_teardown
}

ROUNDS=1000

# calls NS ADDR ENV...: "YIELDS FUTEXES", the sched_yield and futex calls
# of one client making ROUNDS round trips to ADDR from NS, pinned to
# processor 0, with ENV
calls() {
	local ns=$1 addr=$2
	shift 2
	run rs_exec "$ns" --rshare env "$@" taskset -c 0 strace -f -qq -c -o "$RS_TMP/strace.txt" \
		-e trace=sched_yield,futex "$RS_BIN/echo-rounds" -q -c 1 -m 64 -r $ROUNDS "$addr" 7231
	[[ $status -eq 0 ]] || rs_fail "echo-rounds exit $status: $output"
	cat "$RS_TMP/strace.txt" >&2
	awk '$NF == "sched_yield" { y = $4 } $NF == "futex" { f = $4 } END { print y + 0, f + 0 }' "$RS_TMP/strace.txt"
}

@test "on one processor, a recv over a soft link sleeps without polling; with spin_us set, it polls" {
	local dflt set links y f
	rs_bg server "$NS_A" --rshare "$RS_BIN/echo-server" -w 1 7231
	rs_wait_ready server

	dflt=$(calls "$NS_B" "$ADDR_A" X=1)
	echo "over the soft link, default settings: yields and futex calls $dflt in $ROUNDS round trips"
	links=$(rs_stat "$NS_B" | jq -c '[.links[] | .transport]')
	echo "links of node B: $links"
	[[ $links == *soft* ]] || rs_fail "no soft link: $links"

	set=$(calls "$NS_B" "$ADDR_A" RSHARE_SPIN_US=50)
	echo "over the soft link, spin_us 50 set: yields and futex calls $set"

	# the connect's wait for its request cell may poll a little: not a round trip's
	read -r y f <<<"$dflt"
	((y < ROUNDS / 4)) || rs_fail "a recv over a soft link polled on one processor: $y yields"
	# polled: it yielded while it looked, or the hub's answer came within
	# the poll and it did not sleep
	read -r y f <<<"$set"
	((y >= ROUNDS / 2 || f < ROUNDS / 2)) ||
		rs_fail "spin_us 50, set, did not make the recv poll: $y yields, $f futex calls"
}
