#!/usr/bin/env bats
# A fatal signal in the hub: it logs the signal and a backtrace (libunwind)
# before it dies of that signal, and the processes of its node see their
# blocked calls fail cleanly (ECONNRESET) instead of hanging.

load lib

setup() {
	rs_require echo-server hub-death-client
	rs_setup
	rs_two_nodes
}

teardown() {
	rs_teardown
}

@test "hub crash: signal and backtrace in its log, blocked calls fail cleanly" {
	local hubpid
	rs_bg server "$NS_A" --rshare "$RS_BIN/echo-server" -w 1 7601
	rs_wait_ready server
	rs_bg client "$NS_B" --rshare "$RS_BIN/hub-death-client" $ADDR_A 7601
	rs_wait_file "$RS_TMP/client.out" '^blocked$'
	hubpid=$(rs_stat "$NS_B" | jq -r .pid)
	sleep 0.3
	kill -SEGV "$hubpid"
	rs_wait_file "$RS_TMP/client.out" '^recv=' 1 10
	grep -q '^recv=-1 errno=ECONNRESET ' "$RS_TMP/client.out" ||
		rs_fail "blocked recv ended as: $(grep '^recv=' "$RS_TMP/client.out")"
	rs_wait_file "$RS_TMP/hub-$NS_B.err" 'fatal signal 11' 1 10
	grep -q 'error:   #[0-9]* .* hub_main+' "$RS_TMP/hub-$NS_B.err" ||
		rs_fail "no backtrace through hub_main: $(tail -n 20 "$RS_TMP/hub-$NS_B.err")"
}
