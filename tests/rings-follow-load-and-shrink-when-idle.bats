#!/usr/bin/env bats
# A connection's rings follow its load, as the kernel's socket buffers do
# (tests/ring-resize.c: one connection, a reader that stalls for 2 s and
# then reads 256 MiB as fast as it can, then 6 s of idle (the rings are looked at after 3), then 1 MiB more):
#   - the writer, blocked by the stalled reader, gets a larger send ring;
#   - the receive ring grows where its credit held the fast reader back
#     (the sending hub learns of it, RING and RING_ACK of
#     rshare-protocol(7), and its credit follows), and keeps the growth
#     only when it paid;
#   - both go back to their first size (128 KiB) once the connection
#     idles, and carry the last 1 MiB after that;
#   - every byte verified.
# On the same node the direction's one ring grows under the blocked
# writer and goes back the same way; with a reader that never stalls it
# grows too, to take each write whole as loopback's send buffer does
# (DELAY=0: the server reads at once), unless the reader set SO_RCVBUF.  SO_RCVBUF and SO_SNDBUF fix the rings, and getsockopt then reports what
# the same program reports on kernel TCP.  The hubs' stat shows the sizes
# and the ring moves; the link carried the bytes.
# waits: rings that go back after 1 s idle, looked at for seconds (tests/run runs it beside the others)

load lib

setup() {
	rs_require ring-resize
	rs_setup
	rs_two_nodes
}

teardown() {
	rs_teardown
}

# sock KEY NS: KEY of the established socket of NS (on the same node:
# the larger of the two)
sock() {
	rs_stat "$2" | jq -r --arg k "$1" '[.sockets[] | select(.state == "established") | .[$k]] | max // 0'
}

counter() {
	rs_stat "$2" | jq -r --arg k "$1" '.counters[$k]'
}

# serve NAME PORT [--rshare] [RCVBUF [SNDBUF]]: the server on A (its
# reader stalls for $DELAY seconds, 2 unless set), the
# client on B; $srv and $cli their lines, and for rshare the rings'
# sizes while the connection idles in $idle_rx and $idle_tx
serve() {
	local name=$1 port=$2 pre= rcvbuf sndbuf
	shift 2
	[[ ${1:-} == --rshare ]] && { pre=--rshare; shift; }
	rcvbuf=${1:-} sndbuf=${2:-}
	rs_bg "$name-srv" "$NS_A" $pre "$RS_BIN/ring-resize" server "$port" "${DELAY:-2}" $rcvbuf
	rs_wait_file "$RS_TMP/$name-srv.out" listening 1 10
	rs_bg "$name-cli" "${CLIENT_NS:-$NS_B}" $pre "$RS_BIN/ring-resize" client $ADDR_A "$port" 256 6 ${sndbuf:+$sndbuf}
	rs_wait_file "$RS_TMP/$name-cli.out" "client sent" 1 90
	if [[ -n $pre ]]; then
		sleep 3
		idle_rx=$(sock rx_ring "$NS_A")
		idle_tx=$(sock tx_ring "${CLIENT_NS:-$NS_B}")
	fi
	rs_wait_pid "$(cat "$RS_TMP/$name-srv.pid")" 60 || rs_fail "server: $(cat "$RS_TMP/$name-srv.err")"
	srv=$(cat "$RS_TMP/$name-srv.out" | tail -1)
	cli=$(cat "$RS_TMP/$name-cli.out" | tail -1)
}

@test "rings: send and receive rings grow under load and go back when idle, every byte verified" {
	serve k 7701
	local ksrv=$srv
	[[ $srv == *"bytes=269484032 verified=1"* ]] || rs_fail "kernel TCP: $srv"
	serve r 7702 --rshare
	local rx_g=$(counter rx_rings_grown "$NS_A") rx_s=$(counter rx_rings_shrunk "$NS_A")
	local tx_g=$(counter tx_rings_grown "$NS_B") tx_s=$(counter tx_rings_shrunk "$NS_B")
	echo "# receive rings grown $rx_g shrunk $rx_s, send rings grown $tx_g shrunk $tx_s; idle: rx $idle_rx tx $idle_tx" >&3
	# what was delivered, as on kernel TCP (whose buffer sizes are its own)
	[[ ${srv%% rcvbuf*} == "${ksrv%% rcvbuf*}" ]] || rs_fail "rshare: $srv, kernel TCP: $ksrv $(cat "$RS_TMP/r-srv.err")"
	((tx_g >= 1)) || rs_fail "the blocked writer's send ring did not grow"
	((rx_g >= 1)) || rs_fail "the receive ring never grew"
	((idle_rx == 131072)) || rs_fail "the idle receive ring is $idle_rx"
	((idle_tx == 131072)) || rs_fail "the idle send ring is $idle_tx"
	((tx_s >= 1 && rx_s >= 1)) || rs_fail "no ring went back"
	rs_stat "$NS_B" | jq -e '.links[0].bytes_tx >= 269484032' >/dev/null || rs_fail "the link did not carry the bytes"
}

