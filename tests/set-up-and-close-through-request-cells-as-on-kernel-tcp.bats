#!/usr/bin/env bats
# Connections set up and closed through the processes' request cells in
# the arena (rshare(7), "The control connection") do what they do on
# kernel TCP: a server that forks a child for every other connection (the
# child asks for a cell of its own, closes and leaves with _exit at once)
# and a client whose connections end three ways (a reply read to end of
# file; the same in a forked child that leaves with _exit right after its
# close; a close without a reply, then _exit at once).  A release that
# asks no answer is left in the cell, and the process's end comes on its
# unix connection: the hub takes the cell first, or the peer would miss
# the end of file.  Both programs' output, run on kernel TCP and under
# rshare on one node, must be the same; `rshare stat` proves the requests
# went through the cells.

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

N=60

server() { # PORT [--rshare]
	rs_bg "srv-$1" "$NS_A" ${2:-} python3 -u -c '
import os, socket, sys
port, n = int(sys.argv[1]), int(sys.argv[2])
l = socket.socket()
l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
l.bind(("127.0.0.1", port))
l.listen(128)
print("ready")
for i in range(n):
    c, _ = l.accept()
    pid = os.fork() if i % 2 else 0
    if pid:
        c.close()
        os.waitpid(pid, 0)
        continue
    got = b""
    while True:
        b = c.recv(65536)
        if not b:
            break
        got += b
    if got[:1] != b"2":
        c.sendall(b"%d %d\n" % (len(got), sum(got) % 65521))
    print("conn %d: %d bytes, sum %d, eof" % (i, len(got), sum(got) % 65521))
    c.close()
    if i % 2:
        os._exit(0)
print("done")
' "$1" $N
	rs_wait_ready "srv-$1"
}

client() { # PORT [--rshare]
	rs_exec "$NS_A" ${2:-} python3 -u -c '
import os, socket, sys
port, n = int(sys.argv[1]), int(sys.argv[2])
def one(i):
    mode = i % 3
    c = socket.create_connection(("127.0.0.1", port))
    data = (b"%d" % mode) + bytes((i * 7 + k) % 251 for k in range(1000 + i * 997))
    c.sendall(data)
    if mode == 2:
        c.close()
        return
    c.shutdown(socket.SHUT_WR)
    got = b""
    while True:
        b = c.recv(100)
        if not b:
            break
        got += b
    c.close()
    print("conn %d: reply %s" % (i, got.decode().strip()))
for i in range(n):
    if i % 3 == 0:
        one(i)
        continue
    pid = os.fork()
    if pid == 0:
        one(i)
        sys.stdout.flush()
        os._exit(0)
    os.waitpid(pid, 0)
print("client done")
' "$1" $N
}

@test "set-up and close through request cells: forked servers and clients that _exit after close, as on kernel TCP" {
	local tcp rs
	server 7811
	tcp=$(client 7811)
	rs_wait_file "$RS_TMP/srv-7811.out" '^done$' 1 30
	server 7812 --rshare
	rs=$(client 7812 --rshare)
	rs_wait_file "$RS_TMP/srv-7812.out" '^done$' 1 30 || true
	[[ $(grep -c reply <<<"$tcp") == $((N * 2 / 3)) ]] || rs_fail "kernel TCP client: $tcp"
	[[ $rs == "$tcp" ]] || { diff <(echo "$tcp") <(echo "$rs") >&2; rs_fail "the clients differ"; }
	diff "$RS_TMP/srv-7811.out" "$RS_TMP/srv-7812.out" >&2 || rs_fail "the servers differ"
	rs_stat "$NS_A" >"$RS_TMP/stat.json"
	rs_jq_check "the requests went through the cells" --slurpfile a "$RS_TMP/stat.json" --argjson n $N '
		$a[0].counters as $c |
		fail($c.local_connects >= $n; "\($c.local_connects) same-node connections, want \($n)"),
		fail($c.cell_requests >= 3 * $n; "\($c.cell_requests) requests through cells, want at least \(3 * $n)")'
}
