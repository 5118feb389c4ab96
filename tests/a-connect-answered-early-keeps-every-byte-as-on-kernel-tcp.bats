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
#  - the server closes its listener, and a connect to it is refused;
#  - a listener that stops between a connect answered early and the
#    arrival of its CONNECT (the server hub stopped meanwhile) resets it.
# And a fake peer hub (bad-peer early) that sends 200 such connects to a
# listener of backlog 1 that does not accept, each with a write behind it:
# 68 are queued (twice the backlog's 2, and 64), the rest refused for want
# of room, their writes dropped, and its link kept.
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

# The moment between: a listener that stops after a connect answered early
# and before its CONNECT reaches the server's hub.  Under rshare the
# server's hub is stopped (SIGSTOP) while the client connects (answered by
# its own hub, the port known from a first connection) and writes, and
# while the server closes its listener without accepting; then it goes on,
# takes the close first, refuses the CONNECT and drops the bytes that came
# with it.  On kernel TCP (no hub to stop) the connection completes in the
# kernel and the listener's close resets it.  Both: the client's read
# fails with ECONNRESET, and a connect after that is refused.
SERVER2='
import os, socket, sys, time
d = sys.argv[2]
def wait(f):
    while not os.path.exists(os.path.join(d, f)):
        time.sleep(0.01)
l = socket.socket()
l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
l.bind(("0.0.0.0", int(sys.argv[1])))
l.listen(8)
print("ready", flush=True)
a, _ = l.accept()
while a.recv(4096):
    pass
a.sendall(b"hi")
a.close()
wait("c2up")
l.close()
open(os.path.join(d, "lclosed"), "w").close()
'

CLIENT2='
import errno, os, socket, sys, time
addr, d = (sys.argv[1], int(sys.argv[2])), sys.argv[3]
def wait(f):
    while not os.path.exists(os.path.join(d, f)):
        time.sleep(0.01)
def err(e):
    return errno.errorcode.get(e.errno, e.errno)
c = socket.create_connection(addr)
c.sendall(b"hello")
c.shutdown(socket.SHUT_WR)
print("first: %s" % c.recv(10).decode())
c.close()
open(os.path.join(d, "c1done"), "w").close()
wait("stopped")
c = socket.create_connection(addr)
c.sendall(b"x" * 3000)
print("second connected, 3000 bytes written")
open(os.path.join(d, "c2up"), "w").close()
wait("closed")
try:
    print("second read: %r" % c.recv(10))
except OSError as e:
    print("second read: %s" % err(e))
try:
    socket.create_connection(addr)
    print("third: connected")
except OSError as e:
    print("third: %s" % err(e))
'

@test "a listener that stops between a connect answered early and its CONNECT resets it, as on kernel TCP" {
	local out=() pre port d hub=
	for pre in "" --rshare; do
		port=7473
		[[ -n $pre ]] && port=7474
		d=$RS_TMP/steps$port
		mkdir -p "$d"
		rs_bg "server$port" "$NS_A" $pre python3 -c "$SERVER2" $port "$d"
		rs_wait_ready "server$port"
		rs_bg "client$port" "$NS_B" $pre python3 -c "$CLIENT2" $ADDR_A $port "$d"
		local cpid=$RS_LASTPID
		rs_retry 20 test -e "$d/c1done" || rs_fail "no first connection: $(cat "$RS_TMP/client$port.err")"
		if [[ -n $pre ]]; then
			hub=$(rs_stat "$NS_A" | jq .hub_pid)
			kill -STOP "$hub"
		fi
		touch "$d/stopped"
		rs_retry 20 test -e "$d/lclosed" || rs_fail "the server did not close its listener"
		[[ -n $pre ]] && kill -CONT "$hub"
		touch "$d/closed"
		rs_wait_pid "$cpid" 30 || rs_fail "client on $port: exit $?: $(tail -n 5 "$RS_TMP/client$port.err")"
		out+=("$(cat "$RS_TMP/client$port.out")")
	done
	[[ ${out[0]} == $'first: hi\nsecond connected, 3000 bytes written\nsecond read: ECONNRESET\nthird: ECONNREFUSED' ]] ||
		rs_fail "kernel TCP: '${out[0]}'"
	[[ ${out[1]} == "${out[0]}" ]] || rs_fail "under rshare: '${out[1]}'"
	rs_stat "$NS_B" >"$RS_TMP/statB.json"
	rs_stat "$NS_A" >"$RS_TMP/statA.json"
	rs_jq_check "the second connect was answered early, and the link stayed" \
		--slurpfile a "$RS_TMP/statA.json" --slurpfile b "$RS_TMP/statB.json" '
		$a[0] as $A | $b[0] as $B |
		fail($B.counters.early_connects == 1; "early_connects \($B.counters.early_connects), want 1"),
		fail($A.counters.stale_dropped >= 1; "the server hub dropped no write: the bytes did not come before the REFUSE"),
		fail($A.counters.malformed == 0 and $B.counters.malformed == 0; "malformed frames"),
		fail($A.counters.links_dropped == 0 and $B.counters.links_dropped == 0; "a link was dropped"),
		fail(($B.links[0].state // "") == "up"; "the link is \($B.links[0].state // "gone")")'
}

@test "a peer hub that ignores the room it was given gets no more than twice a backlog queued, and keeps its link" {
	rs_require bad-peer
	rs_bg server "$NS_A" --rshare python3 -c '
import socket, sys, time
l = socket.socket()
l.bind(("0.0.0.0", 7475))
l.listen(1)
print("ready", flush=True)
time.sleep(60)'
	rs_wait_ready server
	run rs_exec "$NS_B" "$RS_BIN/bad-peer" -p 7475 early $ADDR_A $RS_PORT
	echo "$output"
	[[ $status -eq 0 ]]
	# backlog 1: 2 queued as the kernel's, then up to twice that and 64
	[[ ${lines[0]} == "early: 68 accepted, 132 refused for want of room" ]]
	[[ ${lines[1]} == "link kept" ]]
	rs_stat "$NS_A" >"$RS_TMP/statA.json"
	rs_jq_check "nothing malformed, the write for no socket dropped" --slurpfile a "$RS_TMP/statA.json" '
		$a[0] as $A |
		fail($A.counters.malformed == 0; "malformed \($A.counters.malformed)"),
		fail($A.counters.stale_dropped >= 133; "stale_dropped \($A.counters.stale_dropped), want 133 or more")'
}
