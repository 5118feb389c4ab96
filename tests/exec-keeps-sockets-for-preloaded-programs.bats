#!/usr/bin/env bats
# exec: an accepted rshare connection without close-on-exec survives exec
# into a preloaded program (an inetd that execs cat: every byte echoed and
# verified, carried on the link, held by the same pid after the exec); the
# close-on-exec listener is released at the exec.  An exec whose
# environment leaves LD_PRELOAD out (nginx's keeps only TZ) gets the
# library back, for the sockets that go along: cat echoes again.  Into a
# program that is not preloaded (LD_PRELOAD set empty), the socket fails
# loudly (ENOTCONN), never silently.

load lib

setup() {
	rs_require exec-inetd echo-client
	command -v cat >/dev/null || skip "needs cat"
	rs_setup
	rs_two_nodes
}

teardown() {
	rs_teardown
}

@test "exec into a preloaded program keeps the socket: cat echoes every byte over rshare" {
	local port=7401 pid
	rs_bg srv "$NS_A" --rshare "$RS_BIN/exec-inetd" $port cat
	rs_wait_ready srv
	rs_exec "$NS_B" --rshare "$RS_BIN/echo-client" -c 1 -n 8 -m 200000 $ADDR_A $port \
		>"$RS_TMP/cli.out" 2>"$RS_TMP/cli.err" || rs_fail "client: $(cat "$RS_TMP/cli.out" "$RS_TMP/cli.err" "$RS_TMP/srv.err")"
	grep -q 'verified=1 resets=0 errors=0' "$RS_TMP/cli.out"
	rs_stat "$NS_A" >"$RS_TMP/a.json"
	rs_jq_check "carried by rshare, the listener gone at exec" --slurpfile a "$RS_TMP/a.json" '
		$a[0] as $A |
		fail(($A.links | length) == 1; "links: \($A.links | length), want 1"),
		fail(($A.links[0].bytes_rx // 0) > 0 and ($A.links[0].bytes_tx // 0) > 0; "no bytes on the link"),
		fail([$A.sockets[] | select(.state == "listening")] | length == 0; "the close-on-exec listener survived the exec")'
}

@test "exec with LD_PRELOAD left out of the environment keeps the library and the socket" {
	local port=7403
	rs_bg srv "$NS_A" --rshare "$RS_BIN/exec-inetd" -u $port cat
	rs_wait_ready srv
	rs_exec "$NS_B" --rshare "$RS_BIN/echo-client" -c 1 -n 8 -m 200000 $ADDR_A $port \
		>"$RS_TMP/cli.out" 2>"$RS_TMP/cli.err" || rs_fail "client: $(cat "$RS_TMP/cli.out" "$RS_TMP/cli.err" "$RS_TMP/srv.err")"
	grep -q 'verified=1 resets=0 errors=0' "$RS_TMP/cli.out"
}

@test "exec into a program that is not preloaded fails loudly, nothing is echoed" {
	local port=7402
	rs_bg srv "$NS_A" --rshare "$RS_BIN/exec-inetd" -n $port cat
	rs_wait_ready srv
	run rs_exec "$NS_B" --rshare "$RS_BIN/echo-client" -c 1 -n 8 -m 200000 -r $ADDR_A $port
	echo "$output"
	[[ $output != *"verified=1"* ]] || rs_fail "bytes were echoed through a socket rshare could not carry"
	rs_wait_file "$RS_TMP/srv.err" 'Transport endpoint is not connected' 1 20
}
