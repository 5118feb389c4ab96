#!/usr/bin/env bats
# SIGKILL of a node's hub: a process of that node blocked in recv() on an
# rshare connection returns within 2 s with ECONNRESET (its pool's watch
# sees the hub's end and wakes every waiter); its next connection works
# (over kernel TCP: the pool of a dead hub is not reused); the other node
# drops the link and resets the connections it carried.

load lib

setup() {
	rs_require echo-server hub-death-client
	rs_setup
	rs_two_nodes
}

teardown() {
	rs_teardown
}

@test "hub killed: a blocked recv returns ECONNRESET within 2 s, new connections still work" {
	local hubpid secs
	rs_bg server "$NS_A" --rshare "$RS_BIN/echo-server" -w 2 7501
	rs_wait_ready server
	rs_bg client "$NS_B" --rshare "$RS_BIN/hub-death-client" $ADDR_A 7501
	rs_wait_file "$RS_TMP/client.out" '^blocked$'
	rs_stat "$NS_B" >"$RS_TMP/b.json"
	rs_jq_check "the connection is on rshare" --slurpfile b "$RS_TMP/b.json" '
		fail([$b[0].sockets[] | select(.state == "established" and .link != 0)] | length == 1;
			"not one rshare connection on B")'
	hubpid=$(jq -r .pid "$RS_TMP/b.json")
	sleep 0.5
	kill -KILL "$hubpid"
	rs_wait_file "$RS_TMP/client.out" '^recv=' 1 10
	grep -q '^recv=-1 errno=ECONNRESET ' "$RS_TMP/client.out" ||
		rs_fail "blocked recv ended as: $(grep '^recv=' "$RS_TMP/client.out")"
	secs=$(sed -n 's/^recv=.* secs=\([0-9.]*\)$/\1/p' "$RS_TMP/client.out")
	awk -v s="$secs" 'BEGIN { exit !(s < 2.0) }' || rs_fail "recv returned after $secs s"
	rs_wait_file "$RS_TMP/client.out" '^again ok$' 1 20 ||
		rs_fail "no second connection: $(cat "$RS_TMP/client.err")"
	# the other node dropped the link and let go of its connection
	for i in $(seq 50); do
		rs_stat "$NS_A" >"$RS_TMP/a.json"
		jq -e '([.links[] | select(.state == "up")] | length == 0) and
			([.sockets[] | select(.state != "listening")] | length == 0)' "$RS_TMP/a.json" >/dev/null && break
		sleep 0.2
	done
	rs_jq_check "node A dropped the link and its connection" --slurpfile a "$RS_TMP/a.json" '
		fail([$a[0].links[] | select(.state == "up")] | length == 0; "a link is still up on A"),
		fail([$a[0].sockets[] | select(.state != "listening")] | length == 0; "A still has \($a[0].sockets)")'
}
