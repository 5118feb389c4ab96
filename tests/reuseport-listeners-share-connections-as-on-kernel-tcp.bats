#!/usr/bin/env bats
# Listeners of one address and port with SO_REUSEPORT (nginx's
# `reuseport`, gunicorn's --reuse-port: a listener per worker) share the
# connections, as the kernel spreads them over the group by a hash of each
# connection's source (core/hub/conn.c, find_listener).  Four processes on
# node A each listen with SO_REUSEPORT; a client on node B makes 200
# connections, one at a time, each answered with one byte by whichever
# process took it.  On kernel TCP and on rshare alike every connection is
# answered and every one of the four listeners takes some; the hubs' stat
# shows the rshare run's connections on the link.

load lib

setup() {
	rs_require
	rs_setup
	rs_two_nodes
}

teardown() {
	rs_teardown
}

SERVER='
import os, socket, sys, time
port, n = int(sys.argv[1]), 4
kids = []
for i in range(n):
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        l = socket.socket(); l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        l.bind(("0.0.0.0", port)); l.listen(64)
        os.write(w, b"up")
        l.settimeout(3)
        got = 0
        try:
            while True:
                c, _ = l.accept(); c.sendall(b"x"); c.close(); got += 1
                l.settimeout(1.5)
        except OSError:
            pass
        os.write(w, b"%d\n" % got)
        os._exit(0)
    os.close(w)
    os.read(r, 2)
    kids.append(r)
print("ready", flush=True)
counts = [int(os.read(r, 32)) for r in kids]
print("listeners %d, all took some: %s, connections %d" % (n, all(counts), sum(counts)), flush=True)
'

CLIENT='
import socket, sys
ok = 0
for i in range(200):
    c = socket.create_connection((sys.argv[1], int(sys.argv[2])))
    ok += c.recv(1) == b"x"
    c.close()
print("answered", ok)
'

# spread NAME PORT [--rshare]: the client's line, then the server's
spread() {
	local name=$1 port=$2 pre=${3:-}
	rs_bg "$name" "$NS_A" $pre python3 -c "$SERVER" "$port"
	rs_wait_ready "$name"
	RS_TIMEOUT=60 rs_exec "$NS_B" $pre python3 -c "$CLIENT" $ADDR_A "$port" 2>&1
	rs_wait_pid "$RS_LASTPID" 20 || true
	rs_wait_file "$RS_TMP/$name.out" '^listeners' 1 20 || true
	grep '^listeners' "$RS_TMP/$name.out"
}

@test "SO_REUSEPORT listeners of four processes share the connections, as on kernel TCP" {
	local k r
	k=$(spread kernel 7951)
	r=$(spread rshare 7952 --rshare)
	echo "kernel TCP: $k"
	echo "rshare: $r"
	[[ $k == $'answered 200\nlisteners 4, all took some: True, connections 200' ]] || rs_fail "kernel TCP: not what the test is for"
	[[ $r == "$k" ]] || rs_fail "rshare differs"
	rs_stat "$NS_B" | jq -e '.counters.fallback_connects == 0 and ([.links[] | .connections_total] | add // 0) >= 200' \
		>/dev/null || rs_fail "not over rshare: $(rs_stat "$NS_B" | jq -c '[.counters.fallback_connects, [.links[] | .connections_total]]')"
}
