#!/usr/bin/env bats
# A process that ends holding a connection, however it ends (exit, _exit,
# SIGKILL; a dash script that exits with _exit), closes it as the kernel
# closes a dead process's files: as close() would, FIN after the bytes it
# wrote, and a reset only when it leaves received bytes unread or set
# SO_LINGER 0.  The server of each case, on node A, writes "bye" and ends
# one way; the client on node B prints what it read and how the stream
# ended.  Each case runs on kernel TCP and on rshare (across a soft link),
# and the transcripts are the same; the hubs' stat shows the rshare runs'
# connections.
# waits: each case waits for its server to end and its peer to see it, half its time on a CPU (tests/run runs it beside the others)

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
import os, signal, socket, struct, subprocess, sys
how, port = sys.argv[1], int(sys.argv[2])
l = socket.socket(); l.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
l.bind(("0.0.0.0", port)); l.listen(1); print("ready", flush=True)
c, _ = l.accept()
l.close()
c.sendall(b"bye\n")
if how in ("unread", "linger0"):
    c.recv(1, socket.MSG_PEEK)  # the client read "bye" and wrote: its byte stays unread
    if how == "linger0":
        c.recv(1)
        c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    os._exit(0)
if how == "exit":
    sys.exit(0)
if how == "_exit":
    os._exit(0)
if how == "kill":
    os.kill(os.getpid(), signal.SIGKILL)
if how == "child":  # a forked child goes on with it after its parent ended
    if os.fork() == 0:
        c.recv(1)
        c.sendall(b"from the child\n")
        os._exit(0)
    os._exit(0)
if how == "dash":  # the connection as a script'"'"'s standard streams
    os.dup2(c.fileno(), 0); os.dup2(c.fileno(), 1)
    os.execvp("dash", ["dash", "-c", "read l; echo got $l"])
'

CLIENT='
import socket, sys, time
how = sys.argv[3]
c = socket.create_connection((sys.argv[1], int(sys.argv[2])))
got = b""
while not got.endswith(b"\n"):
    got += c.recv(100)
if how in ("unread", "linger0", "child", "dash"):
    time.sleep(0.2)
    c.sendall(b"x\n")
try:
    while True:
        b = c.recv(100)
        if not b:
            print(how, repr(got), "then EOF")
            break
        got += b
except OSError as e:
    print(how, repr(got), "then", e.strerror)
'

# ends NAME PORT [--rshare]: every case, a line each
ends() {
	local name=$1 port=$2 pre=${3:-} how
	for how in exit _exit kill unread linger0 child dash; do
		port=$((port + 1))
		rs_bg "$name-$how" "$NS_A" $pre python3 -c "$SERVER" "$how" "$port"
		rs_wait_ready "$name-$how"
		RS_TIMEOUT=30 rs_exec "$NS_B" $pre python3 -c "$CLIENT" $ADDR_A "$port" "$how" 2>&1
	done
}

@test "a process that ends holding a connection (exit, _exit, SIGKILL, dash) closes it as on kernel TCP: FIN, a reset only for unread bytes or SO_LINGER 0" {
	local k r
	command -v dash >/dev/null || skip "no dash"
	k=$(ends kernel 7980)
	r=$(ends rshare 7990 --rshare)
	echo "kernel TCP:"
	echo "$k"
	[[ $k == *"_exit b'bye\\n' then EOF"* && $k == *"unread b'bye\\n' then Connection reset by peer"* ]] ||
		rs_fail "kernel TCP: not what the cases are for"
	[[ $r == "$k" ]] || { diff <(echo "$k") <(echo "$r") >&2; rs_fail "rshare differs (> lines)"; }
	rs_stat "$NS_B" | jq -e '.counters.fallback_connects == 0 and ([.links[] | .connections_total] | add // 0) >= 7' \
		>/dev/null || rs_fail "not over rshare: $(rs_stat "$NS_B" | jq -c '[.counters, .links]')"
}
