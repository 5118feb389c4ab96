#!/usr/bin/env bats
# A connect to another node where its hub accepted a connection to the
# same port of late is answered by the client's own hub at once, before
# the server's hub has seen it (core/hub/early.c), as kernel TCP's connect
# returns without the server program.  What the program then writes, its
# FIN and its close must reach the server whole and in order, and a port
# whose listener closed must refuse the connect, as on kernel TCP.  One
# Python client and server, run on kernel TCP and under rshare, across
# two nodes:
#  - 120 connections one after another, each writing a request of 10 B to
#    1 MiB (past the bytes that go before the server hub's answer, and
#    past the send ring) and shutting down its sending side at once, then
#    reading the server's digest of what it got;
#  - 40 that write and close at once, without reading;
#  - the server closes its listener, and a connect to it is refused.
# The transcripts must be the same, and the client's hub must have
# answered most of the connects early (stat's early_connects), none
# falling back to kernel TCP.

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
import hashlib, socket, sys, time
l = socket.socket()
l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
l.bind(("0.0.0.0", int(sys.argv[1])))
l.listen(64)
print("ready", flush=True)
closed_ok = 0
while True:
    a, _ = l.accept()
    h, n = hashlib.sha256(), 0
    while True:
        b = a.recv(65536)
        if not b:
            break
        h.update(b)
        n += len(b)
    got = h.hexdigest()[:16]
    if n == 4 and got == hashlib.sha256(b"STOP").hexdigest()[:16]:
        l.close()
        time.sleep(0.3)  # the close reaches the hubs before the answer
        a.sendall(b"%d closed right" % closed_ok)
        a.close()
        break
    if n >= 1000 and n % 1000 == 7:  # a writer that closed at once
        closed_ok += got == hashlib.sha256(bytes(i * 7 % 251 for i in range(n))).hexdigest()[:16]
        a.close()
        continue
    a.sendall(b"%d %s" % (n, got.encode()))
    a.close()
'

CLIENT='
import errno, hashlib, socket, sys
addr = (sys.argv[1], int(sys.argv[2]))
sizes = [10, 100, 3000, 4096, 5000, 70000, 1 << 20, 64]
def body(n):
    return bytes(i * 7 % 251 for i in range(n))
bodies = {n: body(n) for n in sizes + [1007, 20007, 300007]}
def reply(c):
    out = b""
    while True:
        b = c.recv(4096)
        if not b:
            return out
        out += b
right = 0
for i in range(120):
    n = sizes[i % len(sizes)]
    c = socket.create_connection(addr)
    c.sendall(bodies[n])
    c.shutdown(socket.SHUT_WR)
    want = b"%d %s" % (n, hashlib.sha256(bodies[n]).hexdigest()[:16].encode())
    right += reply(c) == want
    c.close()
print("120 requests, %d digests right" % right)
for i in range(40):
    c = socket.create_connection(addr)
    c.sendall(bodies[[1007, 20007, 300007][i % 3]])
    c.close()
c = socket.create_connection(addr)
c.sendall(b"STOP")
c.shutdown(socket.SHUT_WR)
print("40 written and closed at once: %s" % reply(c).decode())
c.close()
try:
    c = socket.create_connection(addr)
    c.sendall(b"x")
    print("after the listener closed: connected, read %r" % c.recv(10))
except OSError as e:
    print("after the listener closed: %s" % errno.errorcode.get(e.errno, e.errno))
'

@test "connects answered before the server's hub deliver every byte, FIN and refusal as on kernel TCP" {
	local out=() pre port b
	for pre in "" --rshare; do
		port=7471
		[[ -n $pre ]] && port=7472
		rs_bg "server$port" "$NS_A" $pre python3 -c "$SERVER" $port
		rs_wait_ready "server$port"
		out+=("$(rs_exec "$NS_B" $pre python3 -c "$CLIENT" $ADDR_A $port 2>&1)")
		rs_wait_pid "$RS_LASTPID" 20 || rs_fail "server on $port: exit $?: $(tail -n 5 "$RS_TMP/server$port.err")"
	done
	[[ ${out[0]} == $'120 requests, 120 digests right\n40 written and closed at once: 40 closed right\nafter the listener closed: ECONNREFUSED' ]] ||
		rs_fail "kernel TCP: '${out[0]}'"
	[[ ${out[1]} == "${out[0]}" ]] || rs_fail "under rshare: '${out[1]}'"
	rs_stat "$NS_B" >"$RS_TMP/statB.json"
	rs_jq_check "the client's hub answered connects early, over the link" --slurpfile b "$RS_TMP/statB.json" '
		$b[0] as $B |
		fail($B.counters.fallback_connects == 1; "fallback_connects \($B.counters.fallback_connects), want 1 (the refused connect)"),
		fail($B.counters.early_connects >= 100; "early_connects \($B.counters.early_connects), want 100 or more of 162"),
		fail(($B.links[0].connections_total // 0) >= 161; "the link carried \($B.links[0].connections_total // 0) connections, want 161")'
}
