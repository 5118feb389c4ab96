#!/usr/bin/env bats
# A fatal signal in the hub process: it logs the signal and a backtrace
# (libunwind) before it dies of that signal.  rshared's warden then starts
# a new hub on its records: a recv blocked on the node's connection goes on
# waiting, as it would on kernel TCP, and gets the bytes sent after.  A hub
# without a warden (--no-warden) takes its node's connections with it, and
# the processes see their blocked calls fail cleanly (ECONNRESET) instead
# of hanging.

load lib

setup() {
	rs_require echo-server hub-death-client
	rs_setup
	rs_two_nodes nohubs
}

teardown() {
	rs_teardown
}

# crash NS PID: SIGSEGV to PID, and its backtrace in NS's hub log
crash() {
	kill -SEGV "$2"
	rs_wait_file "$RS_TMP/hub-$1.err" 'fatal signal 11' 1 10
	grep -q 'error:   #[0-9]* .* hub_loop+' "$RS_TMP/hub-$1.err" ||
		rs_fail "no backtrace through hub_loop: $(tail -n 20 "$RS_TMP/hub-$1.err")"
}

@test "hub crash: signal and backtrace in its log, a new hub takes over, the blocked recv waits on and gets its bytes" {
	local pid
	rs_hub_start "$NS_A"
	rs_hub_start "$NS_B"
	[[ $(rs_stat "$NS_B" | jq '.pid != .hub_pid') == true ]] || skip "rshared runs without a warden in this build"
	rs_bg server "$NS_A" --rshare "$RS_BIN/echo-server" -w 1 7601
	rs_wait_ready server
	rs_bg client "$NS_B" --rshare python3 -u -c '
import socket, sys, threading, time
c = socket.create_connection((sys.argv[1], int(sys.argv[2])))
got = []
t = threading.Thread(target=lambda: got.append(c.recv(100)))
t.start()
print("blocked")
while not got:
    time.sleep(0.1)
    if open(sys.argv[3]).read().strip() == "go":
        c.sendall(b"after the crash\n")
        open(sys.argv[3], "w").write("sent")
t.join()
print("recv got %r" % got[0])' $ADDR_A 7601 "$RS_TMP/go"
	echo wait >"$RS_TMP/go"
	rs_wait_file "$RS_TMP/client.out" '^blocked$'
	pid=$(rs_stat "$NS_B" | jq .hub_pid)
	sleep 0.3
	crash "$NS_B" "$pid"
	rs_wait_file "$RS_TMP/hub-$NS_B.err" "pid $pid. died of signal 11" 1 10
	sleep 1
	[[ $(grep -c . "$RS_TMP/client.out") -eq 1 ]] || rs_fail "the blocked recv ended: $(cat "$RS_TMP/client.out")"
	echo go >"$RS_TMP/go"
	rs_wait_file "$RS_TMP/client.out" '^recv got' 1 20
	grep -qx "recv got b'after the crash\\\\n'" "$RS_TMP/client.out" || rs_fail "the client saw: $(cat "$RS_TMP/client.out")"
	rs_stat "$NS_B" | jq -e '.counters.successions == 1 and .counters.conns_resumed >= 1' >/dev/null ||
		rs_fail "B: $(rs_stat "$NS_B" | jq -c .counters)"
}

@test "hub crash without a warden: signal and backtrace in its log, blocked calls fail cleanly" {
	local pid
	rs_hub_start "$NS_A"
	RS_HUB_ARGS=--no-warden rs_hub_start "$NS_B"
	rs_bg server "$NS_A" --rshare "$RS_BIN/echo-server" -w 1 7602
	rs_wait_ready server
	rs_bg client "$NS_B" --rshare "$RS_BIN/hub-death-client" $ADDR_A 7602
	rs_wait_file "$RS_TMP/client.out" '^blocked$'
	pid=$(rs_stat "$NS_B" | jq -r .pid)
	[[ $pid == $(rs_stat "$NS_B" | jq -r .hub_pid) ]] || rs_fail "a warden with --no-warden"
	sleep 0.3
	crash "$NS_B" "$pid"
	rs_wait_file "$RS_TMP/client.out" '^recv=' 1 10
	grep -q '^recv=-1 errno=ECONNRESET ' "$RS_TMP/client.out" ||
		rs_fail "blocked recv ended as: $(grep '^recv=' "$RS_TMP/client.out")"
}
