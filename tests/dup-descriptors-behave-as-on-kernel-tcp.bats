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
	rs_vs_kernel dup "$NS_B" 7651 "$RS_BIN/echo-server" -w 1 PORT -- \
		"$RS_BIN/dup-many-descriptors" -n 600 $ADDR_A PORT
	[[ $RS_TCP == "echo=ok epoll-second=0" ]] || rs_fail "kernel TCP: '$RS_TCP'"
	rs_stat "$NS_B" >"$RS_TMP/statB.json"
	rs_jq_check "the rshare run took the link" --slurpfile b "$RS_TMP/statB.json" '
		$b[0] as $B |
		fail(($B.links[0].connections_total // 0) >= 1; "B link carried \($B.links[0].connections_total) connections"),
		fail(($B.links[0].bytes_tx // 0) >= 8; "B link sent \($B.links[0].bytes_tx) bytes")'
}
