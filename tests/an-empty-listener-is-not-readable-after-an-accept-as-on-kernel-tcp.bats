#!/usr/bin/env bats
# A listener whose last connection was just accepted is not readable: an
# epoll set (timeout 0) reports nothing, as on kernel TCP.  The program
# (Python, one node, 127.0.0.1) accepts 600 connections one at a time in
# a blocking accept and asks its epoll set about the listener after each.
# Under rshare the thread that polls the listener for a connection asks
# the hub for it as soon as it sees it, and the hub writes the listener's
# eventfd before it answers: that write, after the accept's first drain,
# left the eventfd readable (296 of 2000 accepts here), until the accept
# drained it again once it had its connection (preload/socket.c).  The
# transcripts must be the same, and stat proves that the connections were
# rshare's.

load lib

setup() {
	rs_require
	rs_setup
	rs_netns "$NS_A"
}

teardown() {
	rs_teardown
}

@test "an empty listener is not readable in an epoll set after each accept, as on kernel TCP" {
	local prog plain pre n
	prog='
import select, socket, sys, threading
n = 600
l = socket.socket()
l.bind(("127.0.0.1", int(sys.argv[1])))
l.listen(16)
ep = select.epoll()
ep.register(l.fileno(), select.EPOLLIN)
go, done = threading.Semaphore(0), threading.Semaphore(0)
def dial():
    for i in range(n):
        go.acquire()
        c = socket.create_connection(("127.0.0.1", int(sys.argv[1])))
        done.acquire()
        c.close()
threading.Thread(target=dial, daemon=True).start()
bad = 0
for i in range(n):
    go.release()
    a, _ = l.accept()
    bad += len(ep.poll(0))
    a.close()
    done.release()
print("accepted %d, readable when empty after %d" % (n, bad))
'
	plain=$(ip netns exec "$NS_A" timeout 60 python3 -c "$prog" 7461 2>&1)
	pre=$(ip netns exec "$NS_A" timeout 60 "$RSHARE" run -- python3 -c "$prog" 7462 2>&1)
	[[ $plain == "accepted 600, readable when empty after 0" ]] || rs_fail "kernel TCP: '$plain'"
	[[ $pre == "$plain" ]] || rs_fail "under rshare: '$pre'"
	n=$(rs_stat "$NS_A" | jq .counters.local_connects)
	((n == 600)) || rs_fail "the hub counted $n same-node connections, want 600"
}
