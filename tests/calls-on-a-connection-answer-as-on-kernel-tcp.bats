#!/usr/bin/env bats
# The calls a program makes on a connection beside send and recv answer
# under rshare as on kernel TCP (tests/connection-calls-read-back.py, one
# process with its own listener on 127.0.0.1, so the same-node path): bind
# and listen on a connection, made, accepted or under way, fail with
# EINVAL, where the library used to pass them to the kernel socket behind
# the descriptor, which never connected and took them (preload/socket.c);
# SIOCOUTQ counts no byte that a same-node peer holds, as loopback's
# acknowledged bytes are not counted (core/proc/vsock_data.c); recvmsg
# and recvfrom give no source address (msg_namelen 0), where the library
# gave the peer's (preload/io.c); a connection shut down one way reads
# FIN_WAIT2 and CLOSE_WAIT in TCP_INFO, and shut down both ways is closed
# (TCP_CLOSE, getpeername ENOTCONN), where it read ESTABLISHED and kept
# its peer's name (preload/sockopt.c, so_tcp_state); a nonblocking send of 1 MiB that the
# peer does not read yet is taken whole, and a few MiB before EAGAIN, as
# loopback's send buffer takes them, where the ring took 128 KiB
# (core/proc/vsock_grow.c); and sendfile, TCP_CORK,
# shutdown(SHUT_RD), a peer's close, buffer sizes, peeks, polls, a
# dual-stack listener's names, option defaults, zero-length and vector
# calls, half-close, a reset and calls on a socket never connected read
# back the same; and the other end of a connection that one end closed,
# shut down or reset finds its end of stream (or the reset) at once, as
# on loopback, where a close that told the hub without waiting left it
# for a nonblocking recv of the same process to find later
# (tests/the-other-end-after-a-close.c).  The program's transcript under
# rshare must be the one on kernel TCP, and stat proves that its
# connections were rshare's.  Both runs are in a namespace of the test's
# own, so that the hub `rshare run` starts there ends with the test.

load lib

setup() {
	rs_require
	command -v python3 >/dev/null || skip "needs python3"
	rs_setup
	rs_netns "$NS_A"
}

teardown() {
	rs_teardown
}

@test "bind, listen, SIOCOUTQ, recvmsg, sendfile, TCP_CORK, SHUT_RD and more on a connection answer as on kernel TCP" {
	local prog=$BATS_TEST_DIRNAME/connection-calls-read-back.py plain pre n
	plain=$(ip netns exec "$NS_A" timeout 60 python3 "$prog" 7431 "$RS_TMP/file1" 2>&1)
	pre=$(ip netns exec "$NS_A" timeout 60 "$RSHARE" run -- python3 "$prog" 7441 "$RS_TMP/file2" 2>&1)
	echo "# $(grep -c . <<<"$plain") lines, e.g. '$(grep -m 1 '^listen:' <<<"$plain")'" >&3
	[[ $plain == *$'\nend' ]] || rs_fail "kernel TCP: '$plain'"
	[[ $pre == "$plain" ]] || rs_fail "under rshare: $(diff <(echo "$plain") <(echo "$pre"))"
	n=$(rs_stat "$NS_A" | jq .counters.local_connects)
	((n == 15)) || rs_fail "the hub counted $n same-node connections, want 15"
}

@test "the other end, looked at the moment one end closed, shut down or reset, answers as on kernel TCP" {
	local prog=$RS_BIN/the-other-end-after-a-close plain pre n
	plain=$(ip netns exec "$NS_A" timeout 60 "$prog" 2>&1)
	pre=$(ip netns exec "$NS_A" timeout 60 "$RSHARE" run -- "$prog" 2>&1)
	echo "# $(head -1 <<<"$plain")" >&3
	[[ $(grep -c . <<<"$plain") == 6 ]] || rs_fail "kernel TCP: '$plain'"
	[[ $pre == "$plain" ]] || rs_fail "under rshare: $(diff <(echo "$plain") <(echo "$pre"))"
	n=$(rs_stat "$NS_A" | jq .counters.local_connects)
	((n == 3000)) || rs_fail "the hub counted $n same-node connections, want 3000"
}
