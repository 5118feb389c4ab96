#!/usr/bin/env bats
# A SIGALRM handler that runs every 50 us while the client's send() or
# recv() copies its bytes (tests/handler-during-copy.c): one that sends
# (or receives) on the same socket itself, or one that leaves the send
# with siglongjmp.  Kernel TCP copies inside the system call, so the
# handler runs once the call returns: every byte arrives, and a jump loses
# at most the bytes of the send it left.  rshare copies in the program's
# thread holding the ring's lock: a handler that ran there waited for ever
# on its own thread's lock, or left it held for good.  Each case runs
# once on kernel TCP and once under rshare (client on node B, its peer on
# node A), and the two must end the same way: the client finished and the
# byte counts add up.  The hubs' stat shows the rshare runs took the link.
# The handler is installed with sigaction(2), and once each with sigset(3)
# (no SA_RESTART: a send or recv it lands in may end short) and
# bsd_signal(3), which glibc implements past the sigaction the library
# stands in for.

load lib

setup() {
	rs_require handler-during-copy
	rs_setup
	rs_two_nodes
}

teardown() {
	rs_teardown
}

# verdict MODE CLIENT PEER: how the run ended, in words that do not depend
# on how many bytes went
verdict() {
	local mode=$1 cli=$2 peer=$3 m h j n
	if [[ ! $cli =~ ^client\ main=([0-9]+)\ handler=([0-9]+)\ jumps=([0-9]+)$ ]]; then
		echo "client: '$cli'"
		return
	fi
	m=${BASH_REMATCH[1]} h=${BASH_REMATCH[2]} j=${BASH_REMATCH[3]}
	if [[ ! $peer =~ ^(server got|source sent)\ ([0-9]+)$ ]]; then
		echo "client finished, peer: '$peer'"
		return
	fi
	n=${BASH_REMATCH[2]}
	case $mode in
	send | recv) ((n == m + h)) && echo "client finished, all bytes arrived" ||
		echo "client finished, $n bytes for $m + $h" ;;
	jump) ((n >= m && n <= m + j * 262144)) && echo "client finished, bytes within the jumped sends" ||
		echo "client finished, $n bytes for $m and $j jumps" ;;
	esac
}

# run_pair NAME PORT MODE [--rshare]: the verdict in $out (the handler
# installed as $HOW says, sigaction by default)
run_pair() {
	local name=$1 port=$2 mode=$3 pre=${4:-} cli peer role=server
	[[ $mode == recv ]] && role="source"
	if [[ $role == source ]]; then
		rs_bg "$name" "$NS_A" $pre "$RS_BIN/handler-during-copy" source "$port" 1000
	else
		rs_bg "$name" "$NS_A" $pre "$RS_BIN/handler-during-copy" server "$port"
	fi
	rs_wait_ready "$name"
	cli=$(RS_TIMEOUT=30 rs_exec "$NS_B" $pre "$RS_BIN/handler-during-copy" client $ADDR_A "$port" "$mode" 1000 ${HOW:-sigaction} \
		2>"$RS_TMP/$name-client.err") || true
	rs_wait_pid "$(cat "$RS_TMP/$name.pid")" 20 || true
	peer=$(grep -v '^ready' "$RS_TMP/$name.out" | head -n 1)
	echo "$name: $cli / $peer"
	out=$(verdict "$mode" "$cli" "$peer")
}

# both_ways PORT MODE: the same ending on kernel TCP and under rshare
both_ways() {
	local tcp
	run_pair k-$1 "$1" "$2"
	tcp=$out
	[[ $tcp == "client finished, "@(all bytes arrived|bytes within the jumped sends) ]] ||
		rs_fail "kernel TCP: '$tcp'"
	run_pair r-$1 $(($1 + 1)) "$2" --rshare
	[[ $out == "$tcp" ]] || rs_fail "rshare: '$out', kernel TCP: '$tcp' $(cat "$RS_TMP/r-$1-client.err")"
	rs_stat "$NS_B" >"$RS_TMP/statB.json"
	rs_jq_check "the rshare run took the link" --slurpfile b "$RS_TMP/statB.json" '$b[0] as $B |
		fail(($B.links[0].bytes_tx // 0) + ($B.links[0].bytes_rx // 0) >= 1048576 and $B.counters.fallback_connects == 0;
		     "B link moved \($B.links[0].bytes_tx) + \($B.links[0].bytes_rx) bytes, \($B.counters.fallback_connects) connects fell back")'
}

@test "a handler that sends on the socket in the middle of a send: every byte arrives, as on kernel TCP" {
	both_ways 7231 send
}

@test "a handler that receives on the socket in the middle of a recv: every byte arrives, as on kernel TCP" {
	both_ways 7233 recv
}

@test "a handler that jumps out of a send in the middle of its copy leaves the socket working, as on kernel TCP" {
	both_ways 7235 jump
}

@test "a handler installed with sigset(3) that sends on the socket in the middle of a send: every byte arrives, as on kernel TCP" {
	HOW=sigset both_ways 7237 send
}

@test "a handler installed with bsd_signal(3) that receives on the socket in the middle of a recv: every byte arrives, as on kernel TCP" {
	HOW=bsd_signal both_ways 7239 recv
}
