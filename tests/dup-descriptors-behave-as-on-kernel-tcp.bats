#!/usr/bin/env bats
# Many descriptors of one socket (tests/dup-many-descriptors.c: 600 made by
# dup and, from a second thread at the same time, fcntl F_DUPFD; all but
# one closed) keep the socket alive as long as one is open, and two of
# them go into one epoll set, as on kernel TCP.  The process's count of
# its descriptors of a socket was one unsigned byte that stopped at 255,
# so the 255th close released a socket other descriptors still held; and
# a second descriptor of a socket in one epoll set got EEXIST, where the
# kernel keeps both.  Run on kernel TCP and over rshare across two nodes;
# the stat proves the rshare run took the link.

load lib

setup() {
	rs_require dup-many-descriptors echo-server
	rs_setup
	rs_two_nodes
}

teardown() {
	rs_teardown
}

@test "dup: 600 descriptors of one socket and two in one epoll set, as on kernel TCP" {
	local tcp rs
	rs_bg k-echo "$NS_A" "$RS_BIN/echo-server" -w 1 7651
	rs_wait_ready k-echo
	tcp=$(rs_exec "$NS_B" "$RS_BIN/dup-many-descriptors" -n 600 $ADDR_A 7651) || true
	[[ $tcp == "echo=ok epoll-second=0" ]] || rs_fail "kernel TCP: '$tcp'"
	rs_bg r-echo "$NS_A" --rshare "$RS_BIN/echo-server" -w 1 7652
	rs_wait_ready r-echo
	rs=$(rs_exec "$NS_B" --rshare "$RS_BIN/dup-many-descriptors" -n 600 $ADDR_A 7652) || true
	[[ $rs == "$tcp" ]] || rs_fail "rshare: '$rs', kernel TCP: '$tcp'"
	rs_stat "$NS_B" >"$RS_TMP/statB.json"
	rs_jq_check "the rshare run took the link" --slurpfile b "$RS_TMP/statB.json" '
		$b[0] as $B |
		fail(($B.links[0].connections_total // 0) >= 1; "B link carried \($B.links[0].connections_total) connections"),
		fail(($B.links[0].bytes_tx // 0) >= 8; "B link sent \($B.links[0].bytes_tx) bytes")'
}
