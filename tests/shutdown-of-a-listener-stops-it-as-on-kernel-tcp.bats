#!/usr/bin/env bats
# shutdown(2) of a listening socket with SHUT_RD or SHUT_RDWR stops it, as
# the kernel closes its listener (a way servers stop accepting without
# closing the descriptor): the connection it had queued is reset, a
# blocked accept and later ones fail with EINVAL, and new connections are
# refused; SHUT_WR leaves it listening.  On rshare the hub stops its
# listener too (core/hub/close.c, hsock_listener_stop), where before it
# went on taking connections that nobody would accept, and their clients
# waited forever.  The program runs on kernel TCP and on rshare, within one
# node and with its client across nodes; the transcripts are the same.
# waits: a blocked accept and the pauses between the program's steps, a third of its time on a CPU (tests/run runs it beside the others)

load lib

setup() {
	rs_require
	rs_setup
	rs_two_nodes
}

teardown() {
	rs_teardown
}

# on one node: the queued connection, a blocked accept, a later connect
ONE='
import errno, socket, sys, threading, time
port = int(sys.argv[1])
def name(e): return errno.errorcode.get(e.errno, str(e))
def listener(p):
    l = socket.socket(); l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    l.bind(("127.0.0.1", p)); l.listen(8); return l
w = listener(port + 1)
w.shutdown(socket.SHUT_WR)
c = socket.create_connection(("127.0.0.1", port + 1)); s, _ = w.accept()
print("after SHUT_WR: still accepts")
l = listener(port)
q = socket.create_connection(("127.0.0.1", port))
time.sleep(0.3)
l.shutdown(socket.SHUT_RDWR)
try:
    print("queued connection reads", q.recv(1))
except OSError as e:
    print("queued connection reads", name(e))
for what in ("accept",):
    try:
        l.accept(); print("accept: ok")
    except OSError as e:
        print("accept:", name(e))
try:
    socket.create_connection(("127.0.0.1", port), timeout=2); print("connect: ok")
except OSError as e:
    print("connect:", name(e))
'

# across nodes: the server stops its listener, then the client on B dials
SERVER='
import errno, socket, sys, time
l = socket.socket(); l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
l.bind(("0.0.0.0", int(sys.argv[1]))); l.listen(8)
c, _ = l.accept(); c.sendall(b"x"); c.close()
l.shutdown(socket.SHUT_RD)
print("ready", flush=True)
try:
    l.accept(); print("accept: ok")
except OSError as e:
    print("accept:", errno.errorcode.get(e.errno))
'

CLIENT='
import errno, socket, sys, time
c = socket.create_connection((sys.argv[1], int(sys.argv[2]))); print("first connection reads", c.recv(1))
time.sleep(1)
try:
    socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=3); print("connect: ok")
except OSError as e:
    print("connect:", errno.errorcode.get(e.errno, str(e)))
'

# both_ways NAME PORT [--rshare]: the one-node transcript, then the
# cross-node one (client's lines, then the server's)
both_ways() {
	local name=$1 port=$2 pre=${3:-}
	RS_TIMEOUT=30 rs_exec "$NS_A" $pre python3 -c "$ONE" "$port" 2>&1
	rs_bg "$name" "$NS_A" $pre python3 -c "$SERVER" $((port + 2))
	sleep 0.5
	RS_TIMEOUT=30 rs_exec "$NS_B" $pre python3 -c "$CLIENT" $ADDR_A $((port + 2)) 2>&1
	rs_wait_pid "$RS_LASTPID" 20 || true
	rs_wait_file "$RS_TMP/$name.out" '^accept' 1 10 || true
	grep -v '^ready' "$RS_TMP/$name.out"
}

@test "shutdown of a listener resets what it queued, fails accept with EINVAL and refuses new connections, as on kernel TCP" {
	local k r
	k=$(both_ways kernel 7931)
	r=$(both_ways rshare 7935 --rshare)
	echo "kernel TCP:"
	echo "$k"
	echo "rshare:"
	echo "$r"
	[[ $k == *"queued connection reads ECONNRESET"* && $k == *"connect: ECONNREFUSED"* ]] ||
		rs_fail "kernel TCP: not what the test is for"
	[[ $r == "$k" ]] || rs_fail "rshare differs"
	grep -q "listener [0-9]* on port 7935" "$RS_TMP/hub-$NS_A.err" && grep -q "listener [0-9]* on port 7937" "$RS_TMP/hub-$NS_A.err" ||
		rs_fail "the listeners were not rshare's"
	rs_stat "$NS_B" | jq -e '([.links[] | .connections_total] | add // 0) >= 1' >/dev/null ||
		rs_fail "the first cross-node connection did not go over the link"
}
