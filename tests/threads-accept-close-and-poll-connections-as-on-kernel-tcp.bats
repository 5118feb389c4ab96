#!/usr/bin/env bats
# A multi-threaded epoll server (tests/threaded-epoll-http-server.c): one
# thread accepts and deals connections to two serving threads, each with
# its own epoll set, which read a new connection at once, add it to their
# set only when nothing is there yet, answer and close it.  So one thread
# lets go of a socket while another accepts the next connection and a
# third polls it: under rshare the released socket's slot may come back at
# once as that connection.  ab on node B makes 6,000 requests, a
# connection each, 8 at a time, first on kernel TCP and then with both
# sides preloaded: the same counts (every request answered, none failed,
# none waiting for ab's 10 s timeout), the server answered 6,000 with none
# open, and the hubs' stat shows the connections on the link.

load lib
load apps

setup() {
	rs_require threaded-epoll-http-server
	app_require ab:apache2-utils
	rs_setup
	rs_two_nodes
}

teardown() {
	rs_teardown
}

# run_ab PORT [--rshare]: $out: ab's counts, then the server's
run_ab() {
	local port=$1 pre=${2:-} ab
	rs_bg "srv-$port" "$NS_A" $pre "$RS_BIN/threaded-epoll-http-server" -t 2 "$port"
	rs_wait_ready "srv-$port"
	RS_TIMEOUT=120 rs_exec "$NS_B" $pre ab -q -s 10 -n 6000 -c 8 "http://$ADDR_A:$port/" \
		>"$RS_TMP/ab-$port.out" 2>&1 || true
	ab=$(ab_counts "$RS_TMP/ab-$port.out")
	kill -TERM "$(cat "$RS_TMP/srv-$port.pid")"
	rs_wait_file "$RS_TMP/srv-$port.out" '^served=' 1 10
	# errors: connections that ended with no request, which ab opens
	# beyond its count (and closes at its end) on kernel TCP too
	out="$ab $(grep -o '^served=[0-9]* open=[0-9]*' "$RS_TMP/srv-$port.out")"
}

@test "threads that accept, poll and close connections at once serve every request over rshare as on kernel TCP" {
	local tcp
	run_ab 7821
	tcp=$out
	[[ $tcp == "complete=6000 failed=0 non2xx=0 served=6000 open=0" ]] || rs_fail "kernel TCP: $tcp"
	app_snap before
	run_ab 7822 --rshare
	app_snap after
	[[ $out == "$tcp" ]] || rs_fail "rshare: '$out', kernel TCP: '$tcp' ($(grep -i 'timeout\|error' "$RS_TMP/ab-7822.out" | head -n 3))"
	app_check_rshare "threaded epoll server over rshare" before after 6000 1 1
}
