#!/usr/bin/env bats
# A pool has 1024 request cells (rshare(7), "The control connection"):
# its processes beyond them ask the hub over their unix connection, and
# every connection works as on kernel TCP.  A client makes its pool with
# one connection, then forks 1100 children that each connect and hold the
# connection (and their cells) until all are made, then close and leave
# with _exit; the server accepts and closes every one.  Run on kernel TCP
# and under rshare on one node: the same output, every connection on the
# same-node path, and `rshare stat` shows that some requests went through
# cells and some did not.

load lib

setup() {
	rs_require
	rs_setup
	rs_netns "$NS_A"
	rs_hub_start "$NS_A"
}

teardown() {
	rs_teardown
}

KIDS=1100

server() { # PORT [--rshare]
	rs_bg "srv-$1" "$NS_A" ${2:-} python3 -u -c '
import socket, sys
port, n = int(sys.argv[1]), int(sys.argv[2])
l = socket.socket()
l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
l.bind(("127.0.0.1", port))
l.listen(4096)
print("ready")
for i in range(n):
    c, _ = l.accept()
    c.close()
print("accepted %d" % n)
' "$1" $((KIDS + 1))
	rs_wait_ready "srv-$1"
}

client() { # PORT [--rshare]
	rs_exec "$NS_A" ${2:-} python3 -u -c '
import os, socket, sys, time
port, n = int(sys.argv[1]), int(sys.argv[2])
socket.create_connection(("127.0.0.1", port)).close()
r, w = os.pipe()
ready_r, ready_w = os.pipe()
kids = []
for i in range(n):
    pid = os.fork()
    if pid == 0:
        os.close(w)
        c = socket.create_connection(("127.0.0.1", port))
        os.write(ready_w, b"x")
        os.read(r, 1)
        c.close()
        os._exit(0)
    kids.append(pid)
got = 0
while got < n:
    got += len(os.read(ready_r, n - got))
os.close(w)
bad = sum(os.waitpid(p, 0)[1] != 0 for p in kids)
print("children %d, connected %d, failed %d" % (n, got, bad))
' "$1" $KIDS
}

@test "a pool's processes beyond its 1024 request cells ask over their connection, every connection as on kernel TCP" {
	local tcp rs
	server 7821
	tcp=$(client 7821)
	server 7822 --rshare
	rs=$(client 7822 --rshare)
	rs_wait_file "$RS_TMP/srv-7822.out" '^accepted' 1 30 || true
	[[ $tcp == "children $KIDS, connected $KIDS, failed 0" ]] || rs_fail "kernel TCP: $tcp"
	[[ $rs == "$tcp" ]] || rs_fail "rshare: '$rs', kernel TCP: '$tcp'"
	rs_wait_file "$RS_TMP/srv-7821.out" '^accepted' 1 30
	diff "$RS_TMP/srv-7821.out" "$RS_TMP/srv-7822.out" >&2 || rs_fail "the servers differ"
	rs_stat "$NS_A" >"$RS_TMP/stat.json"
	# every connection asks 4 times (connect, accept, two releases): the
	# client's children beyond the cells ask 2 of them over their connection
	rs_jq_check "all on the same-node path, some requests through cells and some not" \
		--slurpfile a "$RS_TMP/stat.json" --argjson n $((KIDS + 1)) '
		$a[0].counters as $c |
		fail($c.local_connects == $n; "\($c.local_connects) same-node connections, want \($n)"),
		fail($c.fallback_connects == 0; "\($c.fallback_connects) fell back to kernel TCP"),
		fail($c.cell_requests >= 2 * $n + 2 * 1000; "\($c.cell_requests) requests through cells, want most"),
		fail($c.cell_requests < 4 * $n; "\($c.cell_requests) requests through cells: none over a connection")'
}
