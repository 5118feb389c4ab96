#!/usr/bin/env bats
# A server that keeps a pool of threads blocked in accept on one listener
# (tests/accept-pool.c: 6 threads, clients forked from it on 127.0.0.1,
# so the same-node path) is served under rshare as on kernel TCP: every
# one of 720 connections, one at a time and 8 at once, finds a thread; a
# handler without SA_RESTART ends the accept of the thread it ran on and
# no other's, one with it ends none; pthread_cancel ends the accept of
# the threads it cancels, and the one left serves on; and SO_RCVTIMEO
# ends 4 accepts at once with EAGAIN.  Under rshare one thread of the
# process polls the listener and the others sleep until it hands them the
# lead, as the kernel wakes one thread blocked in accept where every
# thread used to wake for every connection (core/proc/vsock_accept.c);
# the clients, forked while the pool's threads work, once in some hundred
# runs found the pair segments' lock held for ever (core/proc/vsock.c).
# The transcripts must be the same, and stat proves that the connections
# were rshare's.  Both runs are in a namespace of the test's own, so that
# the hub `rshare run` starts there ends with the test.

load lib

setup() {
	rs_require accept-pool
	rs_setup
	rs_netns "$NS_A"
}

teardown() {
	rs_teardown
}

@test "a pool of threads blocked in accept serves every connection and stops at signals, cancels and timeouts as on kernel TCP" {
	local plain pre n
	plain=$(ip netns exec "$NS_A" timeout 60 "$RS_BIN/accept-pool" 7451 2>&1)
	pre=$(ip netns exec "$NS_A" timeout 60 "$RSHARE" run -- "$RS_BIN/accept-pool" 7452 2>&1)
	echo "# $(tr '\n' ';' <<<"$plain")" >&3
	[[ $plain == *"served 100 by the last"*"timeouts EAGAIN 4 of 4" ]] || rs_fail "kernel TCP: '$plain'"
	[[ $pre == "$plain" ]] || rs_fail "under rshare: $(diff <(echo "$plain") <(echo "$pre"))"
	n=$(rs_stat "$NS_A" | jq .counters.local_connects)
	((n == 720)) || rs_fail "the hub counted $n same-node connections, want 720"
}