@test "rings: SO_RCVBUF and SO_SNDBUF fix them, and getsockopt reports what kernel TCP reports" {
	serve k 7703 16384 16384
	local ksrv=$srv kcli=$cli krx ktx
	krx=${ksrv##*rcvbuf_after=} ktx=${kcli##*sndbuf_after=}
	serve r 7704 --rshare 16384 16384
	echo "# kernel TCP: $ksrv / $kcli; rshare: $srv / $cli; idle rings rx $idle_rx tx $idle_tx" >&3
	[[ $srv == "$ksrv" ]] || rs_fail "server: rshare '$srv', kernel TCP '$ksrv'"
	[[ $cli == "$kcli" ]] || rs_fail "client: rshare '$cli', kernel TCP '$kcli'"
	# the kernel doubles what was asked for its own overhead; a ring is that size
	((idle_rx == krx && idle_tx == ktx)) || rs_fail "rings rx $idle_rx tx $idle_tx, want $krx and $ktx"
	(($(counter rx_rings_grown "$NS_A") == 0)) || rs_fail "a fixed receive ring grew"
	(($(counter tx_rings_grown "$NS_B") == 0)) || rs_fail "a fixed send ring grew"
}

@test "rings: on the same node the direction's ring grows under the blocked writer and goes back when idle" {
	CLIENT_NS=$NS_A serve k 7705
	local ksrv=$srv
	CLIENT_NS=$NS_A serve r 7706 --rshare
	local g=$(counter tx_rings_grown "$NS_A") sh=$(counter tx_rings_shrunk "$NS_A") lc=$(counter local_connects "$NS_A")
	echo "# same node: rings grown $g shrunk $sh; idle: $idle_tx; $srv" >&3
	[[ ${srv%% rcvbuf*} == "${ksrv%% rcvbuf*}" ]] || rs_fail "rshare: $srv, kernel TCP: $ksrv"
	((lc >= 1)) || rs_fail "the connection did not take the same-node path"
	((g >= 1)) || rs_fail "the ring did not grow"
	((sh >= 1 && idle_tx == 131072)) || rs_fail "the idle ring is $idle_tx (shrunk $sh)"
}

@test "rings: on the same node a fast reader's direction grows to take each write whole and goes back when idle" {
	DELAY=0 CLIENT_NS=$NS_A serve kf 7707
	local ksrv=$srv
	DELAY=0 CLIENT_NS=$NS_A serve rf 7708 --rshare
	local f=$(counter tx_rings_grown_to_fit "$NS_A") sh=$(counter tx_rings_shrunk "$NS_A")
	local lc=$(counter local_connects "$NS_A")
	echo "# same node, a fast reader: rings grown to fit a write $f, shrunk $sh; idle: $idle_tx; $srv" >&3
	[[ ${srv%% rcvbuf*} == "${ksrv%% rcvbuf*}" ]] || rs_fail "rshare: $srv, kernel TCP: $ksrv"
	((lc >= 1)) || rs_fail "the connection did not take the same-node path"
	((f >= 1)) || rs_fail "the ring did not grow to take a write"
	((sh >= 1 && idle_tx == 131072)) || rs_fail "the idle ring is $idle_tx (shrunk $sh)"
	# a reader that set SO_RCVBUF keeps its ring as it is, as the kernel
	# stops autotuning a buffer the program sized
	DELAY=0 CLIENT_NS=$NS_A serve rg 7709 --rshare 65536
	local f2=$(counter tx_rings_grown_to_fit "$NS_A")
	[[ $srv == *verified=1* ]] || rs_fail "with SO_RCVBUF: $srv"
	((f2 == f)) || rs_fail "a ring whose reader set SO_RCVBUF grew to take a write ($f, then $f2)"
}
