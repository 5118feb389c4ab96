#!/usr/bin/env bats
# An event-loop echo server that closes a connection as soon as its
# client's end of stream comes, dropping what it had not sent yet
# (tests/close-at-eof-echo.py, as many naive servers do), echoes every
# byte of 16 clients of 2 MB each at once on kernel TCP over 127.0.0.1,
# whose loopback sends take a few MiB whole: so it does under rshare on
# the same node, where a direction's ring grows to take a write whole
# (core/proc/vsock_grow.c).  With the ring's 128 KiB, 14 of 16 echoes of
# the same server, written in Java, came back short.  Kernel TCP across
# two namespaces, whose buffers start smaller, cuts some echoes itself,
# so only the same node is compared.  The stat proves the connections were
# same-node ones of rshare's.

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

# run PORT [--rshare]: the server and the client in $NS_A; the client's line in $out
run_echo() {
	local port=$1 pre=${2:-} prog=$BATS_TEST_DIRNAME/close-at-eof-echo.py
	rs_bg "echo-$port" "$NS_A" $pre python3 "$prog" server "$port"
	rs_wait_file "$RS_TMP/echo-$port.out" ready 1 20
	out=$(rs_exec "$NS_A" $pre python3 "$prog" client 127.0.0.1 "$port" 16 2000000)
}

@test "an echo server that closes at its client's end of stream echoes every byte on one node, as on kernel TCP" {
	local plain n
	run_echo 7451
	plain=$out
	run_echo 7452 --rshare
	echo "# kernel TCP: $plain; rshare: $out" >&3
	[[ $plain == "whole 16 short none" ]] || rs_fail "kernel TCP: $plain"
	[[ $out == "$plain" ]] || rs_fail "rshare: $out, kernel TCP: $plain"
	n=$(rs_stat "$NS_A" | jq .counters.local_connects)
	((n == 16)) || rs_fail "the hub counted $n same-node connections, want 16"
}
