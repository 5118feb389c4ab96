#!/usr/bin/env bats
# An event loop accepts with accept4(SOCK_NONBLOCK), or from a nonblocking
# listener, and polls the connection next; the hub sends such a connection's readiness descriptor
# with the accept, and the library makes it the program's descriptor
# from the start (preload/socket.c), with no kernel socket made and
# closed and no request more.  The program must not see the difference:
# tests/accept-flags-read-back.c accepts a connection each way (accept;
# accept4 with SOCK_NONBLOCK, with SOCK_NONBLOCK | SOCK_CLOEXEC, with
# SOCK_CLOEXEC; accept from a nonblocking listener, as asyncio does) and
# reads back its descriptor number, flags, type,
# inherited options, names, and readiness in an epoll set as data comes
# and goes and the peer closes; its transcript under rshare must be the
# one on kernel TCP, and stat proves that the connections were rshare's
# and that the nonblocking ones got their readiness descriptor with the
# accept's answer (readiness_with_answer), the others by asking.
# Both runs are in a namespace of the test's own, so that the hub
# `rshare run` starts there ends with the test.

load lib

setup() {
	rs_require accept-flags-read-back
	rs_setup
	rs_netns "$NS_A"
}

teardown() {
	rs_teardown
}

@test "a connection accepted nonblocking, as event loops accept, reads back as on kernel TCP" {
	local plain pre n
	plain=$(ip netns exec "$NS_A" timeout 30 "$RS_BIN/accept-flags-read-back" 7421)
	pre=$(ip netns exec "$NS_A" timeout 30 "$RSHARE" run -- "$RS_BIN/accept-flags-read-back" 7422)
	echo "# $(grep -c . <<<"$plain") lines, e.g. '$(grep -m 1 'NONBLOCK: epoll, 5 bytes' <<<"$plain")'" >&3
	[[ $plain == *$'\nend' ]] || rs_fail "kernel TCP: '$plain'"
	[[ $pre == "$plain" ]] || rs_fail "under rshare: $(diff <(echo "$plain") <(echo "$pre"))"
	# the three nonblocking accepts got their readiness descriptor with
	# the answer; the two blocking ones asked when first polled
	n=$(rs_stat "$NS_A" | jq -r '.counters | "\(.local_connects) \(.readiness_with_answer) \(.readiness_asked)"')
	[[ $n == "5 3 2" ]] ||
		rs_fail "the hub counted (same-node connections, readiness descriptors with the answer, asked for) $n, want 5 3 2"
}
